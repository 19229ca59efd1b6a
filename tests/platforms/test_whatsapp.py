"""WhatsAppAdapter: its webhook server and the fake Graph API, over loopback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
import trio

from hermes_trio.config import WhatsAppConfig
from hermes_trio.consumers.messenger import PlatformError, RateLimited
from hermes_trio.platforms.base import InboundMessage
from hermes_trio.platforms.whatsapp.adapter import TokenRejected, WhatsAppAdapter
from hermes_trio.testing.fake_whatsapp import (
    FakeWhatsApp,
    open_fake_whatsapp,
    sign,
    text_message_payload,
)


@asynccontextmanager
async def running(
    **config_overrides: object,
) -> AsyncIterator[tuple[FakeWhatsApp, WhatsAppAdapter, trio.MemoryReceiveChannel[InboundMessage]]]:
    async with open_fake_whatsapp() as fake, httpx.AsyncClient() as client:
        fields: dict[str, object] = {
            "access_token": fake.access_token,
            "phone_number_id": fake.phone_number_id,
            "app_secret": fake.app_secret,
            "verify_token": fake.verify_token,
            "api_base_url": fake.base_url,
            "webhook_port": 0,
            **config_overrides,
        }
        adapter = WhatsAppAdapter(WhatsAppConfig(**fields), client)  # type: ignore[arg-type]
        send, recv = trio.open_memory_channel[InboundMessage](10)
        async with trio.open_nursery() as nursery:
            with trio.fail_after(5):
                await nursery.start(adapter.run, send)
            assert adapter.webhook_url is not None
            with trio.fail_after(10):
                yield fake, adapter, recv
            nursery.cancel_scope.cancel()


async def test_webhook_verification() -> None:
    async with running() as (fake, adapter, _):
        assert adapter.webhook_url
        ok = await fake.verify(adapter.webhook_url, challenge="8817")
        assert ok.status_code == 200 and ok.text == "8817"
        wrong = await fake.verify(adapter.webhook_url, verify_token="nope")
        assert wrong.status_code == 403
        assert "8817" not in wrong.text


async def test_signed_text_message_becomes_inbound() -> None:
    async with running() as (fake, adapter, recv):
        assert adapter.webhook_url
        r = await fake.deliver_text(adapter.webhook_url, "15551234567", "hola", name="Ana")
        assert r.status_code == 200
        msg = await recv.receive()
    assert msg == InboundMessage(
        platform="whatsapp",
        chat_id="15551234567",
        user_id="15551234567",
        text="hola",
        message_id="wamid.IN1",
        user_name="Ana",
    )


async def test_bad_or_missing_signature_is_refused() -> None:
    async with running() as (fake, adapter, recv):
        url = adapter.webhook_url
        assert url
        payload = text_message_payload("1555", "evil", message_id="wamid.X")
        body = json.dumps(payload).encode()
        missing = await fake.post_webhook(url, body, signature=None)
        forged = await fake.post_webhook(url, body, signature=sign(body, "other-secret"))
        garbage = await fake.post_webhook(url, body, signature="sha256=not-hex")
        tampered = await fake.post_webhook(
            url, body.replace(b"evil", b"evi1"), signature=sign(body, fake.app_secret)
        )
        assert missing.status_code == 401
        assert forged.status_code == 403
        assert garbage.status_code == 403
        assert tampered.status_code == 403
        # Nothing got through; the channel is still empty.
        assert recv.statistics().current_buffer_used == 0


async def test_redelivery_statuses_and_strangers_are_dropped() -> None:
    async with running(allowed_users=["1555"]) as (fake, adapter, recv):
        url = adapter.webhook_url
        assert url
        await fake.deliver_text(url, "1555", "first", message_id="wamid.A")
        await fake.deliver_text(url, "1555", "first", message_id="wamid.A")  # Meta retry
        await fake.deliver_text(url, "1999", "stranger")
        status_update = {
            "object": "whatsapp_business_account",
            "entry": [{"changes": [{"value": {"statuses": [{"id": "wamid.OUT1"}]}}]}],
        }
        assert (await fake.post_webhook(url, status_update)).status_code == 200
        for junk in ({"entry": "x"}, {"entry": [{"changes": [{"value": []}]}]}, b"[1, 2]"):
            assert (await fake.post_webhook(url, junk)).status_code == 200
        assert (await fake.post_webhook(url, b"{not json")).status_code == 400
        await fake.deliver_text(url, "1555", "second")
        got = [await recv.receive(), await recv.receive()]
        assert recv.statistics().current_buffer_used == 0
    assert [m.text for m in got] == ["first", "second"]


async def test_send_and_capabilities() -> None:
    async with running() as (fake, adapter, _):
        m = adapter.messenger("15551234567")
        assert not m.capabilities.can_edit and m.capabilities.max_length == 4096
        assert m.capabilities.length_unit == "chars"
        mid = await m.send("Hello *there*")
        assert mid == "wamid.OUT1"
        (sent,) = fake.sent
        assert sent.payload["messaging_product"] == "whatsapp"
        assert sent.payload["type"] == "text"
        assert fake.texts_to("15551234567") == ["Hello *there*"]
        with pytest.raises(PlatformError, match="cannot edit"):
            await m.edit(mid, "changed")
        await m.typing()


async def test_rate_limit_and_errors() -> None:
    async with running() as (fake, adapter, _):
        m = adapter.messenger("1555")
        fake.fail_next(429, "(#130429) Rate limit hit", code=130429, headers=[("Retry-After", "3")])
        with pytest.raises(RateLimited) as info:
            await m.send("a")
        assert info.value.retry_after == 3
        fake.fail_next(400, "(#131056) Pair rate limit hit", code=131056)
        with pytest.raises(RateLimited):
            await m.send("a")
        with pytest.raises(PlatformError, match="at most 4096"):
            await m.send("x" * 4097)


async def test_bad_access_token_fails_at_start_and_on_send_without_showing_it() -> None:
    async with open_fake_whatsapp() as fake, httpx.AsyncClient() as client:
        config = WhatsAppConfig(
            access_token="EAAG-wrong-token",
            phone_number_id=fake.phone_number_id,
            app_secret=fake.app_secret,
            api_base_url=fake.base_url,
            webhook_port=0,
        )
        adapter = WhatsAppAdapter(config, client)
        send, _ = trio.open_memory_channel[InboundMessage](1)
        with trio.fail_after(5), pytest.raises(TokenRejected) as info:
            await adapter.run(send)
        assert "EAAG-wrong-token" not in str(info.value)
        with trio.fail_after(5), pytest.raises(TokenRejected, match="access token was rejected"):
            await adapter.messenger("1555").send("hi")
        assert fake.sent == []


async def test_oversized_webhook_body_is_refused() -> None:
    async with running() as (fake, adapter, recv):
        assert adapter.webhook_url
        big = text_message_payload("1555", "x" * (2 * 1024 * 1024), message_id="wamid.BIG")
        r = await fake.post_webhook(adapter.webhook_url, big)
        assert r.status_code == 413
        assert recv.statistics().current_buffer_used == 0


def test_missing_config_is_reported() -> None:
    with pytest.raises(PlatformError, match=r"platforms\.whatsapp\.app_secret"):
        WhatsAppAdapter(WhatsAppConfig(access_token="t", phone_number_id="1"), httpx.AsyncClient())


JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 4 + b"\xff\xd9"


async def test_media_messages_become_attachments_fetched_through_the_graph_api() -> None:
    async with running() as (fake, adapter, recv):
        url = adapter.webhook_url
        assert url
        await fake.deliver_media(url, "1555", "image", JPEG, "image/jpeg", caption="what is it?")
        voice = b"OggS-voice"
        await fake.deliver_media(url, "1555", "audio", voice, "audio/ogg; codecs=opus", voice=True)
        await fake.deliver_media(url, "1555", "audio", b"ID3", "audio/mpeg")
        pdf = b"%PDF-1.7"
        await fake.deliver_media(
            url, "1555", "document", pdf, "application/pdf", filename="bill.pdf"
        )
        image, note, song, bill = [await recv.receive() for _ in range(4)]
        assert (image.text, note.text, song.text, bill.text) == ("what is it?", "", "", "")
        assert [
            (a.mime_type, a.name) for m in (image, note, song, bill) for a in m.attachments
        ] == [
            ("image/jpeg", "image"),
            ("audio/ogg; codecs=opus", "voice message"),
            ("audio/mpeg", "audio"),
            ("application/pdf", "bill.pdf"),
        ]
        assert fake.downloads == []  # nothing is fetched until someone needs it
        assert await image.attachments[0].fetch() == JPEG
        assert await note.attachments[0].fetch() == voice
        (image_id, voice_id, _, _) = fake.media
        assert fake.downloads == [image_id, voice_id]
        lookups = [c for c in fake.calls if c.method == "GET" and c.path.endswith(image_id)]
        assert [c.status for c in lookups] == [200]


async def test_a_media_download_the_graph_api_refuses_is_a_platform_error() -> None:
    async with running() as (fake, adapter, recv):
        assert adapter.webhook_url
        await fake.deliver_media(adapter.webhook_url, "1555", "image", JPEG, "image/png")
        message = await recv.receive()
        fake.media.clear()  # expired on Meta's side
        with pytest.raises(PlatformError, match="whatsapp media"):
            await message.attachments[0].fetch()
        # The media URL itself wants the bearer token.
        media_id = fake.add_media(JPEG, "image/jpeg")
        async with httpx.AsyncClient() as client:
            refused = await client.get(fake.media_url(media_id))
        assert refused.status_code == 401


async def test_other_kinds_become_text_or_a_named_attachment_and_reactions_are_ignored() -> None:
    async with running() as (fake, adapter, recv):
        url = adapter.webhook_url
        assert url
        location = {"latitude": 52.52, "longitude": 13.405, "name": "Cafe", "address": "Alex 1"}
        await fake.deliver_message(
            url, "1555", "reaction", {"message_id": "wamid.OUT1", "emoji": "👍"}
        )
        await fake.deliver_message(url, "1555", "location", location)
        reply = {"type": "button_reply", "button_reply": {"id": "yes", "title": "Yes please"}}
        await fake.deliver_message(url, "1555", "interactive", reply)
        contact = [{"name": {"formatted_name": "Ana"}, "phones": [{"phone": "+1 555"}]}]
        await fake.post_webhook(
            url,
            {
                "object": "whatsapp_business_account",
                "entry": [
                    {
                        "changes": [
                            {
                                "value": {
                                    "metadata": {"phone_number_id": fake.phone_number_id},
                                    "messages": [
                                        {
                                            "from": "1555",
                                            "id": "wamid.C",
                                            "type": "contacts",
                                            "contacts": contact,
                                        }
                                    ],
                                }
                            }
                        ]
                    }
                ],
            },
        )
        got = [await recv.receive() for _ in range(3)]
        assert recv.statistics().current_buffer_used == 0
    assert [m.text for m in got] == [
        "📍 My location: Cafe, Alex 1 (52.52, 13.405)",
        "Yes please",
        "",
    ]
    assert [(a.mime_type, a.name) for a in got[2].attachments] == [(None, "a shared contact")]


async def test_a_button_press_passes_the_allow_list() -> None:
    # An approver need not be in allowed_users: the approval decides whether
    # the press counts (and acknowledges it), so the adapter lets it through;
    # a stranger's text is still dropped.
    async with running(allowed_users=["1555"]) as (fake, adapter, recv):
        url = adapter.webhook_url
        assert url
        reply = {"type": "button_reply", "button_reply": {"id": "y:mcpr_1", "title": "Approve"}}
        await fake.deliver_text(url, "1999", "stranger")
        await fake.deliver_message(url, "1999", "interactive", reply)
        got = await recv.receive()
        assert recv.statistics().current_buffer_used == 0
    assert got.user_id == "1999"
    assert got.press is not None and got.press.data == "y:mcpr_1"
