"""A long conversation in a chat, through the real Telegram adapter against
the fake Bot API and the model double, on MockClock: the chat is told when
the conversation was compacted, ``/context`` says how full the window is
and ``/compact`` summarises it now (after a running turn, never during)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import httpx
import trio
from test_gateway_telegram import CHAT, USER, gateway_config, turns
from trio.testing import MockClock

from hermes_trio.agent import open_agent
from hermes_trio.config import CompactionConfig, DisplayConfig
from hermes_trio.gateway import Gateway, build_adapters, open_gateway
from hermes_trio.testing import FakeTelegram, FakeTransport, ModelDouble, Step, TextReply
from hermes_trio.wire.context import SUMMARY_MARK, is_summary

WINDOW = 2000


@asynccontextmanager
async def small_window(
    script: Sequence[Step], *, show: bool = True
) -> AsyncIterator[tuple[Gateway, FakeTelegram, ModelDouble]]:
    model = ModelDouble(script)
    telegram = FakeTelegram("987654:GATEWAY-secret_token_value")
    config = gateway_config(
        model.base_url,
        "http://telegram.test",
        context_window=WINDOW,
        timeouts={"first_token": 120, "idle": 60, "request": 600},
    )
    config = dataclasses.replace(
        config,
        # No built-in tools: their definitions would fill a small window.
        agent=dataclasses.replace(config.agent, tools=[]),
        compaction=CompactionConfig(summary_max_tokens=100, keep_recent=300),
        display=DisplayConfig(show_compaction=show),
    )
    async with (
        httpx.AsyncClient(transport=FakeTransport(telegram.handle)) as client,
        open_agent(config, transport=model) as agent,
        open_gateway(config, adapters=build_adapters(config, client), agent=agent) as gateway,
    ):
        yield gateway, telegram, model


def long(i: int) -> str:
    return f"question {i} " + "q" * 2000  # about 500 tokens


async def say(gateway: Gateway, telegram: FakeTelegram, text: str, turn: int) -> None:
    telegram.push_message(CHAT, USER, text)
    await turns(gateway, turn, within=600)


async def test_a_compacting_turn_shows_one_line_and_context_tells_the_size(
    autojump_clock: MockClock,
) -> None:
    script = [TextReply("a0"), TextReply("a1"), TextReply("the summary"), TextReply("a2")]
    async with small_window(script) as (gateway, telegram, model):
        for i in range(3):
            await say(gateway, telegram, long(i), i + 1)
        texts = telegram.texts(CHAT)
        assert texts[:2] == ["a0", "a1"]
        (line,) = [t for t in texts if t.startswith("🗜")]
        assert line.startswith(
            "🗜 Summarised the earlier conversation to stay within the model's context ("
        )
        assert line.endswith(" tokens).") and "k → " in line
        assert texts[-1] == "a2" and texts.index(line) == len(texts) - 2
        summary_request = model.model_requests[2].json
        assert not summary_request.get("stream") and "question 0" in str(summary_request)
        session = gateway.session("telegram", CHAT)
        assert session is not None and is_summary(session.messages[0])

        telegram.push_message(CHAT, USER, "/context")
        await gateway.wait_until(lambda: len(telegram.texts(CHAT)) == len(texts) + 1)
        reply = telegram.texts(CHAT)[-1]
        assert reply.startswith("Context: ") and " of 2k tokens (" in reply
        assert reply.endswith(f"%), {len(session.messages)} messages")
        assert len(model.model_requests) == 4  # /context asks the model nothing


async def test_compact_summarises_the_chat_now_and_keeps_it(autojump_clock: MockClock) -> None:
    script = [TextReply("a0"), TextReply("a1"), TextReply("short summary"), TextReply("a2")]
    async with small_window(script) as (gateway, telegram, model):
        await say(gateway, telegram, "hello", 1)
        await say(gateway, telegram, "and again", 2)
        telegram.push_message(CHAT, USER, "/compact")
        await gateway.wait_until(lambda: len(telegram.texts(CHAT)) == 3)
        reply = telegram.texts(CHAT)[-1]
        assert reply.startswith("🗜 Summarised the earlier conversation")
        session = gateway.session("telegram", CHAT)
        assert session is not None
        assert session.messages == [
            {"role": "user", "content": SUMMARY_MARK + "short summary"},
            {"role": "user", "content": "and again"},
            {"role": "assistant", "content": "a1"},
        ]
        # Nothing before the newest exchange but the summary: nothing to do.
        telegram.push_message(CHAT, USER, "/compact")
        await gateway.wait_until(lambda: len(telegram.texts(CHAT)) == 4)
        assert telegram.texts(CHAT)[-1].startswith("Nothing to compact")
        # The next turn goes on from the summary.
        await say(gateway, telegram, "next", 3)
        sent = [m for m in model.model_requests[3].json["messages"] if m["role"] != "system"]
        assert sent[0]["content"] == SUMMARY_MARK + "short summary"
        assert sent[-1] == {"role": "user", "content": "next"}
        assert len(model.model_requests) == 4


async def test_compact_waits_for_the_running_turn(autojump_clock: MockClock) -> None:
    script = [
        TextReply("a0"),
        TextReply("slow answer", first_token_delay=30),
        TextReply("the summary"),
    ]
    async with small_window(script) as (gateway, telegram, model):
        await say(gateway, telegram, "hello", 1)
        telegram.push_message(CHAT, USER, "question two")
        await trio.sleep(5)
        telegram.push_message(CHAT, USER, "/compact")
        await turns(gateway, 2, within=600)
        await gateway.wait_until(lambda: len(telegram.texts(CHAT)) == 3)
        # The turn was not interrupted, and the summary came after it.
        assert telegram.texts(CHAT)[1] == "slow answer"
        assert telegram.texts(CHAT)[2].startswith("🗜 Summarised")
        assert model.model_requests[2].received_at >= 30


async def test_display_can_hide_the_line(autojump_clock: MockClock) -> None:
    script = [TextReply("a0"), TextReply("a1"), TextReply("the summary"), TextReply("a2")]
    async with small_window(script, show=False) as (gateway, telegram, model):
        for i in range(3):
            await say(gateway, telegram, long(i), i + 1)
        assert telegram.texts(CHAT) == ["a0", "a1", "a2"]
        assert len(model.model_requests) == 4
