"""Durable, then visible: the events of a stored response reach its readers
only once the store has committed them, and its ending only with the
response's final state (in memory, with trio's MockClock)."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, cast

import pytest
import trio
import trio.testing

from hermes_trio.consumers.responses_sse import EventLog, LogFollower
from hermes_trio.events import MessageChunk, TurnFinished
from hermes_trio.server.responses.live import LiveResponse, LiveResponses
from hermes_trio.store import SignalHandlers, StoreError
from hermes_trio.wire.responses_out import ResponseBuilder, ResponseEvent
from hermes_trio.wire.sse import SSEDecoder, SSEEvent


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


class GateStore:
    """A store whose event writes commit when the test lets them (or are
    refused)."""

    def __init__(self) -> None:
        self.committed: list[list[int]] = []
        self.gate = trio.Event()
        self.refuse: StoreError | None = None

    async def append_events(self, response_id: str, events: Sequence[ResponseEvent]) -> None:
        await self.gate.wait()
        if self.refuse is not None:
            raise self.refuse
        self.committed.append([e.sequence_number for e in events])


def setup() -> tuple[LiveResponses, LiveResponse, GateStore]:
    store = GateStore()
    responses = LiveResponses(cast(Any, SimpleNamespace(store=store, signals=SignalHandlers())))
    builder = ResponseBuilder("resp_1", created_at=1, model="m")
    live = LiveResponse("resp_1", "owner", builder, [], background=False)
    live.log = EventLog(durable=True)
    live.log.extend(builder.start())
    # As LiveResponses.start leaves it: the first events went with the row.
    live.persisted = len(live.log)
    live.log.publish(live.persisted)
    return responses, live, store


def deltas(live: LiveResponse, n: int) -> list[ResponseEvent]:
    return [e for _ in range(n) for e in live.builder.feed(MessageChunk("x"))]


def numbers(raw: bytes) -> list[int]:
    return [int(e.id or -1) for e in SSEDecoder().feed(raw) if isinstance(e, SSEEvent)]


async def test_events_reach_readers_once_committed(autojump_clock: Any) -> None:
    responses, live, store = setup()
    follower = LogFollower(live.log, keepalive=60)
    assert numbers(await follower.receive()) == [0, 1]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(responses._persist, live)
        batch = deltas(live, 3)
        live.log.extend(batch)
        await trio.testing.wait_all_tasks_blocked()
        # Built and handed to the store, not committed: nobody sees them.
        assert live.log.visible == 2
        with trio.move_on_after(30):
            await follower.receive()
            pytest.fail("a reader saw an event the store did not have")
        store.gate.set()
        assert numbers(await follower.receive()) == [e.sequence_number for e in batch]
        assert store.committed == [[e.sequence_number for e in batch]]
        assert live.persisted == len(live.log) == live.log.visible
        # Later batches go straight through once the store answers.
        more = deltas(live, 1)
        live.log.extend(more)
        assert numbers(await follower.receive()) == [e.sequence_number for e in more]
        nursery.cancel_scope.cancel()


async def test_a_refused_write_fails_the_response_unseen(autojump_clock: Any) -> None:
    responses, live, store = setup()
    store.refuse = StoreError("store_full", "the response store is full")
    store.gate.set()
    live.log.extend(deltas(live, 2))
    await responses._persist(live)
    assert live.store_error is store.refuse
    assert live.turn.cancel_called
    assert live.log.visible == 2 and live.persisted == 2


async def test_the_ending_is_held_back() -> None:
    responses, live, _ = setup()
    events = deltas(live, 1) + live.builder.feed(TurnFinished("x", None, "stop"))
    admitted = await responses._admit(live, events)
    assert [e.type for e in live.held] == ["response.completed"]
    assert admitted + live.held == events


async def test_a_refused_ending_drops_what_the_store_lacks() -> None:
    """The store refused the last write: readers get the failure right after
    the events the store has; the rest were never visible and are gone."""
    responses, live, _ = setup()
    live.log.extend(deltas(live, 3))
    live.held = live.builder.feed(TurnFinished("xxx", None, "stop"))
    responses._refused(live, StoreError("store_full", "full"))
    live.log.extend(live.held)
    live.log.close()
    types = [e.type for e in live.log.events]
    assert types == ["response.created", "response.in_progress", "error", "response.failed"]
    assert [e.sequence_number for e in live.log.events] == [0, 1, 2, 3]
    assert responses.unstored["resp_1"] is live
