"""Time-to-first-token and silence limits for one streamed answer.

Re-arming a cancel scope's deadline on every chunk costs more than the rest
of the per-token work, so a sleeping watchdog task checks a timestamp the
reader updates instead; it wakes about once per limit, not per chunk.
"""

from __future__ import annotations

import trio

__all__ = ["StreamWatchdog"]


class StreamWatchdog:
    """Cancels ``scope`` when the stream is silent for too long.

    The reader calls :meth:`beat` after each chunk it has handled. While
    ``busy`` is set the consumer is applying backpressure, which is not
    silence of the model.
    """

    __slots__ = ("busy", "first_token", "idle", "last", "scope", "seen", "start")

    def __init__(self, scope: trio.CancelScope, *, first_token: float, idle: float) -> None:
        self.scope = scope
        self.first_token = first_token
        self.idle = idle
        self.start = trio.current_time()
        self.last = self.start
        self.seen = False
        self.busy = False

    def beat(self) -> float:
        """Note progress; returns the time, for the caller's own use."""
        self.seen = True
        self.last = now = trio.current_time()
        return now

    def _limit(self) -> float:
        return self.last + self.idle if self.seen else self.start + self.first_token

    async def run(self) -> None:
        while True:
            limit = self._limit()
            await trio.sleep_until(limit)
            if self.busy:
                self.last = trio.current_time()
                continue
            if trio.current_time() >= self._limit():
                self.scope.cancel()
                return
