"""Release unless handed off: what a request reserves for the turn it is
about to start, given back exactly once.

A request takes things for its turn one by one — a session's conversation
claim, then a :class:`~.turn_slots.TurnHold` (a server slot and the key's
place) — and any step after the first may fail or be cancelled (a 429, a
store that refuses, a client gone). A :class:`TurnReservation` block
collects what is taken; leaving the block gives all of it back, last taken
first, unless :meth:`TurnReservation.start` started the turn, which from
then on gives back the hold itself (its ``on_exit``) and whatever its
``around`` holds. So each path releases once, by one owner.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableSet
from contextlib import AsyncExitStack
from types import TracebackType

import trio

from ...agent import Agent
from ...turn import Consumer, Turn, TurnAround, TurnOptions
from ...wire.messages import Message
from ..edge.request_log import current_record
from .turn_slots import TurnHold, TurnSlots

__all__ = ["TurnReservation"]


class TurnReservation:
    """``async with TurnReservation() as reserved:`` take what the turn
    needs (:meth:`take_hold`, :meth:`on_release`), then :meth:`start` it.
    Leaving the block before the turn started releases everything taken."""

    def __init__(self) -> None:
        self._taken = AsyncExitStack()
        self.hold: TurnHold | None = None
        self.handed_off = False
        """True once the turn owns what was taken."""

    async def __aenter__(self) -> TurnReservation:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Handed off: the stack was emptied, so this gives back nothing.
        await self._taken.__aexit__(kind, exc, tb)

    def on_release(self, release: Callable[[], Awaitable[object]]) -> None:
        """Something taken already (a conversation claim) that the block
        gives back, by awaiting ``release()``, if the turn never starts."""
        self._taken.push_async_callback(release)

    def take_hold(self, slots: TurnSlots) -> TurnHold:
        """The request key's place and a server slot (429 when either is
        full; see :meth:`TurnHold.take`), held until the turn ends."""
        assert self.hold is None and not self.handed_off
        self.hold = TurnHold.take(slots)
        self._taken.callback(self.hold.release)
        return self.hold

    def start(
        self,
        nursery: trio.Nursery,
        agent: Agent,
        messages: list[Message],
        consumer: Consumer,
        options: TurnOptions | None = None,
        *,
        registry: MutableSet[Turn] | None = None,
        around: TurnAround | None = None,
    ) -> Turn:
        """Start the turn in the hold (:meth:`TurnHold.start`); from then on
        the turn gives back what was taken, and this block nothing. The
        request's log line reports the turn."""
        assert self.hold is not None and not self.handed_off
        turn = self.hold.start(
            nursery, agent, messages, consumer, options, registry=registry, around=around
        )
        self.hand_off()
        record = current_record.get()
        if record is not None:
            record.turn = turn
        return turn

    def hand_off(self) -> TurnHold:
        """The work that gives the hold back (and what else was taken) as it
        ends has it now: the first thing such work does (a relay task), or
        what :meth:`start` does once the turn is started."""
        assert self.hold is not None and not self.handed_off
        self.handed_off = True
        self._taken.pop_all()
        return self.hold
