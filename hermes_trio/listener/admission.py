"""Whether the server takes one more turn: a fixed number
(``api_server.max_concurrent: 8``) or a limit that follows how well the
server keeps up (``max_concurrent: auto``). Pure: the trio shell
(:mod:`hermes_trio.server.admission.turn_slots`) passes the clock's time and the turns
running, and a task of the server's reports its event loop's lag.

Why the event loop's lag: a turn's stream costs the server CPU on every
token, and one core runs every stream of a process. Past what the core
holds nothing fails; every stream slows together (its first token waits
behind every other request's set-up, its tokens behind every other
stream's). The lag — how late a timer that should have fired fires — is
that slowing itself, the server's own part of it only: a slow model server
makes time to first token long without making the loop late, and a lower
limit would not help it.

The limit moves like TCP's window (AIMD): after an ``interval`` in which
every tick kept up (half the target) and the limit refused someone, it
grows by an eighth (at least 1); when a tick comes late, it drops to three quarters of the
turns running (or of the limit, if lower), at most once per ``interval``
(unless next to nothing runs: then the turns are not what made it late).
Between ticks, a request that finds the last tick overdue by more than
``lag_target`` is refused at once: a burst of requests arrives faster than
ticks, and each one admitted then would wait behind the rest.

Lateness that a burst of turns explains is not held against the limit:
setting a turn up (its request read and parsed, the model asked) costs
the loop a few milliseconds once, so a burst let in at once makes the
loop late while it is set up, and the lateness ends with it. Each turn
more than at the tick before excuses ``setup`` seconds of lateness for an
``interval`` or two, in the cut and in the refusals between ticks, once (a
late tick uses up what it is excused). Turns that only replace turns
that ended excuse nothing, however many: their set-up is part of what
the server's steady work costs, and a limit that excused it would never
drop under turnover. Growth is judged on the lag as measured, excuse or
not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["AdaptiveLimit", "FixedLimit", "Refused", "TurnLimit"]

RefusalReason = Literal["limit", "lag"]


@dataclass(frozen=True)
class Refused:
    """Why a turn was not admitted."""

    reason: RefusalReason
    """``limit``: the turns running reached the limit (429); ``lag``: the
    event loop is behind (503)."""
    limit: int
    """The limit when it refused."""
    retry_after: int = 1
    """Seconds a client should wait before trying again."""


class FixedLimit:
    """At most ``limit`` turns at once, whatever the load."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def admit(self, now: float, in_use: int) -> Refused | None:
        return Refused("limit", self.limit) if in_use >= self.limit else None

    def room(self, now: float, in_use: int) -> int:
        """How many more :meth:`admit` would let in now (no side effects)."""
        return self.limit - in_use


class AdaptiveLimit:
    """A limit that follows the event loop's lag (see the module's notes).

    ``ceiling``: the most it grows to (the connections a process serves);
    ``floor``: the least it drops to; ``start``: where it starts (default:
    ``ceiling``, so that a fresh server is limited by its lag alone until
    the lag says where the limit is); ``tick``: how often the lag is
    measured; ``lag_target``: the lag above which the server is behind;
    ``setup``: the lateness one turn added excuses (about three times
    what a turn's set-up costs a core, bench/request_cost.py).
    """

    def __init__(
        self,
        ceiling: int,
        *,
        floor: int = 4,
        start: int | None = None,
        tick: float = 0.05,
        lag_target: float = 0.1,
        interval: float = 0.5,
        backoff: float = 0.75,
        setup: float = 0.01,
    ) -> None:
        if not 1 <= floor <= ceiling:
            raise ValueError(f"expected 1 <= floor <= ceiling, got {floor} and {ceiling}")
        self.ceiling = ceiling
        self.floor = floor
        self.limit = min(ceiling, max(floor, ceiling if start is None else start))
        self.tick = tick
        self.lag_target = lag_target
        self.interval = interval
        self.backoff = backoff
        self.setup = setup
        self.last_tick: float | None = None
        self.last_lag = 0.0
        self._changed_at = float("-inf")
        self._window_start: float | None = None
        self._worst = 0.0
        """The worst lag of the ticks since ``_window_start``."""
        self._binding = False
        """Whether the limit refused someone since it last changed: only
        then is there a reason to raise it."""
        self._excuse = 0.0
        """Lateness still excused by the turns added since ``_excuse_since``."""
        self._excuse_before = 0.0
        """The same, of the turns added in the ``interval`` before that."""
        self._excuse_since = 0.0
        self._seen = 0
        """The turns in use at the last tick."""

    def excused(self, in_use: int) -> float:
        """The lateness the turns added lately still explain (their set-up):
        ``setup`` a turn more than at the tick before (``in_use`` now), less
        what late ticks have used of it."""
        added = max(0, in_use - self._seen)
        return self._excuse + self._excuse_before + added * self.setup

    def _use_excuse(self, lag: float) -> float:
        """``lag`` less what the excuse covers; the excuse is used up so."""
        used = min(lag, self._excuse_before)
        self._excuse_before -= used
        more = min(lag - used, self._excuse)
        self._excuse -= more
        return lag - used - more

    def behind(self, now: float) -> float:
        """How far past its time the next tick is, as ``now`` shows it
        (0 before the first tick)."""
        if self.last_tick is None:
            return 0.0
        return max(0.0, now - self.last_tick - self.tick)

    def room(self, now: float, in_use: int) -> int:
        """How many more :meth:`admit` would let in now (no side effects):
        none while the loop is behind."""
        if self.behind(now) - self.excused(in_use) > self.lag_target:
            return 0
        return self.limit - in_use

    def admit(self, now: float, in_use: int) -> Refused | None:
        if self.behind(now) - self.excused(in_use) > self.lag_target:
            return Refused("lag", self.limit)
        if in_use >= self.limit:
            self._binding = True
            return Refused("limit", self.limit)
        return None

    def loop_tick(self, now: float, lag: float, in_use: int) -> None:
        """A tick of the lag watch, ``lag`` seconds after its time, with
        ``in_use`` turns running."""
        first = self.last_tick is None
        self.last_tick = now
        self.last_lag = lag
        if self._window_start is None:
            self._window_start = now
        if now - self._excuse_since >= self.interval:
            self._excuse_before, self._excuse = self._excuse, 0.0
            self._excuse_since = now
        if not first:  # at the first, nothing is known of before
            self._excuse += max(0, in_use - self._seen) * self.setup
        self._seen = in_use
        self._worst = max(self._worst, lag)
        lag = self._use_excuse(lag)
        if lag > self.lag_target:
            if in_use <= self.floor:
                return  # a late tick with next to nothing running: not the turns' doing
            if now - self._changed_at >= self.interval:
                lower = max(self.floor, int(min(self.limit, in_use) * self.backoff))
                if lower < self.limit:
                    self._change(now, lower)
            return
        if now - self._window_start < self.interval:
            return
        # A whole interval seen: up only if every tick of it kept up.
        keeping_up = self._worst <= self.lag_target / 2
        if self._binding and keeping_up and self.limit < self.ceiling:
            if now - self._changed_at >= self.interval:
                self._change(now, min(self.ceiling, self.limit + max(1, self.limit // 8)))
        self._window_start = now
        self._worst = 0.0

    def _change(self, now: float, limit: int) -> None:
        self.limit = limit
        self._changed_at = now
        self._binding = False


TurnLimit = FixedLimit | AdaptiveLimit
