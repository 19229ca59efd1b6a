"""A turn's place, from its request's admission to its work's end: one
owner, given back exactly once.

A request takes things for its turn one by one — a session's conversation
claim (:meth:`TurnPlace.on_release`), then the key's place and a server
slot (:meth:`TurnPlace.take`) — and any step after the first may fail or
be cancelled (a 429, a store that refuses, a client gone). Leaving the
``async with`` block before the work started gives all of it back, last
taken first. :meth:`TurnPlace.start` (a turn) or :meth:`TurnPlace.hand_off`
(a relay task) makes the work the owner instead: it gives back the slot and
the key's place as it ends, charging the tokens it spent — never the HTTP
reply, which a background response or a stream whose client left outlives
— and its ``around`` whatever else it holds. So each path releases once,
by one owner.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableSet
from contextlib import AsyncExitStack
from dataclasses import replace
from types import TracebackType

import trio

from ...agent import Agent
from ...turn import Consumer, TokenMeter, Turn, TurnAround, TurnOptions, start_turn
from ...wire.messages import Message
from ..edge.request_log import current_record
from ..parsing.errors import APIError
from .keys import Refusal, Reservation, current_key, retry_after_header
from .turn_slots import TurnSlots

__all__ = ["TurnPlace"]


class TurnPlace:
    """``async with TurnPlace() as place:`` take what the turn needs
    (:meth:`on_release`, :meth:`take`), then :meth:`start` it (or
    :meth:`hand_off` to the task that does the work). Leaving the block
    before that releases everything taken."""

    def __init__(self) -> None:
        self._taken = AsyncExitStack()
        self.slots: TurnSlots | None = None
        """The server's slots, one of which this holds once taken."""
        self.reservation: Reservation | None = None
        """The request key's place, for a request with a named key."""
        self.meter = TokenMeter()
        """Counts the turn's model deltas (the agent's ``meter=``)."""
        self.turn: Turn | None = None
        """The turn holding it, once started."""
        self.handed_off = False
        """True once the work owns what was taken."""
        self._held = False

    async def __aenter__(self) -> TurnPlace:
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
        gives back, by awaiting ``release()``, if the work never starts."""
        self._taken.push_async_callback(release)

    def take(self, slots: TurnSlots) -> TurnPlace:
        """The request key's place first (a key at its limit takes no slot
        of the server's), then a slot; 429 with ``Retry-After`` for either.
        Held until the work ends (or the block, if it never starts)."""
        assert self.slots is None and not self.handed_off
        given = current_key.get()
        if given is not None:
            ring, key = given
            got = ring.reserve(key)
            if isinstance(got, Refusal):
                raise APIError(
                    429,
                    got.message,
                    code=got.code,
                    headers={"Retry-After": retry_after_header(got.retry_after)},
                )
            self.reservation = got
        try:
            slots.acquire()
        except BaseException:
            if self.reservation is not None:
                self.reservation.release(trio.current_time(), 0)
                self.reservation = None
            raise
        self.slots = slots
        self._held = True
        self._taken.callback(self.release)
        return self

    def release(self, tokens: int = 0) -> None:
        """Give back the slot and the key's place, charging ``tokens`` to
        the key; only the first call counts. The key's first: once
        ``/health`` shows the slot free, its budget is charged."""
        if not self._held:
            return
        self._held = False
        if self.reservation is not None:
            self.reservation.release(trio.current_time(), self.spent(tokens))
        assert self.slots is not None
        self.slots.release()

    def spent(self, tokens: int = 0) -> int:
        """What the work cost: ``tokens``, or what its turn's result and
        meter say, whichever is more."""
        result = self.turn.result if self.turn is not None else None
        counted = self.meter.spent(result.usage if result is not None else None)
        return max(tokens, counted)

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
        """Start the turn that owns this place from now on (``start_turn``'s
        ``registry`` and ``around``): its end gives the place back, charging
        what it spent, and this block nothing. The request's log line
        reports the turn."""
        assert self._held and not self.handed_off
        self.turn = start_turn(
            nursery,
            agent,
            messages,
            consumer,
            registry=registry,
            around=around,
            on_exit=self.release,
            options=replace(options or TurnOptions(), meter=self.meter),
        )
        self.hand_off()
        record = current_record.get()
        if record is not None:
            record.turn = self.turn
        return self.turn

    def hand_off(self) -> TurnPlace:
        """The work that gives the place back (:meth:`release`) as it ends
        has it now: the first thing such work does (a relay task), or what
        :meth:`start` does once the turn is started."""
        assert self._held and not self.handed_off
        self.handed_off = True
        self._taken.pop_all()
        return self
