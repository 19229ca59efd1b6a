"""The gate between a stored response's events and its readers: nothing
beyond the store's reservation, and no ending before the store has it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import trio
import trio.testing

from hermes_trio.events import MessageChunk, TurnFinished
from hermes_trio.server.responses.live import LiveResponse, LiveResponses
from hermes_trio.server.store import RESERVE_AHEAD, SignalHandlers
from hermes_trio.wire.responses_out import ResponseBuilder, ResponseEvent


class GateStore:
    """A store whose reservation writes wait until the test lets them."""

    def __init__(self) -> None:
        self.reserved: list[int] = []
        self.go = trio.Event()

    async def reserve(self, response_id: str, seq: int) -> None:
        await self.go.wait()
        self.reserved.append(seq)


def setup(reserved: int) -> tuple[LiveResponses, LiveResponse, GateStore]:
    store = GateStore()
    responses = LiveResponses(cast(Any, SimpleNamespace(store=store, signals=SignalHandlers())))
    builder = ResponseBuilder("resp_1", created_at=1, model="m")
    live = LiveResponse("resp_1", "owner", builder, [], background=False)
    live.log.extend(builder.start())
    live.reserved = reserved
    return responses, live, store


def deltas(live: LiveResponse, n: int) -> list[ResponseEvent]:
    return [e for _ in range(n) for e in live.builder.feed(MessageChunk("x"))]


async def test_events_wait_for_their_reservation() -> None:
    responses, live, store = setup(reserved=6)
    within = deltas(live, 2)  # seq 2 (item added), 3 (part added), 4, 5
    assert await responses._admit(live, within) == within
    assert store.reserved == []
    beyond = deltas(live, 3)  # seq 6, 7, 8
    admitted: list[list[ResponseEvent]] = []
    async with trio.open_nursery() as nursery:

        async def admit() -> None:
            admitted.append(await responses._admit(live, beyond))

        nursery.start_soon(admit)
        await trio.testing.wait_all_tasks_blocked()
        # Seq 7 and 8 are past the reservation: nothing gets out yet.
        assert admitted == []
        store.go.set()
    assert admitted == [beyond]
    # One write reserves far ahead, not one per event.
    assert store.reserved == [8 + RESERVE_AHEAD]
    assert live.reserved == 8 + RESERVE_AHEAD
    assert live.held == []


async def test_a_cancel_during_the_wait_keeps_the_events() -> None:
    responses, live, store = setup(reserved=2)
    beyond = deltas(live, 2)
    with trio.CancelScope() as scope:
        scope.cancel()
        await responses._admit(live, beyond)
    # Kept for the end of the response, in order, nothing lost.
    assert live.held == beyond
    assert store.reserved == []


async def test_the_ending_is_held_back() -> None:
    responses, live, store = setup(reserved=100)
    events = deltas(live, 1) + live.builder.feed(TurnFinished("x", None, "stop"))
    admitted = await responses._admit(live, events)
    assert [e.type for e in live.held] == ["response.completed"]
    assert admitted + live.held == events
