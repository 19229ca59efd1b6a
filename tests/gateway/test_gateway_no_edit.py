"""Platforms that cannot edit (WhatsApp, Home Assistant) get each answer as
one message, with tool progress folded in or left out per
``display.show_tools``; WhatsApp media reaches the model or gets a reply
naming it. End to end in process: the gateway with the real adapters, the
fake platforms and the scripted model server, over loopback."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import trio
from gateway_support import homeassistant_platforms, webhook, whatsapp_platforms
from test_gateway_runtime import gateway_stack

from hermes_trio.config import (
    DisplayConfig,
)
from hermes_trio.gateway import Gateway
from hermes_trio.testing import (
    ScriptedModelServer,
    TextReply,
    ToolCallReply,
    open_fake_homeassistant,
    open_fake_whatsapp,
)

USER = "15551234567"
JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 4 + b"\xff\xd9"
TOOL_TURN = [
    ToolCallReply([("terminal", {"command": "echo hi"})], text="Let me check."),
    TextReply("It says hi."),
]
FOLDED = {
    True: "Let me check.\n\n🔧 terminal: echo hi\n\nIt says hi.",
    False: "Let me check.\n\nIt says hi.",
}


async def settled(gateway: Gateway, platform: str, chat: str, turns: int) -> None:
    with trio.fail_after(10):
        await gateway.wait_until(
            lambda: gateway.turns_done(platform, chat) >= turns and gateway.idle()
        )


def user_contents(model: ScriptedModelServer) -> list[Any]:
    return [
        [m["content"] for m in r.json["messages"] if m["role"] == "user"]
        for r in model.model_requests
    ]


@pytest.mark.parametrize("show_tools", [True, False])
async def test_whatsapp_gets_one_message_holding_the_whole_turn(show_tools: bool) -> None:
    async with (
        open_fake_whatsapp() as whatsapp,
        gateway_stack(
            TOOL_TURN,
            platforms=whatsapp_platforms(whatsapp, USER),
            display=DisplayConfig(show_tools=show_tools),
        ) as (gateway, model),
    ):
        await whatsapp.deliver_text(webhook(gateway, "whatsapp"), USER, "what does echo say?")
        await settled(gateway, "whatsapp", USER, 1)
    assert whatsapp.texts_to(USER) == [FOLDED[show_tools]]
    assert len(model.model_requests) == 2  # the tool really ran between them


@pytest.mark.parametrize("show_tools", [True, False])
async def test_home_assistant_gets_one_reply_holding_the_whole_turn(show_tools: bool) -> None:
    async with open_fake_homeassistant() as ha:
        platforms = homeassistant_platforms(ha, "ana")
        async with gateway_stack(
            TOOL_TURN, platforms=platforms, display=DisplayConfig(show_tools=show_tools)
        ) as (gateway, _):
            url = webhook(gateway, "homeassistant")
            response = await ha.post_message(url, "echo?", conversation_id="kitchen", user_id="ana")
            assert response.status_code == 200
            await settled(gateway, "homeassistant", "kitchen", 1)
    assert ha.replies("kitchen") == [FOLDED[show_tools]]
    assert len(ha.events) == 1


async def test_a_whatsapp_image_reaches_the_model_as_an_image() -> None:
    async with (
        open_fake_whatsapp() as whatsapp,
        gateway_stack(
            [TextReply("A tiny picture."), TextReply("Still tiny.")],
            platforms=whatsapp_platforms(whatsapp, USER),
        ) as (gateway, model),
    ):
        url = webhook(gateway, "whatsapp")
        await whatsapp.deliver_media(url, USER, "image", JPEG, "image/jpeg", caption="what's this?")
        await settled(gateway, "whatsapp", USER, 1)
        await whatsapp.deliver_media(url, USER, "image", JPEG, "image/jpeg")
        await settled(gateway, "whatsapp", USER, 2)
    image = {
        "type": "image_url",
        "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(JPEG).decode()},
    }
    first, second = user_contents(model)
    assert first == [[{"type": "text", "text": "what's this?"}, image]]
    assert second[-1] == [image]  # no caption: the image alone
    assert whatsapp.texts_to(USER) == ["A tiny picture.", "Still tiny."]
    assert len(whatsapp.downloads) == 2


@pytest.mark.parametrize(
    ("kind", "deliver", "reply"),
    [
        (
            "voice note",
            {
                "kind": "audio",
                "data": b"OggS",
                "mime_type": "audio/ogg; codecs=opus",
                "voice": True,
            },
            "I can't read voice message (audio/ogg; codecs=opus): I can only use text and "
            "JPEG, PNG, GIF or WebP images, not files of that kind.",
        ),
        (
            "video",
            {"kind": "video", "data": b"\x00\x00\x00\x18ftypmp42", "mime_type": "video/mp4"},
            "I can't read video (video/mp4): I can only use text and JPEG, PNG, GIF or WebP "
            "images, not files of that kind.",
        ),
        (
            "document",
            {
                "kind": "document",
                "data": b"%PDF",
                "mime_type": "application/pdf",
                "filename": "bill.pdf",
            },
            "I can't read bill.pdf (application/pdf): I can only use text and JPEG, PNG, GIF "
            "or WebP images, not files of that kind.",
        ),
    ],
)
async def test_whatsapp_media_the_agent_cannot_use_gets_a_one_line_reply(
    kind: str, deliver: dict[str, Any], reply: str
) -> None:
    async with (
        open_fake_whatsapp() as whatsapp,
        gateway_stack([], platforms=whatsapp_platforms(whatsapp, USER)) as (gateway, model),
    ):
        url = webhook(gateway, "whatsapp")
        await whatsapp.deliver_media(url, USER, **deliver)
        with trio.fail_after(10):
            await gateway.wait_until(lambda: bool(whatsapp.texts_to(USER)))
        await settled(gateway, "whatsapp", USER, 0)
    assert whatsapp.texts_to(USER) == [reply], kind
    assert "\n" not in reply
    assert model.model_requests == [] and whatsapp.downloads == []


async def test_a_shared_contact_gets_a_reply_and_a_location_reaches_the_model() -> None:
    async with (
        open_fake_whatsapp() as whatsapp,
        gateway_stack([TextReply("Nice spot.")], platforms=whatsapp_platforms(whatsapp, USER)) as (
            gateway,
            model,
        ),
    ):
        url = webhook(gateway, "whatsapp")
        contact = [{"name": {"formatted_name": "Ana"}, "phones": [{"phone": "+1 555"}]}]
        await whatsapp.deliver_message(url, USER, "contacts", contact)
        with trio.fail_after(10):
            await gateway.wait_until(lambda: bool(whatsapp.texts_to(USER)))
        place = {"latitude": 52.52, "longitude": 13.405, "name": "Cafe"}
        await whatsapp.deliver_message(url, USER, "location", place)
        await settled(gateway, "whatsapp", USER, 1)
    assert whatsapp.texts_to(USER) == [
        "I can't use a shared contact: I can only read text and JPEG, PNG, GIF or WebP images.",
        "Nice spot.",
    ]
    assert user_contents(model) == [["📍 My location: Cafe (52.52, 13.405)"]]
