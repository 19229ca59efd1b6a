"""The turn primitive (``hermes_trio.turn``) on the mock clock: its channel,
its cancel, its background form, and its one crash policy."""

from __future__ import annotations

import logging
from dataclasses import fields
from typing import Any

import pytest
import trio
from support import agent_on_double, crashing_tools, make_config
from trio.testing import MockClock

import hermes_trio
from hermes_trio import ModelError
from hermes_trio import turn as turn_module
from hermes_trio.agent import open_agent
from hermes_trio.events import MessageChunk, StreamEvent, TurnFinished
from hermes_trio.testing import ModelDouble, TextReply, ToolCallReply
from hermes_trio.turn import (
    INTERNAL_ERROR,
    Turn,
    TurnOptionFields,
    TurnOptions,
    open_turn,
    run_turn,
    start_turn,
)

CRASH = "internal error: the turn failed (RuntimeError); the log has the details"
TOKENS = [f" w{n}" for n in range(10)]


def _crashes(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Log records of a crash: each carries its traceback."""
    return [r for r in caplog.records if r.name == "hermes_trio.turn" and r.exc_info]


class _Reader:
    """A consumer that keeps every event and notes when the channel ended."""

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []
        self.ended_at: float | None = None

    async def __call__(self, receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
        async for event in receive:
            self.events.append(event)
        self.ended_at = trio.current_time()


async def test_a_turn_streams_to_its_consumer_and_ends_the_channel(
    autojump_clock: MockClock,
) -> None:
    reader = _Reader()
    turn = Turn()
    async with agent_on_double([TextReply(tokens=TOKENS, delay=0.5)]) as (agent, _):
        messages: list[dict[str, Any]] = [{"role": "user", "content": "count"}]
        result = await run_turn(agent, messages, reader, turn=turn)
    assert result is turn.result and turn.done.is_set() and turn.interrupted is None
    assert result.finish_reason == "stop" and result.text == "".join(TOKENS)
    assert isinstance(reader.events[-1], TurnFinished)
    assert reader.ended_at == 4.5 == trio.current_time()
    assert messages[-1] == {"role": "assistant", "content": "".join(TOKENS)}
    assert result.added == messages[1:]


async def test_cancel_stops_the_turn_and_the_request_at_that_instant(
    autojump_clock: MockClock,
) -> None:
    double = ModelDouble([TextReply(tokens=TOKENS, first_token_delay=2, delay=1.5)])
    seen: list[tuple[float, str]] = []
    async with agent_on_double(double) as (agent, _), trio.open_nursery() as nursery:
        turn: Turn

        async def show(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
            async for event in receive:
                if isinstance(event, MessageChunk):
                    seen.append((trio.current_time(), event.text))
                    if len(seen) == 5:
                        turn.cancel("enough")

        turn = start_turn(nursery, agent, "count", show)
        await turn.done.wait()
        assert trio.current_time() == 8.0
    assert seen == [(2.0 + 1.5 * n, TOKENS[n]) for n in range(5)]
    assert turn.interrupted == "enough"
    assert turn.result is not None and turn.result.finish_reason == "interrupted"
    # The interrupt record is in the history the turn added.
    assert turn.result.added[-1]["content"].endswith("[interrupted]")
    (request,) = double.model_requests
    assert double.connections[request.connection_id - 1].closed_at == 8.0


async def test_a_turn_cancelled_before_it_starts_ends_at_once(autojump_clock: MockClock) -> None:
    async with agent_on_double([TextReply("never")]) as (agent, double):
        async with trio.open_nursery() as nursery:
            turn = start_turn(nursery, agent, "hi", _Reader())
            turn.cancel("not now")
        assert double.model_requests == []
    assert turn.done.is_set() and turn.interrupted == "not now"
    assert turn.result is not None and turn.result.finish_reason == "interrupted"
    assert trio.current_time() == 0


async def test_a_crashing_tool_ends_the_turn_with_internal_error(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    reader = _Reader()
    script = [ToolCallReply([("probe", {})], text="Let me look.", delay=1)]
    async with agent_on_double(script, tools=crashing_tools()) as (agent, _):
        messages: list[dict[str, Any]] = [{"role": "user", "content": "look"}]
        result = await run_turn(agent, messages, reader)
    assert result.error_code == INTERNAL_ERROR and result.error == CRASH
    assert result.finish_reason == "error"
    # The consumer hears it as the turn's last event, then the channel ends.
    last = reader.events[-1]
    assert isinstance(last, TurnFinished)
    assert (last.error, last.error_code, last.finish_reason) == (CRASH, INTERNAL_ERROR, "error")
    assert reader.ended_at == trio.current_time()
    crashes = _crashes(caplog)
    assert len(crashes) == 1 and "agent" in crashes[0].getMessage()
    assert "tool bug in probe" in (crashes[0].exc_text or str(crashes[0].exc_info))
    # Its text stays in the log: a tool's exception may carry anything.
    assert "tool bug" not in (result.error or "")
    # The history the model sees next is whole: every call has its result.
    calls = [c["id"] for m in messages if m["role"] == "assistant" for c in m["tool_calls"]]
    assert calls and calls == [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert result.added == messages[1:]


async def test_a_crashing_consumer_ends_the_turn_and_cancels_the_agent(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
        await receive.receive()
        await receive.receive()
        raise RuntimeError("consumer bug")

    double = ModelDouble([TextReply(tokens=TOKENS, delay=1)])
    async with agent_on_double(double) as (agent, _):
        result = await run_turn(agent, "count", broken)
    assert result.error_code == INTERNAL_ERROR and result.error == CRASH
    assert trio.current_time() == 1.0
    (request,) = double.model_requests
    assert double.connections[request.connection_id - 1].closed_at == 1.0
    crashes = _crashes(caplog)
    assert len(crashes) == 1 and "consumer" in crashes[0].getMessage()


async def test_an_agent_that_raises_with_its_channel_open_still_ends_it(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    reader = _Reader()
    async with agent_on_double() as (agent, _):

        async def broken(messages: Any, send: Any, **kwargs: Any) -> Any:
            await trio.sleep(3)
            raise ValueError("agent bug")

        agent.run_turn = broken  # type: ignore[method-assign]
        result = await run_turn(agent, "hi", reader)
    assert result.error == "internal error: the turn failed (ValueError); the log has the details"
    assert reader.ended_at == 3.0
    assert len(_crashes(caplog)) == 1


async def test_a_crash_at_the_moment_of_a_cancel_is_recorded_and_the_cancel_goes_on(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    turn = Turn()
    with trio.CancelScope() as outer:

        async def broken(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
            await receive.receive()
            outer.cancel()
            raise RuntimeError("consumer bug")

        async with agent_on_double([TextReply(tokens=TOKENS, delay=1)]) as (agent, _):
            await run_turn(agent, "count", broken, turn=turn)
        pytest.fail("the cancel did not propagate")
    assert outer.cancelled_caught
    assert turn.result is not None and turn.result.error_code == INTERNAL_ERROR
    assert turn.done.is_set()
    assert len(_crashes(caplog)) == 1


async def test_other_base_exceptions_are_no_crash(autojump_clock: MockClock, caplog) -> None:
    class Stop(BaseException):
        pass

    async def stopper(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
        await receive.receive()
        raise Stop

    async with agent_on_double([TextReply(tokens=TOKENS, delay=1)]) as (agent, _):
        with pytest.RaisesGroup(Stop):
            await run_turn(agent, "count", stopper)
    assert _crashes(caplog) == []


async def test_a_turn_runs_once(autojump_clock: MockClock) -> None:
    turn = Turn()
    async with agent_on_double([TextReply("one"), TextReply("two")]) as (agent, _):
        await run_turn(agent, "hi", _Reader(), turn=turn)
        with pytest.raises(RuntimeError, match="runs once"):
            await run_turn(agent, "hi", _Reader(), turn=turn)


async def test_the_background_form_holds_a_slot_and_a_registry_entry(
    autojump_clock: MockClock,
) -> None:
    registry: set[Turn] = set()
    exits: list[float] = []
    steps: list[str] = []

    async def around(turn: Turn, run: Any) -> None:
        steps.append("before")
        result = await run()
        steps.append(f"after {result.finish_reason}")

    async with agent_on_double([TextReply("hello", first_token_delay=2)]) as (agent, _):
        async with trio.open_nursery() as nursery:
            turn = start_turn(
                nursery,
                agent,
                "hi",
                _Reader(),
                registry=registry,
                on_exit=lambda: exits.append(trio.current_time()),
                around=around,
            )
            assert registry == {turn}
            await turn.done.wait()
            assert registry == set()
    assert exits == [2.0]
    assert steps == ["before", "after stop"]


async def test_a_crash_around_a_background_turn_stays_in_the_turn(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async def around(turn: Turn, run: Any) -> None:
        await run()
        raise RuntimeError("bug after the turn")

    async with agent_on_double([TextReply("hello")]) as (agent, _):
        async with trio.open_nursery() as nursery:
            turn = start_turn(nursery, agent, "hi", _Reader(), around=around)
    assert turn.result is not None and turn.result.error_code == INTERNAL_ERROR
    assert len(_crashes(caplog)) == 1


async def test_open_turn_hands_an_agent_crash_to_its_block(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    script = [ToolCallReply([("probe", {})]), ToolCallReply([("probe", {})])]
    async with agent_on_double(script, tools=crashing_tools()) as (agent, _):
        async with agent.turn("look") as events:
            seen = [event async for event in events]
        last = seen[-1]
        assert isinstance(last, TurnFinished) and last.error_code == INTERNAL_ERROR
        with pytest.raises(ModelError) as info:
            await agent.ask("look again")
    assert info.value.code == INTERNAL_ERROR
    assert len(_crashes(caplog)) == 2


async def test_leaving_open_turn_early_cancels_the_turn_then(autojump_clock: MockClock) -> None:
    double = ModelDouble([TextReply(tokens=TOKENS, delay=1)])
    turn = Turn()
    async with agent_on_double(double) as (agent, _):
        async with open_turn(agent, "count", turn=turn) as events:
            async for event in events:
                if isinstance(event, MessageChunk) and event.text == TOKENS[2]:
                    break
        left_at = trio.current_time()
    assert left_at == 2.0
    assert turn.done.is_set() and turn.interrupted is not None
    assert turn.result is not None and turn.result.finish_reason == "interrupted"
    (request,) = double.model_requests
    assert double.connections[request.connection_id - 1].closed_at == 2.0


async def test_an_exception_in_the_open_turn_block_is_the_callers(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with agent_on_double([TextReply(tokens=TOKENS, delay=1)]) as (agent, _):
        with pytest.RaisesGroup(pytest.RaisesExc(KeyError, match="mine")):
            async with open_turn(agent, "count") as events:
                async for _ in events:
                    raise KeyError("mine")
    assert _crashes(caplog) == []


async def test_the_module_example_runs(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = turn_module.__doc__ or ""
    code = doc.split("Three ways to run one::\n", 1)[1]
    lines = [line.removeprefix("    ") for line in code.splitlines()]
    source = "\n".join(line for line in lines if not line.startswith("trio.run("))
    counting = TextReply(tokens=[f" {n}" for n in range(1, 100)], delay=1.5)
    double = ModelDouble([TextReply("Hello!"), counting, TextReply("4")])
    config = make_config(double.base_url)
    monkeypatch.setattr(
        hermes_trio, "open_agent", lambda: open_agent(config, transport=double)
    )
    printed: list[str] = []

    def fake_print(*args: Any, end: str = "\n", flush: bool = False) -> None:
        printed.append(" ".join(map(str, args)) + end)

    namespace: dict[str, Any] = {"__name__": "turn_example", "print": fake_print}
    exec(compile(source, "hermes_trio/turn.py", "exec"), namespace)
    await namespace["main"]()
    assert "".join(printed) == (
        "Hello! (stop)\n 1 2 3 4 5 6 7 (interrupted: took too long)\n4\n"
    )
    assert trio.current_time() == 10.0


def test_option_fields_name_every_turn_option_in_order() -> None:
    """``TurnOptionFields`` repeats ``TurnOptions``' fields by hand (a
    TypedDict cannot be derived from a dataclass for the type checker):
    this keeps the two lists from drifting apart."""
    assert list(TurnOptionFields.__annotations__) == [f.name for f in fields(TurnOptions)]
    assert TurnOptionFields.__optional_keys__ == frozenset(TurnOptionFields.__annotations__)
