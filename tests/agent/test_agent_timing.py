"""When a whole agent turn does things: streamed tokens, the watchdog's
limits, retries and their backoff, cancellation and tools, on trio's
MockClock against the in-process model double. Every time asserted is exact
virtual time, and the double says when the agent hung up."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
from support import agent_on_double, run_turn
from trio.testing import MockClock

from hermes_trio.config import FallbackModel
from hermes_trio.events import (
    LongToolHint,
    MessageChunk,
    StreamEvent,
    ToolCallDelta,
    ToolCallFinished,
    TurnFinished,
)
from hermes_trio.llm.answer_end import DRAIN_GRACE
from hermes_trio.llm.stream_support import StreamSupport
from hermes_trio.testing import (
    Drop,
    ErrorReply,
    ModelDouble,
    RefuseStream,
    Stall,
    TextReply,
    ToolCallReply,
)
from hermes_trio.tools import ToolContext, ToolRegistry, ToolResult

HOUR = 3600.0


async def timed_turn(agent: Any, prompt: str = "q", **kwargs: Any) -> list[tuple[float, Any]]:
    """Run one turn; every event with the virtual time it reached the consumer."""
    send, receive = trio.open_memory_channel[StreamEvent](64)
    seen: list[tuple[float, Any]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: agent.run_turn([{"role": "user", "content": prompt}], send, **kwargs)
        )
        async with receive:
            async for event in receive:
                seen.append((trio.current_time(), event))
    return seen


def finished(seen: list[tuple[float, Any]]) -> tuple[float, TurnFinished]:
    at, end = seen[-1]
    assert isinstance(end, TurnFinished)
    return at, end


# -- streaming reads ------------------------------------------------------------------


@pytest.mark.parametrize("api_mode", ["chat_completions", "responses"])
async def test_each_token_reaches_the_consumer_when_the_model_sends_it(
    autojump_clock: MockClock, api_mode: str
) -> None:
    reply = TextReply(tokens=["Tick", " tock", " tick", " tock"], first_token_delay=4, delay=3)
    async with agent_on_double([reply], model={"api_mode": api_mode}) as (agent, _):
        seen = await timed_turn(agent)
    chunks = [(at, e.text) for at, e in seen if isinstance(e, MessageChunk)]
    assert chunks == [(4.0, "Tick"), (7.0, " tock"), (10.0, " tick"), (13.0, " tock")]
    at, end = finished(seen)
    assert (at, end.text, end.finish_reason) == (13.0, "Tick tock tick tock", "stop")


async def test_a_client_tool_call_streams_as_the_model_writes_it(
    autojump_clock: MockClock,
) -> None:
    # Fragments of 8 characters every 2 s, then 30 s before the model says
    # it is done: each piece reaches the consumer when it is written.
    reply = ToolCallReply(
        [("lookup", {"query": "trio"})], fragment_size=8, delay=2, finish_delay=30
    )
    client_tool = {
        "type": "function",
        "function": {"name": "lookup", "parameters": {"type": "object"}},
    }
    async with agent_on_double([reply], model={"timeouts": {"idle": 60}}) as (agent, _):
        seen = await timed_turn(agent, client_tools=[client_tool])
    deltas = [(at, e) for at, e in seen if isinstance(e, ToolCallDelta)]
    assert [at for at, _ in deltas] == [0.0, 2.0, 4.0]
    assert deltas[0][1].name == "lookup"
    assert "".join(e.arguments for _, e in deltas) == '{"query":"trio"}'
    at, end = finished(seen)
    assert (at, end.finish_reason) == (34.0, "tool_calls")
    assert end.tool_calls[0]["function"]["arguments"] == '{"query":"trio"}'


# -- the watchdog -------------------------------------------------------------------


@pytest.mark.parametrize("api_mode", ["chat_completions", "responses"])
async def test_no_first_token_ends_the_turn_at_the_first_token_limit(
    autojump_clock: MockClock, api_mode: str
) -> None:
    model = {"api_mode": api_mode, "timeouts": {"first_token": 30}}
    async with agent_on_double([Stall(seconds=HOUR)], model=model) as (agent, double):
        seen = await timed_turn(agent)
    at, end = finished(seen)
    assert (at, end.error_code) == (30.0, "model_timeout")
    assert "within 30 s (model.timeouts.first_token)" in (end.error or "")
    (connection,) = double.connections
    assert (connection.closed_at, connection.closed_by) == (30.0, "client")


async def test_silence_mid_answer_ends_the_turn_at_the_idle_limit_keeping_the_text(
    autojump_clock: MockClock,
) -> None:
    model = {"timeouts": {"idle": 20}}
    reply = Stall("some words", seconds=HOUR)
    async with agent_on_double([reply, TextReply("unused")], model=model) as (agent, double):
        seen = await timed_turn(agent)
    at, end = finished(seen)
    assert (at, end.text, end.error_code) == (20.0, "some words", "model_timeout")
    assert "went silent for 20 s" in (end.error or "")
    # Text had reached the consumer: never retried, never repeated.
    assert len(double.requests) == 1
    assert double.connections[0].closed_at == 20.0


async def test_a_steady_answer_is_cut_at_the_total_limit(autojump_clock: MockClock) -> None:
    tokens = [f" t{n}" for n in range(100)]
    model = {"timeouts": {"idle": 60, "total": 95}}
    async with agent_on_double([TextReply(tokens=tokens, delay=10)], model=model) as (
        agent,
        double,
    ):
        seen = await timed_turn(agent)
    at, end = finished(seen)
    assert (at, end.error_code) == (95.0, "model_timeout")
    assert "still answering after 95 s" in (end.error or "")
    # Tokens at 0, 10, ..., 90 were shown.
    assert end.text == "".join(tokens[:10])
    assert double.connections[0].closed_at == 95.0


async def test_a_plain_request_is_cut_at_the_request_limit(autojump_clock: MockClock) -> None:
    model = {"timeouts": {"request": 40}}
    async with agent_on_double([Stall(seconds=HOUR)], model=model) as (agent, double):
        seen = await timed_turn(agent, stream=False)
    at, end = finished(seen)
    assert (at, end.error_code) == (40.0, "model_timeout")
    assert "within 40 s (model.timeouts.request)" in (end.error or "")
    assert double.requests[0].stream is False
    assert (double.connections[0].closed_at, double.connections[0].closed_by) == (40.0, "client")


# -- retries -------------------------------------------------------------------------


async def test_retries_back_off_exponentially_before_the_first_token(
    autojump_clock: MockClock,
) -> None:
    script = [ErrorReply(503), ErrorReply(503), ErrorReply(502), TextReply("at last")]
    model = {"max_retries": 3, "backoff_base": 2.0, "backoff_max": 5.0}
    async with agent_on_double(script, model=model) as (agent, double):
        seen = await timed_turn(agent)
    times = [r.received_at for r in double.requests]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # Equal jitter: half of each step fixed, half random; the step doubles
    # from backoff_base up to backoff_max.
    assert len(gaps) == 3
    assert 1.0 <= gaps[0] <= 2.0
    assert 2.0 <= gaps[1] <= 4.0
    assert 2.5 <= gaps[2] <= 5.0
    at, end = finished(seen)
    assert (at, end.text) == (times[-1], "at last")


async def test_retry_after_is_waited_exactly_and_capped(autojump_clock: MockClock) -> None:
    script = [
        ErrorReply(429, "slow down", headers={"Retry-After": "7"}),
        ErrorReply(503, "busy", headers={"Retry-After": "3"}),
        ErrorReply(429, "much later", headers={"Retry-After": "86400"}),
        TextReply("ok"),
    ]
    async with agent_on_double(script, model={"max_retries": 3}) as (agent, double):
        seen = await timed_turn(agent)
    # A day is capped at a minute.
    assert [r.received_at for r in double.requests] == [0.0, 7.0, 10.0, 70.0]
    assert finished(seen)[1].text == "ok"


async def test_retries_give_up_after_max_retries_with_the_last_error(
    autojump_clock: MockClock,
) -> None:
    script = [ErrorReply(503, f"busy {n}", headers={"Retry-After": "5"}) for n in range(4)]
    async with agent_on_double(script, model={"max_retries": 2}) as (agent, double):
        seen = await timed_turn(agent)
    assert [r.received_at for r in double.requests] == [0.0, 5.0, 10.0]
    at, end = finished(seen)
    assert (at, end.model_status) == (10.0, 503)
    assert "busy 2" in (end.error or "")
    assert len(double.remaining) == 1


async def test_a_fallback_model_is_asked_once_the_primary_has_used_its_retries(
    autojump_clock: MockClock,
) -> None:
    busy = ErrorReply(503, "primary busy", headers={"Retry-After": "4"})
    script = [busy, busy, TextReply("from the backup")]
    model = {"max_retries": 1, "fallbacks": [FallbackModel(name="backup-model")]}
    async with agent_on_double(script, model=model) as (agent, double):
        seen = await timed_turn(agent)
    asked = [(r.received_at, r.json["model"]) for r in double.requests]
    # One retry after the Retry-After, then the fallback at once.
    assert asked == [(0.0, "scripted-model"), (4.0, "scripted-model"), (4.0, "backup-model")]
    assert finished(seen)[1].text == "from the backup"


async def test_a_stream_dropped_before_its_first_byte_is_retried_after_a_backoff(
    autojump_clock: MockClock,
) -> None:
    model = {"backoff_base": 4.0, "backoff_max": 4.0}
    async with agent_on_double([Drop(), TextReply("recovered")], model=model) as (agent, double):
        seen = await timed_turn(agent)
    first, second = double.requests
    assert (first.stream, second.stream) == (True, True)
    assert 2.0 <= second.received_at <= 4.0
    assert finished(seen) == (second.received_at, finished(seen)[1])
    assert finished(seen)[1].text == "recovered"


async def test_a_stream_dropped_after_its_first_token_is_not_retried(
    autojump_clock: MockClock,
) -> None:
    reply = TextReply(tokens=["partial", " text"], delay=6)
    script = [Drop("partial text"), reply]
    async with agent_on_double(script) as (agent, double):
        seen = await timed_turn(agent)
    at, end = finished(seen)
    assert (at, end.text, end.finish_reason) == (0.0, "partial text", "error")
    assert "dropped the stream" in (end.error or "")
    assert len(double.requests) == 1


async def test_a_server_that_cannot_stream_is_asked_plainly_until_the_expiry(
    autojump_clock: MockClock,
) -> None:
    script = [RefuseStream(TextReply(f"plain {n}")) for n in range(3)]
    async with agent_on_double(script) as (agent, double):
        _, first = await run_turn(agent, "one")
        await trio.sleep(StreamSupport.TTL - 1)
        _, second = await run_turn(agent, "two")
        await trio.sleep(1)
        _, third = await run_turn(agent, "three")
    assert [r.text for r in (first, second, third)] == ["plain 0", "plain 1", "plain 2"]
    # Refused and asked plainly; remembered; at the expiry streaming is tried again.
    assert [(r.received_at, r.stream) for r in double.model_requests] == [
        (0.0, True),
        (0.0, False),
        (StreamSupport.TTL - 1, False),
        (StreamSupport.TTL, True),
        (StreamSupport.TTL, False),
    ]


@pytest.mark.parametrize("api_mode", ["chat_completions", "responses"])
async def test_a_complete_answer_held_open_ends_at_once(
    autojump_clock: MockClock, api_mode: str
) -> None:
    script = [TextReply("complete answer", hold=HOUR)]
    async with agent_on_double(script, model={"api_mode": api_mode}) as (agent, double):
        seen = await timed_turn(agent)
    at, end = finished(seen)
    # The usage came: nothing more is owed, so a short drain ends it.
    assert (at, end.text, end.finish_reason, end.error) == (
        DRAIN_GRACE,
        "complete answer",
        "stop",
        None,
    )
    assert end.usage.total_tokens > 0
    connection = double.connections[0]
    assert (connection.closed_at, connection.closed_by) == (DRAIN_GRACE, "client")


# -- cancellation ---------------------------------------------------------------------


async def test_cancelling_mid_stream_closes_the_upstream_at_that_instant(
    autojump_clock: MockClock,
) -> None:
    reply = TextReply(tokens=["first", " second", " third"], delay=60)
    model = {"timeouts": {"idle": 120}}
    async with agent_on_double([reply], model=model) as (agent, double):
        messages: list[dict[str, Any]] = [{"role": "user", "content": "talk slowly"}]
        send, receive = trio.open_memory_channel[StreamEvent](16)
        with trio.CancelScope() as turn:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent.run_turn, messages, send)
                async with receive:
                    async for event in receive:
                        if event == MessageChunk(" second"):
                            turn.cancel()
    assert turn.cancelled_caught
    assert trio.current_time() == 60.0
    assert (double.connections[0].closed_at, double.connections[0].closed_by) == (60.0, "client")
    assert messages[-1] == {"role": "assistant", "content": "first second [interrupted]"}


async def test_cancelling_during_a_backoff_sends_nothing_more(autojump_clock: MockClock) -> None:
    script = [ErrorReply(503, headers={"Retry-After": "30"}), TextReply("never")]
    async with agent_on_double(script) as (agent, double):
        with trio.move_on_after(10):
            await run_turn(agent, "q")
        assert trio.current_time() == 10.0
        await trio.sleep(HOUR)
    assert len(double.requests) == 1
    assert double.remaining == [TextReply("never")]


@dataclass
class Nap:
    """A tool that sleeps on the trio clock and says when it ran."""

    name: str = "nap"
    description: str = "Sleep for a while."
    parameters: dict[str, Any] = field(
        default_factory=lambda: {
            "type": "object",
            "properties": {"seconds": {"type": "number"}},
            "required": ["seconds"],
        }
    )
    ran: list[tuple[str, float]] = field(default_factory=list)

    def preview(self, args: dict[str, Any]) -> str:
        return f"nap {args['seconds']} s"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.ran.append(("start", trio.current_time()))
        try:
            await trio.sleep(args["seconds"])
        except trio.Cancelled:
            self.ran.append(("cancelled", trio.current_time()))
            raise
        self.ran.append(("done", trio.current_time()))
        return ToolResult(True, "rested")


async def test_a_long_tool_gets_its_hint_at_the_threshold_and_its_duration(
    autojump_clock: MockClock,
) -> None:
    nap = Nap()
    script = [ToolCallReply([("nap", {"seconds": 25})]), TextReply("awake")]
    tools = ToolRegistry([nap])
    agent_cfg = {"long_tool_hint": 10}
    async with agent_on_double(script, agent=agent_cfg, tools=tools) as (agent, double):
        seen = await timed_turn(agent)
    hint = [(at, e) for at, e in seen if isinstance(e, LongToolHint)]
    assert hint == [(10.0, LongToolHint("nap", 10.0))]
    done = [(at, e.duration, e.ok) for at, e in seen if isinstance(e, ToolCallFinished)]
    assert done == [(25.0, 25.0, True)]
    assert nap.ran == [("start", 0.0), ("done", 25.0)]
    assert [r.received_at for r in double.requests] == [0.0, 25.0]
    assert finished(seen)[1].text == "awake"


async def test_cancelling_a_turn_cancels_its_running_tool_at_once(
    autojump_clock: MockClock,
) -> None:
    nap = Nap()
    script = [ToolCallReply([("nap", {"seconds": HOUR})]), TextReply("never")]
    async with agent_on_double(script, tools=ToolRegistry([nap])) as (agent, double):
        messages: list[dict[str, Any]] = [{"role": "user", "content": "rest"}]
        send, receive = trio.open_memory_channel[StreamEvent](16)
        with trio.move_on_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent.run_turn, messages, send)
                async with receive:
                    async for _ in receive:
                        pass
    assert nap.ran == [("start", 0.0), ("cancelled", 5.0)]
    assert len(double.requests) == 1
    # Every tool call has a result, so the conversation can go on.
    assert messages[-1]["role"] == "tool" and "interrupted" in messages[-1]["content"]


# -- the agent's own API on the double ------------------------------------------------


async def test_ask_on_the_double_returns_the_text(autojump_clock: MockClock) -> None:
    double = ModelDouble(default=lambda request: TextReply(f"{len(request.json['messages'])}"))
    async with agent_on_double(double) as (agent, _):
        assert await agent.ask("count") == "2"  # the system prompt and the question
