"""The gateway end to end, in process: the real Telegram adapter against the
fake Bot API, the real agent against the scripted model server, all over
loopback sockets."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from support import make_config

from hermes_trio.config import GatewayConfig, PlatformsConfig, StreamingConfig, TelegramConfig
from hermes_trio.gateway import Gateway, open_gateway
from hermes_trio.testing import (
    RecordedRequest,
    ScriptedModelServer,
    Stall,
    Step,
    TextReply,
    open_scripted_server,
)
from hermes_trio.testing.fake_telegram import FakeTelegram, open_fake_telegram

TOKEN = "987654:GATEWAY-secret_token_value"
CHAT = 4242
USER = 7
CURSOR = " ▌"
ANSWER = " ".join(f"word{i}" for i in range(30))


@asynccontextmanager
async def stack(
    script: Sequence[Step],
    *,
    allowed: list[int] | None = None,
    edit_limit: int | None = None,
    edit_window: float = 60.0,
    on_new_message: str = "interrupt",
    streaming: bool = True,
    edit_interval: float = 0.05,
) -> AsyncIterator[tuple[Gateway, FakeTelegram, ScriptedModelServer]]:
    async with (
        open_scripted_server(script) as model,
        open_fake_telegram(TOKEN, edit_limit=edit_limit, edit_window=edit_window) as telegram,
    ):
        config = make_config(
            model.base_url,
            streaming=StreamingConfig(
                enabled=streaming, edit_interval=edit_interval, min_tokens=2, cursor=CURSOR
            ),
            gateway=GatewayConfig(on_new_message=on_new_message),  # type: ignore[arg-type]
            platforms=PlatformsConfig(
                telegram=TelegramConfig(
                    token=TOKEN,
                    api_base_url=telegram.base_url,
                    allowed_users=[USER] if allowed is None else allowed,
                    poll_timeout=5,
                )
            ),
        )
        async with open_gateway(config) as gateway:
            yield gateway, telegram, model


async def turns(gateway: Gateway, n: int, chat: int = CHAT, within: float = 5) -> None:
    with trio.fail_after(within):
        await gateway.wait_until(
            lambda: gateway.turns_done("telegram", chat) >= n and gateway.idle()
        )


def model_requests(model: ScriptedModelServer) -> list[RecordedRequest]:
    return model.model_requests


def conversation(model: ScriptedModelServer, n: int) -> list[dict[str, Any]]:
    """The messages of the nth model request (0-based), system prompt left out."""
    return [m for m in model_requests(model)[n].json["messages"] if m["role"] != "system"]


async def test_answer_is_edited_progressively_and_finalised_once() -> None:
    script = [TextReply(ANSWER, delay=0.02)]
    async with stack(script) as (gateway, telegram, model):
        telegram.push_message(CHAT, USER, "hello")
        await turns(gateway, 1)
        (message,) = telegram.visible(CHAT)
        assert message.text == ANSWER
        # Several interim states with the cursor, then exactly one final edit.
        interim = message.history[:-1]
        assert len(interim) >= 3
        assert all(text.endswith(CURSOR.strip()) for text in interim)
        assert message.history.count(ANSWER) == 1
        assert message.history[-1] == ANSWER
        assert len(telegram.calls_to("sendMessage")) == 1
        session = gateway.session("telegram", CHAT)
        assert session is not None and session.last_report is not None
        assert session.last_report.delivered and not session.last_report.interrupted
        assert session.messages[-1] == {"role": "assistant", "content": ANSWER}
        assert model_requests(model)[0].json["stream"] is True


async def test_rate_limited_edits_still_finalise_once_without_duplicates() -> None:
    script = [TextReply(ANSWER, delay=0.02)]
    async with stack(script, edit_limit=2, edit_window=1.0) as (gateway, telegram, _):
        telegram.push_message(CHAT, USER, "hello")
        await turns(gateway, 1, within=8)
        assert any(call.status == 429 for call in telegram.calls_to("editMessageText"))
        (message,) = telegram.visible(CHAT)
        assert message.text == ANSWER
        assert message.history.count(ANSWER) == 1
        assert len(telegram.calls_to("sendMessage")) == 1
        assert len(telegram.messages[str(CHAT)]) == 1


async def test_long_answer_arrives_as_two_messages() -> None:
    paragraph = "lorem ipsum dolor sit amet " * 20  # 540 characters
    answer = "\n\n".join(paragraph.strip() for _ in range(11))
    assert 5_900 < len(answer) < 6_100
    tokens = [answer[i : i + 40] for i in range(0, len(answer), 40)]
    async with stack([TextReply(answer, tokens=tokens, delay=0.002)]) as (gateway, telegram, _):
        telegram.push_message(CHAT, USER, "write a lot")
        await turns(gateway, 1)
        texts = telegram.texts(CHAT)
        assert len(texts) == 2
        assert all(len(t) <= 4096 for t in texts)
        assert not any(t.endswith(CURSOR.strip()) for t in texts)
        assert "".join(texts).replace("\n", "") == answer.replace("\n", "")
        assert len(telegram.messages[str(CHAT)]) == 2


async def test_non_streaming_sends_one_complete_message() -> None:
    async with stack([TextReply(ANSWER, delay=0.005)], streaming=False) as (
        gateway,
        telegram,
        model,
    ):
        telegram.push_message(CHAT, USER, "hello")
        await turns(gateway, 1)
        (message,) = telegram.visible(CHAT)
        assert message.history == [ANSWER]
        assert model_requests(model)[0].json.get("stream") is not True


async def test_user_outside_allow_list_never_reaches_model(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    async with stack([TextReply("only for you")]) as (gateway, telegram, model):
        telegram.push_message(CHAT + 1, 666, "let me in", user_name="mallory")
        with trio.fail_after(5):
            await telegram.wait_until(lambda: bool(telegram.texts(CHAT + 1)))
        (refusal,) = telegram.texts(CHAT + 1)
        assert "only answer allowed users" in refusal and "666" in refusal
        # A second try is logged but not answered again (no reply storms).
        telegram.push_message(CHAT + 1, 666, "please")
        with trio.fail_after(5):
            await gateway.wait_until(lambda: len(gateway.refused) == 2)
        # The allowed user still gets through, and is the model's only caller.
        telegram.push_message(CHAT, USER, "hi")
        await turns(gateway, 1)
        assert telegram.texts(CHAT) == ["only for you"]
        assert telegram.texts(CHAT + 1) == [refusal]
        requests = model_requests(model)
        assert len(requests) == 1
        assert "let me in" not in str(requests[0].json)
        assert gateway.session("telegram", CHAT + 1) is None
    refused = [r for r in caplog.records if "refused a message from user 666" in r.getMessage()]
    assert len(refused) == 2
    assert all(TOKEN not in r.getMessage() for r in caplog.records)


async def test_empty_allow_list_refuses_everyone_and_says_how_to_allow() -> None:
    async with stack([], allowed=[]) as (gateway, telegram, model):
        telegram.push_message(CHAT, USER, "hello?")
        with trio.fail_after(5):
            await telegram.wait_until(lambda: bool(telegram.texts(CHAT)))
        (refusal,) = telegram.texts(CHAT)
        assert f"add your user id {USER}" in refusal
        assert "TELEGRAM_ALLOWED_USERS" in refusal
        assert model_requests(model) == []


async def test_stop_interrupts_the_turn_and_closes_the_model_connection() -> None:
    script: list[Step] = [Stall("Let me think about this", seconds=30), TextReply("fresh answer")]
    async with stack(script) as (gateway, telegram, model):
        telegram.push_message(CHAT, USER, "think hard")
        with trio.fail_after(5):
            await telegram.wait_until(lambda: bool(telegram.texts(CHAT)))
        telegram.push_message(CHAT, USER, "/stop")
        with trio.fail_after(5):
            record = await model.wait_connection_closed()
        assert record.closed_by == "client"
        with trio.fail_after(5):
            await telegram.wait_until(lambda: "stopped" in telegram.texts(CHAT))
        first, stopped = telegram.texts(CHAT)
        assert stopped == "stopped"
        assert first.startswith("Let me think about this")
        assert "interrupted" in first and CURSOR.strip() not in first
        # The conversation continues, with the interruption on record.
        telegram.push_message(CHAT, USER, "/stop")
        with trio.fail_after(5):
            await telegram.wait_until(lambda: "nothing to stop" in telegram.texts(CHAT))
        telegram.push_message(CHAT, USER, "try again")
        await turns(gateway, 2)
        assert telegram.texts(CHAT)[-1] == "fresh answer"
        sent = conversation(model, 1)
        assert [m["role"] for m in sent] == ["user", "assistant", "user"]
        assert "[interrupted]" in sent[1]["content"]


async def test_new_message_interrupts_the_running_turn_by_default() -> None:
    script: list[Step] = [Stall("Working on the first", seconds=30), TextReply("second answer")]
    async with stack(script) as (gateway, telegram, model):
        telegram.push_message(CHAT, USER, "first")
        with trio.fail_after(5):
            await telegram.wait_until(lambda: bool(telegram.texts(CHAT)))
        telegram.push_message(CHAT, USER, "second")
        await turns(gateway, 2)
        first, second = telegram.texts(CHAT)
        assert "interrupted" in first
        assert second == "second answer"
        sent = conversation(model, 1)
        assert [m["content"] for m in sent if m["role"] == "user"] == ["first", "second"]


async def test_queue_mode_answers_messages_in_order() -> None:
    script = [TextReply("answer one", delay=0.05), TextReply("answer two")]
    async with stack(script, on_new_message="queue") as (gateway, telegram, model):
        telegram.push_message(CHAT, USER, "one")
        with trio.fail_after(5):
            await model.wait_request(1)
        telegram.push_message(CHAT, USER, "two")
        await turns(gateway, 2)
        assert telegram.texts(CHAT) == ["answer one", "answer two"]
        second = conversation(model, 1)
        assert [m["content"] for m in second] == ["one", "answer one", "two"]


async def test_new_starts_a_fresh_conversation() -> None:
    script = [TextReply("first answer"), TextReply("second answer")]
    async with stack(script) as (gateway, telegram, model):
        telegram.push_message(CHAT, USER, "remember 42")
        await turns(gateway, 1)
        telegram.push_message(CHAT, USER, "/new@hermes_test_bot")
        with trio.fail_after(5):
            await telegram.wait_until(lambda: "new conversation" in telegram.texts(CHAT))
        telegram.push_message(CHAT, USER, "what number?")
        await turns(gateway, 2)
        sent = conversation(model, 1)
        assert sent == [{"role": "user", "content": "what number?"}]


async def test_chats_are_separate_sessions() -> None:
    script = [TextReply("for A", delay=0.05), TextReply("for B", delay=0.05)]
    async with stack(script, allowed=[USER, 8]) as (gateway, telegram, model):
        telegram.push_message(1, USER, "from A")
        telegram.push_message(2, 8, "from B")
        with trio.fail_after(5):
            await gateway.wait_until(
                lambda: (
                    gateway.turns_done("telegram", 1) == 1
                    and gateway.turns_done("telegram", 2) == 1
                )
            )
        assert sorted(telegram.texts(1) + telegram.texts(2)) == ["for A", "for B"]
        for n in range(2):
            assert len(conversation(model, n)) == 1
