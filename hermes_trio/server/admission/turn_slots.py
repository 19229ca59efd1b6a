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

A turn's slot and the request key's place (:class:`~.keys.Reservation`)
are held by its :class:`~.turn_place.TurnPlace`, from the request's
admission to the work's end.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Protocol

import trio
from hypercorn.typing import WWWScope

from ... import metrics
from ...agent import Agent
from ...config import ApiServerConfig
from ...listener.admission import AdaptiveLimit, FixedLimit, Refused, TurnLimit
from ...listener.door import DoorRefusal, Knock
from ...turn import TurnOptions
from ...wire.messages import ChatTool
from ..parsing.errors import APIError

__all__ = ["TurnRequest", "TurnSlots", "turn_limit", "turn_options"]

log = logging.getLogger("hermes_trio.server")


TURN_PATHS = frozenset({"/v1/chat/completions", "/v1/responses"})
"""Where a POST starts a turn (or a plain model relay): refused in front
of the app when there is no room (:meth:`TurnSlots.shed`)."""
_TURN_TARGETS = frozenset(path.encode() for path in TURN_PATHS)
_NOT_AT_DOOR = frozenset({b"x-session-id", b"origin"})
"""Requests the door leaves to the app: a session's may stop its running
turn and take that slot; a browser's refusal needs the CORS headers only
the app's gate gives."""
# Seconds between two log lines about refusals at the door.
_WARN_EVERY = 10.0


class _Entry:
    """A request let in by :meth:`TurnSlots.shed`: on its way to a slot
    from when its body has arrived (a slow upload holds no place) until it
    takes the slot or ends."""

    __slots__ = ("_counted", "_slots", "admitted", "at_door")

    def __init__(self, slots: TurnSlots, *, at_door: bool = False) -> None:
        self._slots: TurnSlots | None = slots
        self._counted = False
        self.admitted = False
        """It was found room once its body had arrived (:meth:`refused`):
        its route takes the slot without asking again, so that the ones
        that arrived after it cannot crowd it out."""
        self.at_door = at_door
        """Let in by :meth:`TurnSlots.knock` with its body: counted and
        admitted from the start."""
        if at_door:
            self.arrived()
            self.admitted = True

    def arrived(self) -> None:
        if self._slots is not None and not self._counted:
            self._counted = True
            self._slots.entering += 1

    def refused(self, scope: WWWScope) -> APIError | None:
        """Once its body has arrived: its refusal if the requests let in
        with it (a burst's, counted as their bodies arrived) have filled
        the room meanwhile. Answered in front of the app, this costs the
        core far less than the same refusal from the route."""
        if self._slots is None or self.admitted:
            return None
        refused = self._slots.refusal(scope["path"], counted=1 if self._counted else 0)
        self.admitted = refused is None and self._counted
        return refused

    @property
    def holding(self) -> bool:
        """It still holds its place (not left yet)."""
        return self._slots is not None

    def leave(self) -> None:
        if self._slots is not None and self._counted:
            self._slots.entering -= 1
        self._slots = None
        self.admitted = False  # a second acquire in this context asks again


_ENTRY: ContextVar[_Entry | None] = ContextVar("hermes_turn_entry", default=None)


class TurnSlots:
    """At most ``limits.limit`` turns at once (fixed, or following the
    event loop's lag: :mod:`hermes_trio.listener.admission`); beyond that,
    an answer at once (no queue): 429 at the limit, 503 while the server
    is behind, both with ``Retry-After``."""

    def __init__(self, limits: int | TurnLimit) -> None:
        self.limits: TurnLimit = FixedLimit(limits) if isinstance(limits, int) else limits
        self.in_use = 0
        self.entering = 0
        """Requests let in by :meth:`knock` or :meth:`shed` that have not
        taken their slot yet."""
        self._idle = trio.Event()
        self._idle.set()
        self.gate: Callable[[Knock], bool] | None = None
        """Whether the app's gate lets a request through (``Front.lets_through``):
        the door judges only those, so that one the gate refuses gets the
        gate's answer, not a 429 that tells it to retry."""
        self._door_refused: Counter[str] = Counter()
        """Refusals at the door since the last log line about them, by code."""
        self._door_told_at = -math.inf

    @property
    def limit(self) -> int:
        return self.limits.limit

    def refusal(self, path: str | None = None, *, counted: int = 0) -> APIError | None:
        """The answer for one more turn now, if it would be refused: the
        turns running and the requests let in on their way to theirs
        count (a burst is let in before any of it has taken a slot), less
        ``counted``, the asking request's own place. ``path``: a refusal
        in front of the app, counted as the app counts its own answers."""
        running = self.in_use + self.entering - counted
        refused = self.limits.admit(trio.current_time(), running)
        if refused is None:
            return None
        metrics.ADMISSION_REFUSED.labels(refused.reason).inc()
        answer = _refusal(refused)
        if path is not None:
            metrics.REQUESTS.labels(path, str(answer.status)).inc()
            if answer.status == 429:
                metrics.RATE_LIMITED.labels(answer.code or "rate_limited").inc()
        return answer

    def knock(self, request: Knock) -> DoorRefusal | _Entry | None:
        """For a request at the listener's door (``serve_hypercorn(door=…)``),
        before the app is started for it: a turn request that came whole
        is refused there if there is no room (a refusal costs next to
        nothing there, where a burst's hundreds of refusals compete with
        the streams admitted), or let in holding its place from now on.
        Any other request, and one that is still uploading, a session's or
        a browser's, is left to :meth:`shed` in front of the app."""
        _ENTRY.set(None)  # this request's own answer, not an earlier one's
        if not self._judges(request):
            return None
        refused = self._refuse_now(request)
        if refused is not None:
            return refused
        entry = _Entry(self, at_door=True)
        _ENTRY.set(entry)
        return entry

    def _judges(self, request: Knock) -> bool:
        if request.method != b"POST" or request.path not in _TURN_TARGETS:
            return False
        if not request.body_here or any(name in _NOT_AT_DOOR for name, _ in request.headers):
            return False
        return self.gate is None or self.gate(request)

    def room(self) -> int:
        """Turn requests that would be let in now (the listener holds new
        connections unread while there is none)."""
        return self.limits.room(trio.current_time(), self.in_use + self.entering)

    def turn_away(self, request: Knock, ahead: int = 0) -> DoorRefusal | None:
        """The door's refusal of ``request`` now, with ``ahead`` requests
        let through before it not yet judged (each may take a place),
        counted; None if it would let it in or leave it to the app
        (nothing is taken)."""
        return self._refuse_now(request, ahead) if self._judges(request) else None

    def _refuse_now(self, request: Knock, ahead: int = 0) -> DoorRefusal | None:
        refused = self.refusal(request.path.decode("latin-1"), counted=-ahead)
        if refused is None:
            return None
        self._refused_at_door(refused)
        return DoorRefusal(
            refused.status, refused.message, refused.code or "", tuple(refused.headers.items())
        )

    def _refused_at_door(self, refused: APIError) -> None:
        # No request log line is written for these (the app never sees
        # them): the first says so at once, the rest are counted and the
        # count told every so often (:meth:`_tell_door_count`).
        now = trio.current_time()
        if now - self._door_told_at >= _WARN_EVERY and not self._door_refused:
            log.warning(
                "refusing turn requests at the door (%s, limit %d), without a request-log "
                "line each; their count follows every %g s while it lasts",
                refused.code,
                self.limit,
                _WARN_EVERY,
            )
            self._door_told_at = now
        else:
            self._door_refused[refused.code or ""] += 1

    def _tell_door_count(self, now: float) -> None:
        if self._door_refused and now - self._door_told_at >= _WARN_EVERY:
            counts = ", ".join(f"{code} {n}" for code, n in sorted(self._door_refused.items()))
            log.warning(
                "turn requests refused at the door in the last %.0f s: %s (limit %d)",
                now - self._door_told_at,
                counts,
                self.limit,
            )
            self._door_refused.clear()
            self._door_told_at = now

    def shed(self, scope: WWWScope) -> APIError | _Entry | None:
        """For a request that starts a turn or a relay, in front of the app
        (``Front(shed=…)``), before its body is read: its refusal, or, let
        in, its place on the way (counted once its body has arrived, until
        it takes its slot or ends). None for any other request, and for a
        session's, which may stop the session's running turn and take its
        slot."""
        if scope.get("method") != "POST" or scope["path"] not in TURN_PATHS:
            return None
        door = _ENTRY.get()
        if door is not None and door.at_door and door.holding:
            return door  # let in at the listener's door already
        if any(name == b"x-session-id" for name, _ in scope["headers"]):
            return None
        refused = self.refusal(scope["path"])
        if refused is not None:
            return refused
        entry = _Entry(self)
        _ENTRY.set(entry)
        return entry

    def acquire(self) -> None:
        entry = _ENTRY.get()
        admitted = entry is not None and entry.admitted
        if entry is not None:
            entry.leave()  # its own place on the way is the slot it takes now
        refused = None if admitted else self.refusal()
        if refused is not None:
            raise refused
        self.in_use += 1
        if self._idle.is_set():
            self._idle = trio.Event()

    def release(self) -> None:
        self.in_use -= 1
        if self.in_use == 0:
            self._idle.set()

    async def wait_idle(self) -> None:
        """Return once no turn is running."""
        while not self._idle.is_set():
            await self._idle.wait()

    async def watch_lag(self) -> None:
        """Measure the event loop's lag for an adaptive limit, for ever
        (a task of the server's), and tell the count of refusals at the
        door every so often."""
        limits = self.limits
        if not isinstance(limits, AdaptiveLimit):
            while True:
                await trio.sleep(_WARN_EVERY)
                self._tell_door_count(trio.current_time())
        while True:
            deadline = trio.current_time() + limits.tick
            await trio.sleep_until(deadline)
            now = trio.current_time()
            self._tell_door_count(now)
            before = limits.limit
            # The ones let in on their way count: in a burst most are.
            limits.loop_tick(now, now - deadline, self.in_use + self.entering)
            if limits.limit != before:  # most ticks change nothing
                metrics.ADMISSION_LIMIT.set(limits.limit)


AUTO_START = 160
"""Where ``auto`` starts: the turns a fresh process admits before its lag
has said anything. A burst arrives faster than the lag can be measured, so
it meets this number; a core holds about this many streams of 20 tokens a
second with room to spare (bench/paced.py)."""


FLOOR = 4
"""The least ``auto`` drops to (fewer when the server serves fewer
connections)."""


def turn_limit(settings: ApiServerConfig) -> TurnLimit:
    """The limit ``max_concurrent`` asks for: that number, or for ``auto``
    one that follows the lag, up to a turn per connection served."""
    if settings.max_concurrent == "auto":
        ceiling = settings.max_connections
        return AdaptiveLimit(ceiling, floor=min(FLOOR, ceiling), start=AUTO_START)
    return FixedLimit(settings.max_concurrent)


def _refusal(refused: Refused) -> APIError:
    headers = {"Retry-After": str(refused.retry_after)}
    if refused.reason == "lag":
        return APIError(
            503,
            "the server is overloaded (it is not keeping up with the turns running); retry shortly",
            code="server_overloaded",
            headers=headers,
        )
    return APIError(
        429,
        f"too many turns running at once (limit {refused.limit}); retry shortly",
        code="rate_limit_exceeded",
        headers=headers,
    )


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
