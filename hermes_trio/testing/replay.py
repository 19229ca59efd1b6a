"""Replaying a recorded turn on trio's ``MockClock``.

:func:`replay` runs the turn of a :class:`~hermes_trio.testing.Recording`
again: the same messages and options, the model's answers from the
recording (:meth:`ModelDouble.from_recording`), the tools' results from the
recording (:func:`recorded_tools`), a cancel where the recording has one,
all on ``MockClock(autojump_threshold=0)``. Its :class:`Replay` holds the
events with their virtual times and the first difference from the
recorded ones, if any::

    from hermes_trio.testing import Recording, replay

    def test_the_bug_stays_fixed() -> None:
        result = replay(Recording.load("tests/recordings/bug-123.json"))
        assert result.matches, result.difference
        assert result.text() == "The answer"
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import trio
import trio.testing

from .. import events as event_types
from ..agent import open_agent
from ..events import StreamEvent, TurnFinished
from ..recording.document import EventRecord, ToolRecord
from ..recording.schema import check_document
from ..recording.tape import (
    Difference,
    RecordingError,
    event_record,
    first_difference,
    timeline_lines,
)
from ..tools import ToolContext, ToolRegistry, ToolResult, default_registry
from ..turn import Turn, run_turn
from .replay_data import Recording
from .scripted_model.double import ModelDouble

__all__ = ["Replay", "TimedEvent", "recorded_tools", "replay", "replay_turn"]


@dataclass(frozen=True)
class TimedEvent:
    """An event and its time in seconds since the turn began (virtual)."""

    at: float
    event: StreamEvent


@dataclass
class Replay:
    """What a replay did, beside what the recording says it did."""

    recording: Recording
    events: list[TimedEvent] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)

    @property
    def records(self) -> list[EventRecord]:
        return [event_record(e.at, e.event) for e in self.events]

    @property
    def difference(self) -> Difference | None:
        """The first replayed event that differs from the recorded one."""
        return first_difference(self.recording.events, self.records, causes=self.causes)

    @property
    def matches(self) -> bool:
        return self.difference is None

    def timeline(self) -> list[str]:
        return timeline_lines(self.records)

    def text(self) -> str:
        """The final text of the replayed turn ("" if it did not finish)."""
        ends = [e.event for e in self.events if isinstance(e.event, TurnFinished)]
        return ends[-1].text if ends else ""


class _Clock:
    """When the replayed turn began, and what was last replayed."""

    def __init__(self) -> None:
        self.start = 0.0
        self.cause = ""


class _RecordedTool:
    """A tool that answers each call as the recording says (by the call's
    index in the turn), after the recorded run time, publishing the
    approvals the recorded call asked for at their recorded times."""

    def __init__(
        self,
        name: str,
        like: Any,
        calls: Mapping[int, ToolRecord],
        approvals: Mapping[int, list[EventRecord]],
        clock: _Clock,
    ) -> None:
        self.name = name
        self.description = getattr(like, "description", f"{name} (replayed)")
        self.parameters = getattr(like, "parameters", {"type": "object"})
        self._like = like
        self._calls = calls
        self._approvals = approvals
        self._clock = clock

    def preview(self, args: dict[str, Any]) -> str:
        if self._like is not None:
            return str(self._like.preview(args))
        return json.dumps(args, ensure_ascii=False)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        index = ctx.call.index if ctx.call is not None else -1
        call = self._calls.get(index)
        if call is None:
            return ToolResult(False, f"replay: the recording has no result for tool call {index}")
        started = trio.current_time()
        for record in self._approvals.get(index, []):
            await trio.sleep_until(self._clock.start + float(record["at"]))
            if ctx.call is not None and ctx.call.publish is not None:
                kind = getattr(event_types, str(record["type"]))
                await ctx.call.publish(kind(**record["data"]))
        await trio.sleep_until(started + float(call["duration"]))
        self._clock.cause = f"tool call {index + 1} ({self.name})"
        return ToolResult(bool(call["ok"]), str(call["result"]))


def recorded_tools(recording: Recording, *, clock: Any = None) -> ToolRegistry:
    """A registry whose tools give the recorded results, with the recorded
    run times; built-in tools keep their own schema and preview."""
    clock = clock if clock is not None else _Clock()
    builtins = default_registry()
    calls: dict[str, dict[int, ToolRecord]] = {}
    for call in recording.tools:
        calls.setdefault(str(call["name"]), {})[int(call["index"])] = call
    approvals: dict[int, list[EventRecord]] = {}
    for record in recording.events:
        if record.get("type") in ("ApprovalRequested", "ApprovalResolved"):
            approvals.setdefault(int(record["data"].get("index", -1)), []).append(record)
    offered = {
        str(s.get("function", {}).get("name"))
        for exchange in recording.exchanges
        if isinstance(exchange.get("body"), dict)
        for s in exchange["body"].get("tools") or []
    }
    client = {
        str(t.get("function", {}).get("name")) for t in recording.options.get("client_tools") or []
    }
    names = (offered - client) | set(calls)
    registry = ToolRegistry()
    for name in sorted(names):
        registry.register(
            _RecordedTool(name, builtins.get(name), calls.get(name, {}), approvals, clock)
        )
    return registry


async def replay_turn(recording: Recording) -> Replay:
    """Replay ``recording`` in this trio run (which should use
    ``MockClock(autojump_threshold=0)``; :func:`replay` makes one).
    ``RecordingError`` names what is wrong with a document (edited since it
    was loaded, or built by hand) that is not a recording."""
    try:
        check_document(recording.document)
    except ValueError as exc:
        raise RecordingError(f"{recording.path}: {exc}") from None
    clock = _Clock()
    model = ModelDouble.from_recording(recording)
    assert model.recorded is not None
    model.recorded.sink = clock
    config = recording.config(ModelDouble.base_url)
    result = Replay(recording)
    cancel = recording.cancelled
    turn = Turn()

    async def collect(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
        try:
            async for event in receive:
                result.events.append(TimedEvent(trio.current_time() - clock.start, event))
                result.causes.append(clock.cause)
        finally:
            # Cancelled with the turn: what was sent before still counts.
            with contextlib.suppress(trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                while True:
                    event = receive.receive_nowait()
                    result.events.append(TimedEvent(trio.current_time() - clock.start, event))
                    result.causes.append(clock.cause)

    async def cancel_at(when: float, cause: str) -> None:
        await trio.sleep_until(when)
        turn.cancel(cause)

    tools = recorded_tools(recording, clock=clock)
    async with open_agent(config, transport=model, tools=tools) as agent:
        agent.context.resume(recording.context)
        clock.start = model.recorded.start = trio.current_time()
        async with trio.open_nursery() as nursery:
            if cancel is not None:
                when = clock.start + float(cancel["at"])
                nursery.start_soon(cancel_at, when, str(cancel.get("cause", "cancelled")))
            await run_turn(agent, recording.messages, collect, turn=turn, **recording.options)
            nursery.cancel_scope.cancel()
    return result


def replay(recording: Recording) -> Replay:
    """Replay ``recording`` on a fresh ``MockClock(autojump_threshold=0)``
    (from synchronous code: a test function, the ``replay`` command)."""
    return trio.run(replay_turn, recording, clock=trio.testing.MockClock(autojump_threshold=0))
