"""Threads, images and the gateway's notices, end to end in process: the real
Telegram adapter against the fake Bot API, the real agent against
``ModelDouble``, on MockClock."""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio
from support import make_config
from trio.testing import MockClock

from hermes_trio.agent import open_agent
from hermes_trio.config import GatewayConfig, PlatformsConfig, StreamingConfig, TelegramConfig
from hermes_trio.gateway import Gateway, build_adapters, open_gateway
from hermes_trio.testing import FakeTelegram, FakeTransport, ModelDouble, Stall, Step, TextReply

TOKEN = "987654:TOPICS-secret_token_value"
CHAT = -1001234
USER = 7
JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 4 + b"\xff\xd9"


@asynccontextmanager
async def in_process(
    script: Sequence[Step], *, vision: bool = True, **gateway: Any
) -> AsyncIterator[tuple[Gateway, FakeTelegram, ModelDouble]]:
    model = ModelDouble(script)
    telegram = FakeTelegram(TOKEN)
    config = make_config(
        model.base_url,
        model={"vision": vision, "timeouts": {"first_token": 600, "idle": 600, "request": 900}},
        streaming=StreamingConfig(enabled=True, edit_interval=1.0, min_tokens=2),
        gateway=GatewayConfig(**gateway),
        platforms=PlatformsConfig(
            telegram=TelegramConfig(
                token=TOKEN, api_base_url="http://telegram.test", allowed_users=[USER]
            )
        ),
    )
    async with (
        httpx.AsyncClient(transport=FakeTransport(telegram.handle)) as client,
        open_agent(config, transport=model) as agent,
        open_gateway(config, adapters=build_adapters(config, client), agent=agent) as gateway,
    ):
        yield gateway, telegram, model


async def settled(gateway: Gateway, done: int, thread: int | None = None) -> None:
    with trio.fail_after(900):
        await gateway.wait_until(
            lambda: gateway.turns_done("telegram", CHAT, thread) >= done and gateway.idle()
        )


def user_messages(model: ModelDouble, n: int) -> list[Any]:
    return [m["content"] for m in model.model_requests[n].json["messages"] if m["role"] == "user"]


async def test_a_forum_topic_is_answered_in_that_topic_as_its_own_conversation(
    autojump_clock: MockClock,
) -> None:
    script = [TextReply("In topic seven."), TextReply("In topic nine.")]
    async with in_process(script) as (gateway, telegram, model):
        telegram.push_message(CHAT, USER, "first", topic=7)
        await settled(gateway, 1, thread=7)
        telegram.push_message(CHAT, USER, "second", topic=9)
        await settled(gateway, 1, thread=9)
    assert telegram.texts(CHAT, topic=7) == ["In topic seven."]
    assert telegram.texts(CHAT, topic=9) == ["In topic nine."]
    assert all(m.thread_id is not None for m in telegram.visible(CHAT))
    sends = telegram.calls_to("sendMessage")
    assert [call.params["message_thread_id"] for call in sends] == [7, 9]
    # The typing sign goes to the topic too (Telegram shows it there).
    typing = telegram.calls_to("sendChatAction")
    assert typing and all("message_thread_id" in call.params for call in typing)
    # Two topics, two conversations: the second request does not see the first.
    assert user_messages(model, 1) == ["second"]
    assert gateway.session("telegram", CHAT, 7) is not gateway.session("telegram", CHAT, 9)


async def test_a_photo_reaches_the_model_as_an_image_part(autojump_clock: MockClock) -> None:
    async with in_process([TextReply("A small picture.")]) as (gateway, telegram, model):
        telegram.push_message(CHAT, USER, "what is this?", photo=JPEG)
        await settled(gateway, 1)
    (content,) = user_messages(model, 0)
    assert content[0] == {"type": "text", "text": "what is this?"}
    image = content[1]
    assert image["type"] == "image_url"
    assert image["image_url"]["url"] == "data:image/jpeg;base64," + base64.b64encode(JPEG).decode()
    # The largest size was fetched, once, and only it.
    assert len(telegram.downloads) == 1 and telegram.downloads[0].endswith("full.jpg")
    assert telegram.texts(CHAT) == ["A small picture."]


async def test_a_photo_without_caption_is_answered_too(autojump_clock: MockClock) -> None:
    async with in_process([TextReply("Nice.")]) as (gateway, telegram, model):
        telegram.push_message(CHAT, USER, "", photo=JPEG)
        await settled(gateway, 1)
    ((image,),) = user_messages(model, 0)
    assert image["type"] == "image_url"


async def test_a_file_the_agent_cannot_use_gets_a_reply_and_never_reaches_the_model(
    autojump_clock: MockClock,
) -> None:
    async with in_process([TextReply("unused")]) as (gateway, telegram, model):
        pdf = ("report.pdf", "application/pdf", b"%PDF-1.7 ...")
        telegram.push_message(CHAT, USER, "", document=pdf)
        with trio.fail_after(60):
            await telegram.wait_until(lambda: bool(telegram.texts(CHAT)))
            await gateway.wait_until(gateway.idle)
    (reply,) = telegram.texts(CHAT)
    assert "report.pdf (application/pdf)" in reply and "can't read" in reply
    assert model.model_requests == [] and telegram.downloads == []


async def test_a_file_with_a_question_answers_the_question_after_saying_so(
    autojump_clock: MockClock,
) -> None:
    async with in_process([TextReply("Here is the answer.")]) as (gateway, telegram, model):
        zip_file = ("code.zip", "application/zip", b"PK...")
        telegram.push_message(CHAT, USER, "summarise it", document=zip_file)
        await settled(gateway, 1)
    refusal, answer = telegram.texts(CHAT)
    assert "code.zip" in refusal and answer == "Here is the answer."
    assert user_messages(model, 0) == ["summarise it"]


async def test_images_are_refused_when_the_model_takes_none(autojump_clock: MockClock) -> None:
    async with in_process([TextReply("unused")], vision=False) as (gateway, telegram, model):
        telegram.push_message(CHAT, USER, "", photo=JPEG)
        with trio.fail_after(60):
            await telegram.wait_until(lambda: bool(telegram.texts(CHAT)))
            await gateway.wait_until(gateway.idle)
    (reply,) = telegram.texts(CHAT)
    assert "does not take images" in reply
    assert model.model_requests == []


async def test_a_message_that_waited_while_we_were_away_is_answered_after_a_notice(
    autojump_clock: MockClock,
) -> None:
    async with in_process([TextReply("Sorry for the wait.")]) as (gateway, telegram, model):
        telegram.push_message(CHAT, USER, "are you there?", sent_at=time.time() - 600)
        await settled(gateway, 1)
    notice, answer = telegram.texts(CHAT)
    assert notice.startswith("⏳ Back online") and "10 min" in notice
    assert answer == "Sorry for the wait."


async def test_a_fresh_message_gets_no_notice(autojump_clock: MockClock) -> None:
    async with in_process([TextReply("Right away.")]) as (gateway, telegram, model):
        telegram.push_message(CHAT, USER, "hi", sent_at=time.time() - 20)
        await settled(gateway, 1)
    assert telegram.texts(CHAT) == ["Right away."]


async def test_a_long_turn_tells_the_chat_once_when_it_passes_the_threshold(
    autojump_clock: MockClock,
) -> None:
    script = [Stall("Thinking hard", seconds=300)]
    async with in_process(script, long_turn_notice=120.0) as (gateway, telegram, model):
        await trio.sleep(5)
        telegram.push_message(CHAT, USER, "a hard question")
        with trio.fail_after(200):
            await telegram.wait_until(
                lambda: any("Still working" in t for t in telegram.texts(CHAT))
            )
        notice = next(m for m in telegram.visible(CHAT) if "Still working" in m.text)
        # 120 s after the turn began (the message was picked up at once).
        assert notice.sent_at == 125.0
        assert "2 min" in notice.text
        telegram.push_message(CHAT, USER, "/stop")
        await settled(gateway, 1)
    assert sum("Still working" in t for t in telegram.texts(CHAT)) == 1
