"""What the server adds to a turn (:mod:`hermes_trio.turn` runs it).

A request's turn runs in the server's long-lived nursery rather than in the
request task (``hermes_trio.turn.start_turn``), so the request handler can
wait for the first output (and still answer a failure with a JSON status)
before the response starts; the request side cancels the turn when its
client goes away.

Chat and Responses turns start the same way: each holds a :class:`TurnSlots`
slot until it has ended, and sits in the server's registry of running turns,
which a shutdown cancels with its reason, so ``max_concurrent``,
``/health``, the shutdown grace and the shutdown's last words cover both.

The slot and the request key's place (:class:`~.keys.Reservation`) travel
together as a :class:`TurnHold`: taken by the request before it starts the
work, given back by the work's end with the tokens it spent — a turn's
``on_exit``, a relay's last line — never by the HTTP reply, which a
background response or a stream whose client left outlives.
"""

from __future__ import annotations

from collections.abc import MutableSet
from dataclasses import replace
from typing import Any, Protocol

import trio

from ..agent import Agent
from ..config import ApiServerConfig
from ..turn import Consumer, TokenMeter, Turn, TurnAround, TurnOptions, start_turn
from ..wire.messages import ChatTool, Message
from .errors import APIError
from .keys import Refusal, Reservation, current_key, retry_after_header

__all__ = ["TurnHold", "TurnRequest", "TurnSlots", "turn_options"]


class TurnSlots:
    """At most ``limit`` turns at once; beyond that, 429 at once (no queue)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._semaphore = trio.Semaphore(limit)
        self._idle = trio.Event()
        self._idle.set()

    @property
    def in_use(self) -> int:
        return self.limit - self._semaphore.value

    def acquire(self) -> None:
        try:
            self._semaphore.acquire_nowait()
        except trio.WouldBlock:
            raise APIError(
                429,
                f"too many turns running at once (limit {self.limit}); retry shortly",
                code="rate_limit_exceeded",
                headers={"Retry-After": "1"},
            ) from None
        if self._idle.is_set():
            self._idle = trio.Event()

    def release(self) -> None:
        self._semaphore.release()
        if self.in_use == 0:
            self._idle.set()

    async def wait_idle(self) -> None:
        """Return once no turn is running."""
        while not self._idle.is_set():
            await self._idle.wait()


class TurnHold:
    """What one turn or relay holds until it ends: a slot of the server's
    and, for a request with a named key, a place in that key's concurrency.
    Given back once, with the tokens the work spent: by the turn's end
    (:meth:`start` makes :meth:`release` its ``on_exit``), by the relay's,
    or by the request itself when the work never started."""

    def __init__(self, slots: TurnSlots, reservation: Reservation | None) -> None:
        self.slots = slots
        self.reservation = reservation
        self.meter = TokenMeter()
        """Counts the turn's model deltas (the agent's ``meter=``)."""
        self.turn: Turn | None = None
        """The turn holding it, once started."""
        self._held = True

    @classmethod
    def take(cls, slots: TurnSlots) -> TurnHold:
        """The request key's place first (a key at its limit takes no slot
        of the server's), then a slot; 429 with ``Retry-After`` for either."""
        reservation = None
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
            reservation = got
        try:
            slots.acquire()
        except BaseException:
            if reservation is not None:
                reservation.release(trio.current_time(), 0)
            raise
        return cls(slots, reservation)

    def release(self, tokens: int = 0) -> None:
        """Give both back, charging ``tokens`` to the key; only the first
        call counts. The key's first: once ``/health`` shows the slot free,
        its budget is charged."""
        if not self._held:
            return
        self._held = False
        if self.reservation is not None:
            self.reservation.release(trio.current_time(), self.spent(tokens))
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
        options: TurnOptions,
        *,
        registry: MutableSet[Turn] | None = None,
        around: TurnAround | None = None,
    ) -> Turn:
        """Start the turn that holds this from now on (``start_turn``'s
        ``registry`` and ``around``); its end gives the hold back, charging
        what it spent."""
        self.turn = start_turn(
            nursery,
            agent,
            messages,
            consumer,
            registry=registry,
            around=around,
            on_exit=self.release,
            options=replace(options, meter=self.meter),
        )
        return self.turn


class TurnRequest(Protocol):
    """What a chat or Responses request says about how to run its turn."""

    @property
    def model(self) -> str | None: ...

    @property
    def system(self) -> str | None: ...

    @property
    def tools(self) -> list[ChatTool]: ...

    @property
    def params(self) -> dict[str, Any]: ...


def turn_options(
    agent: Agent, settings: ApiServerConfig, req: TurnRequest, request_stream: bool | None
) -> tuple[str, TurnOptions]:
    """The model name the response reports, and the options of ``req``'s
    turn (``request_stream`` as ``Agent.streams`` takes it) under the
    server's ``settings``."""
    options = TurnOptions(
        stream=agent.streams("api_server", request_stream),
        client_tools=req.tools,
        params=req.params,
        # Unless overrides are allowed, the configured model answers whatever
        # name the client sent; the response still reports that name.
        model=req.model if (settings.allow_model_override and req.model) else None,
        system=req.system,
    )
    return req.model or settings.model_name, options
