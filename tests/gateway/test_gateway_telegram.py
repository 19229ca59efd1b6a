"""The gateway end to end, in process: the real Telegram adapter against the
fake Bot API, the real agent against the scripted model.

Tests of when things happen (edits, rate limits, interrupts, queueing) run
the fakes in process (``ModelDouble``, ``FakeTransport``) on MockClock and
assert exact virtual times; the others go over loopback sockets."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import trio
from support import make_config
from trio.testing import MockClock

from hermes_trio.agent import open_agent
from hermes_trio.config import (
    Config,
    GatewayConfig,
    PlatformsConfig,
    StreamingConfig,
    TelegramConfig,
)
from hermes_trio.gateway import Gateway, build_adapters, open_gateway
from hermes_trio.testing import (
    FakeTelegram,
    FakeTransport,
    ModelDouble,
    RecordedRequest,
    ScriptedModelServer,
    Stall,
    Step,
    TextReply,
    open_fake_telegram,
    open_scripted_server,
)

TOKEN = "987654:GATEWAY-secret_token_value"
CHAT = 4242
USER = 7
CURSOR = " ▌"
ANSWER = " ".join(f"word{i}" for i in range(30))


def gateway_config(
    model_url: str,
    telegram_url: str,
    *,
    allowed: list[int] | None = None,
    on_new_message: str = "interrupt",
    streaming: bool = True,
    edit_interval: float = 0.05,
    transport: str = "edit",
    **model: Any,
) -> Config:
    return make_config(
        model_url,
        model=model,
        streaming=StreamingConfig(
            enabled=streaming, edit_interval=edit_interval, min_tokens=2, cursor=CURSOR
        ),
        gateway=GatewayConfig(on_new_message=on_new_message),  # type: ignore[arg-type]
        platforms=PlatformsConfig(
            telegram=TelegramConfig(
                token=TOKEN,
                api_base_url=telegram_url,
                allowed_users=[USER] if allowed is None else allowed,
                poll_timeout=5,
                # These tests are about edits; drafts (private chats' default)
                # are tested in test_gateway_telegram_drafts.py.
                transport=transport,  # type: ignore[arg-type]
            )
        ),
    )


@asynccontextmanager
async def stack(
    script: Sequence[Step],
    *,
    edit_limit: int | None = None,
    edit_window: float = 60.0,
    **settings: Any,
) -> AsyncIterator[tuple[Gateway, FakeTelegram, ScriptedModelServer]]:
    """Over loopback sockets: the fake Bot API and the scripted model server."""
    async with (
        open_scripted_server(script) as model,
        open_fake_telegram(TOKEN, edit_limit=edit_limit, edit_window=edit_window) as telegram,
    ):
        config = gateway_config(model.base_url, telegram.base_url, **settings)
        async with open_gateway(config) as gateway:
            yield gateway, telegram, model


@asynccontextmanager
async def in_process(
    script: Sequence[Step],
    *,
    edit_limit: int | None = None,
    edit_window: float = 60.0,
    **settings: Any,
) -> AsyncIterator[tuple[Gateway, FakeTelegram, ModelDouble]]:
    """No socket: the fake Bot API behind ``FakeTransport``, the model a
    ``ModelDouble``. For tests on MockClock."""
    model = ModelDouble(script)
    telegram = FakeTelegram(TOKEN, edit_limit=edit_limit, edit_window=edit_window)
    # Virtual time costs nothing: the product's own limits, not the short test ones.
    settings.setdefault("timeouts", {"first_token": 120, "idle": 60, "request": 600})
    config = gateway_config(model.base_url, "http://telegram.test", **settings)
    async with (
        httpx.AsyncClient(transport=FakeTransport(telegram.handle)) as client,
        open_agent(config, transport=model) as agent,
        open_gateway(config, adapters=build_adapters(config, client), agent=agent) as gateway,
    ):
        yield gateway, telegram, model


async def turns(gateway: Gateway, n: int, chat: int = CHAT, within: float = 5) -> None:
    with trio.fail_after(within):
        await gateway.wait_until(
            lambda: gateway.turns_done("telegram", chat) >= n and gateway.idle()
        )


def model_requests(model: ScriptedModelServer | ModelDouble) -> list[RecordedRequest]:
    return model.model_requests


def conversation(model: ScriptedModelServer | ModelDouble, n: int) -> list[dict[str, Any]]:
    """The messages of the nth model request (0-based), system prompt left out."""
    return [m for m in model_requests(model)[n].json["messages"] if m["role"] != "system"]


async def test_answer_is_edited_progressively_on_the_interval_and_finalised_once(
    autojump_clock: MockClock,
) -> None:
    # A word every 0.5 s from t=10; edits every 2 s once the message is out.
    script = [TextReply(ANSWER, delay=0.5)]
    async with in_process(script, edit_interval=2.0) as (gateway, telegram, model):
        await trio.sleep(10)
        telegram.push_message(CHAT, USER, "hello")
        await turns(gateway, 1, within=600)
        (message,) = telegram.visible(CHAT)
        assert model_requests(model)[0].received_at == 10.0
        assert model_requests(model)[0].json["stream"] is True
        # Sent with the second word (min_tokens=2), then on the 2 s grid while
        # the answer streams (the last word comes at 24.5), then the final
        # text once, at the next grid point.
        assert message.sent_at == 10.5
        assert message.edited_at == [12.5, 14.5, 16.5, 18.5, 20.5, 22.5, 24.5, 26.5]
        interim = message.history[:-1]
        assert all(text.endswith(CURSOR.strip()) for text in interim)
        assert interim[0] == "word0 word1" + CURSOR
        assert message.history.count(ANSWER) == 1
        assert message.history[-1] == ANSWER
        assert len(telegram.calls_to("sendMessage")) == 1
        session = gateway.session("telegram", CHAT)
        assert session is not None and session.last_report is not None
        assert session.last_report.delivered and not session.last_report.interrupted
        assert session.messages[-1] == {"role": "assistant", "content": ANSWER}


async def test_typing_shows_every_4_s_until_the_first_words(autojump_clock: MockClock) -> None:
    script = [TextReply(tokens=["Hello", " there"], first_token_delay=10)]
    async with in_process(script) as (gateway, telegram, _):
        telegram.push_message(CHAT, USER, "hello")
        await turns(gateway, 1, within=600)
        assert [(chat, action) for chat, action, _ in telegram.chat_actions] == [
            (str(CHAT), "typing")
        ] * 3
        assert [at for _, _, at in telegram.chat_actions] == [0.0, 4.0, 8.0]
        (message,) = telegram.visible(CHAT)
        assert message.sent_at == 10.0 and message.text == "Hello there"


async def test_rate_limited_edits_wait_exactly_retry_after_and_finalise_once(
    autojump_clock: MockClock,
) -> None:
    script = [TextReply(ANSWER, delay=0.5)]
    settings = {"edit_interval": 2.0, "edit_limit": 2, "edit_window": 10.0}
    async with in_process(script, **settings) as (gateway, telegram, _):
        telegram.push_message(CHAT, USER, "hello")
        await turns(gateway, 1, within=600)
        edits = telegram.calls_to("editMessageText")
        refused = [call for call in edits if call.status == 429]
        assert refused
        for call in refused:
            wait = call.response["parameters"]["retry_after"]
            # The next edit comes exactly when Telegram said it may.
            following = next(c for c in edits if c.time > call.time)
            assert following.time == call.time + wait
        (message,) = telegram.visible(CHAT)
        assert message.text == ANSWER
        assert message.history.count(ANSWER) == 1
        assert len(telegram.calls_to("sendMessage")) == 1
        assert len(telegram.messages[str(CHAT)]) == 1


async def test_long_answer_arrives_as_two_messages(autojump_clock: MockClock) -> None:
    paragraph = "lorem ipsum dolor sit amet " * 20  # 540 characters
    answer = "\n\n".join(paragraph.strip() for _ in range(11))
    assert 5_900 < len(answer) < 6_100
    tokens = [answer[i : i + 40] for i in range(0, len(answer), 40)]
    async with in_process([TextReply(answer, tokens=tokens, delay=0.25)]) as (gateway, telegram, _):
        telegram.push_message(CHAT, USER, "write a lot")
        await turns(gateway, 1, within=600)
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


async def test_stop_interrupts_the_turn_and_closes_the_model_connection_at_once(
    autojump_clock: MockClock,
) -> None:
    script: list[Step] = [Stall("Let me think about this", seconds=3600), TextReply("fresh answer")]
    async with in_process(script) as (gateway, telegram, model):
        telegram.push_message(CHAT, USER, "think hard")
        await telegram.wait_until(lambda: bool(telegram.texts(CHAT)))
        await trio.sleep(30)
        telegram.push_message(CHAT, USER, "/stop")
        record = await model.wait_connection_closed()
        assert (record.closed_at, record.closed_by) == (30.0, "client")
        await telegram.wait_until(lambda: "stopped" in telegram.texts(CHAT))
        first, stopped = telegram.visible(CHAT)
        assert stopped.text == "stopped" and stopped.sent_at == 30.0
        assert first.text.startswith("Let me think about this")
        assert "interrupted" in first.text and CURSOR.strip() not in first.text
        assert first.edited_at[-1] == 30.0
        # The conversation continues, with the interruption on record.
        telegram.push_message(CHAT, USER, "/stop")
        await telegram.wait_until(lambda: "nothing to stop" in telegram.texts(CHAT))
        telegram.push_message(CHAT, USER, "try again")
        await turns(gateway, 2, within=600)
        assert telegram.texts(CHAT)[-1] == "fresh answer"
        sent = conversation(model, 1)
        assert [m["role"] for m in sent] == ["user", "assistant", "user"]
        assert "[interrupted]" in sent[1]["content"]


async def test_new_message_interrupts_the_running_turn_by_default(
    autojump_clock: MockClock,
) -> None:
    script: list[Step] = [Stall("Working on the first", seconds=3600), TextReply("second answer")]
    async with in_process(script) as (gateway, telegram, model):
        telegram.push_message(CHAT, USER, "first")
        await telegram.wait_until(lambda: bool(telegram.texts(CHAT)))
        await trio.sleep(12)
        telegram.push_message(CHAT, USER, "second")
        await turns(gateway, 2, within=600)
        first, second = telegram.texts(CHAT)
        assert "interrupted" in first
        assert second == "second answer"
        # The first turn's request ends the moment the second one begins.
        one, two = model_requests(model)
        assert model.connections[one.connection_id - 1].closed_at == 12.0
        assert two.received_at == 12.0
        sent = conversation(model, 1)
        assert [m["content"] for m in sent if m["role"] == "user"] == ["first", "second"]


async def test_queue_mode_answers_messages_in_order(autojump_clock: MockClock) -> None:
    script = [TextReply("answer one", delay=20), TextReply("answer two")]
    async with in_process(script, on_new_message="queue") as (gateway, telegram, model):
        telegram.push_message(CHAT, USER, "one")
        await model.wait_request(1)
        telegram.push_message(CHAT, USER, "two")
        await turns(gateway, 2, within=600)
        assert telegram.texts(CHAT) == ["answer one", "answer two"]
        # The second question waits until the first answer (its last token at
        # 20 s) is delivered in full.
        first = telegram.visible(CHAT)[0]
        delivered = (first.edited_at or [first.sent_at])[-1]
        assert 20.0 <= delivered <= 20.0 + 0.05  # the next point on the edit grid
        assert [r.received_at for r in model_requests(model)] == [0.0, delivered]
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


async def test_chats_are_separate_sessions_answered_side_by_side(
    autojump_clock: MockClock,
) -> None:
    script = [TextReply("for A", delay=20), TextReply("for B", delay=20)]
    async with in_process(script, allowed=[USER, 8]) as (gateway, telegram, model):
        telegram.push_message(1, USER, "from A")
        telegram.push_message(2, 8, "from B")
        with trio.fail_after(60):
            await gateway.wait_until(
                lambda: (
                    gateway.turns_done("telegram", 1) == 1
                    and gateway.turns_done("telegram", 2) == 1
                )
            )
        assert sorted(telegram.texts(1) + telegram.texts(2)) == ["for A", "for B"]
        for n in range(2):
            assert len(conversation(model, n)) == 1
        # Neither chat waited for the other.
        assert [r.received_at for r in model_requests(model)] == [0.0, 0.0]
        assert [c.closed_at for c in model.connections] == [20.0, 20.0]
