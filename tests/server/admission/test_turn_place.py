"""A turn's place (server/admission/turn_place.py): what a request
takes for its turn is given back once — by the request's block when the
turn never starts, by the turn's end once it started. In process, on
trio's MockClock."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from hermes_trio.config import Config
from hermes_trio.events import StreamEvent, Usage
from hermes_trio.server.admission.turn_place import TurnPlace
from hermes_trio.server.admission.turn_slots import TurnSlots
from hermes_trio.server.parsing.errors import APIError
from hermes_trio.turn import TurnResult

TURN_TAKES = 5.0


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


class _SlowAgent:
    """Answers after :data:`TURN_TAKES` seconds."""

    config = Config()

    async def run_turn(
        self, messages: list[dict[str, Any]], send: trio.MemorySendChannel[StreamEvent], **_: Any
    ) -> TurnResult:
        async with send:
            await trio.sleep(TURN_TAKES)
        return TurnResult("done", Usage(), "stop")


async def _drain(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
    async with receive:
        async for _ in receive:
            pass


class _Claim:
    """A conversation claim that counts how often it was given back."""

    def __init__(self) -> None:
        self.released: list[float] = []

    async def release(self) -> None:
        self.released.append(trio.current_time())


async def test_an_error_before_the_turn_starts_gives_everything_back_once() -> None:
    slots, claim, order = TurnSlots(2), _Claim(), []
    with pytest.raises(ValueError):
        async with TurnPlace() as place:
            place.on_release(claim.release)
            place.take(slots)
            assert slots.in_use == 1
            place.on_release(lambda: _note(order, "last taken"))
            raise ValueError("the request failed")
    assert slots.in_use == 0 and len(claim.released) == 1 and order == ["last taken"]
    # Given back already: a second release changes nothing.
    place.release()
    assert slots.in_use == 0


async def _note(order: list[str], what: str) -> None:
    order.append(what)


async def test_a_refused_slot_gives_back_the_claim_taken_before_it() -> None:
    claim = _Claim()
    with pytest.raises(APIError) as refused:
        async with TurnPlace() as place:
            place.on_release(claim.release)
            place.take(TurnSlots(0))
    assert refused.value.status == 429 and len(claim.released) == 1


async def test_a_cancelled_request_gives_everything_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slots, claim = TurnSlots(1), _Claim()
    with trio.move_on_after(1.0):
        async with TurnPlace() as place:
            place.on_release(claim.release)
            place.take(slots)
            await trio.sleep_forever()
    assert slots.in_use == 0 and claim.released == [1.0]


async def test_a_started_turn_owns_the_place_and_gives_it_back_as_it_ends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slots, claim = TurnSlots(1), _Claim()
    async with trio.open_nursery() as nursery:
        async with TurnPlace() as place:
            place.on_release(claim.release)
            place.take(slots)
            turn = place.start(nursery, _SlowAgent(), [], _drain)  # type: ignore[arg-type]
            assert place.handed_off
        # The block's end gave nothing back: the turn holds it.
        assert slots.in_use == 1 and claim.released == []
        await turn.done.wait()
        assert trio.current_time() == TURN_TAKES
        assert slots.in_use == 0
    # The claim is the turn's own to give back (its ``around``), not the block's.
    assert claim.released == []
    assert turn.result is not None and turn.result.finish_reason == "stop"


async def test_an_error_after_the_hand_off_leaves_the_turn_its_place(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slots = TurnSlots(1)
    async with trio.open_nursery() as nursery:
        with pytest.raises(KeyError):
            async with TurnPlace() as place:
                place.take(slots)
                turn = place.start(nursery, _SlowAgent(), [], _drain)  # type: ignore[arg-type]
                raise KeyError("after the turn started")
        assert slots.in_use == 1
        await turn.done.wait()
    assert slots.in_use == 0


async def test_work_that_takes_the_place_over_gives_it_back_itself(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A relay task: ``hand_off`` first, its own ``release`` as it ends."""
    slots = TurnSlots(1)

    async def relay(place: TurnPlace, *, task_status: Any) -> None:
        place.hand_off()
        task_status.started()
        try:
            await trio.sleep(2.0)
        finally:
            place.release(3)

    async with trio.open_nursery() as nursery:
        async with TurnPlace() as place:
            place.take(slots)
            await nursery.start(relay, place)
        assert slots.in_use == 1
    assert slots.in_use == 0 and trio.current_time() == 2.0
