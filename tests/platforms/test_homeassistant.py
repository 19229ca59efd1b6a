"""HomeAssistantAdapter: inbound webhook and REST replies, against the fake HA."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
import trio

from hermes_trio.config import HomeAssistantConfig
from hermes_trio.consumers.messenger import PlatformError
from hermes_trio.platforms.base import InboundMessage
from hermes_trio.platforms.homeassistant.adapter import HomeAssistantAdapter, TokenRejected
from hermes_trio.testing.fake_homeassistant import FakeHomeAssistant, open_fake_homeassistant


@asynccontextmanager
async def running(
    token: str | None = None, allowed_users: list[str] | None = None, **kw: object
) -> AsyncIterator[
    tuple[FakeHomeAssistant, HomeAssistantAdapter, trio.MemoryReceiveChannel[InboundMessage]]
]:
    async with open_fake_homeassistant() as fake, httpx.AsyncClient() as client:
        config = HomeAssistantConfig(
            url=fake.base_url, token=token or fake.token, allowed_users=allowed_users or []
        )
        adapter = HomeAssistantAdapter(config, client, webhook_port=0, **kw)  # type: ignore[arg-type]
        send, recv = trio.open_memory_channel[InboundMessage](10)
        async with trio.open_nursery() as nursery:
            with trio.fail_after(5):
                await nursery.start(adapter.run, send)
            with trio.fail_after(10):
                yield fake, adapter, recv
            nursery.cancel_scope.cancel()


async def test_inbound_message_and_event_reply() -> None:
    async with running() as (fake, adapter, recv):
        assert adapter.webhook_url
        r = await fake.post_message(
            adapter.webhook_url,
            "lights on",
            conversation_id="kitchen",
            user_id="u1",
            user_name="Ana",
        )
        assert r.status_code == 200 and r.json() == {"ok": True}
        msg = await recv.receive()
        assert msg == InboundMessage(
            platform="homeassistant",
            chat_id="kitchen",
            user_id="u1",
            text="lights on",
            user_name="Ana",
        )
        m = adapter.messenger(msg.chat_id)
        assert not m.capabilities.can_edit
        mid = await m.send("Done.")
        assert mid
        assert fake.replies("kitchen") == ["Done."]
        (event,) = fake.events
        assert event.event_type == "hermes_reply"
        assert event.data == {"conversation_id": "kitchen", "text": "Done.", "message_id": mid}
        with pytest.raises(PlatformError, match="cannot edit"):
            await m.edit(mid, "x")


async def test_notify_service_reply() -> None:
    async with running(notify_service="mobile_app_phone") as (fake, adapter, _):
        await adapter.messenger("default").send("Hi from Hermes")
        assert fake.notifications("mobile_app_phone") == ["Hi from Hermes"]
        assert fake.service_calls[0].data == {"message": "Hi from Hermes", "title": "Hermes"}


async def test_webhook_refuses_bad_bearer_and_bad_bodies() -> None:
    async with running(webhook_secret="s3cret", allowed_users=["u1"]) as (fake, adapter, recv):
        url = adapter.webhook_url
        assert url
        assert (await fake.post_message(url, "x")).status_code == 401  # HA token is not the secret
        assert (await fake.post_message(url, "x", secret="wrong")).status_code == 401
        assert (await fake.post_message(url, "   ", secret="s3cret")).status_code == 400
        ignored = await fake.post_message(url, "hi", user_id="u2", secret="s3cret")
        assert ignored.json() == {"ok": True, "ignored": True}
        ok = await fake.post_message(url, "hi", user_id="u1", conversation_id=None, secret="s3cret")
        assert ok.status_code == 200
        msg = await recv.receive()
        assert (msg.chat_id, msg.user_id) == ("u1", "u1")
        assert recv.statistics().current_buffer_used == 0


async def test_rejected_token_fails_at_start_without_showing_it() -> None:
    async with open_fake_homeassistant() as fake, httpx.AsyncClient() as client:
        adapter = HomeAssistantAdapter(
            HomeAssistantConfig(url=fake.base_url, token="wrong-token"), client, webhook_port=0
        )
        send, _ = trio.open_memory_channel[InboundMessage](1)
        with trio.fail_after(5), pytest.raises(TokenRejected) as info:
            await adapter.run(send)
        assert "wrong-token" not in str(info.value)
        fake.fail_next(500, "500 Internal Server Error")
        good = HomeAssistantAdapter(
            HomeAssistantConfig(url=fake.base_url, token=fake.token), client, webhook_port=0
        )
        with trio.fail_after(5), pytest.raises(PlatformError, match="HTTP 500"):
            await good.messenger("c").send("x")
