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

    Until the first :meth:`beat` the limit is ``start + first_token``; from
    then on ``last beat + idle``. The first beat can bring the limit forward
    (the idle limit is usually the shorter one), so the watchdog waits for
    it rather than sleeping through to the first-token limit.

    The reader calls :meth:`beat` after each chunk that carried some of the
    answer (headers, a role-only chunk or empty chunks are no answer). While
    ``busy`` is set the consumer is applying backpressure, which is not
    silence of the model. After :meth:`finish` the answer is complete and
    nothing is cancelled any more.
    """

    __slots__ = (
        "_first",
        "busy",
        "finished",
        "first_token",
        "idle",
        "last",
        "scope",
        "seen",
        "start",
    )

    def __init__(self, scope: trio.CancelScope, *, first_token: float, idle: float) -> None:
        self.scope = scope
        self.first_token = first_token
        self.idle = idle
        self.start = trio.current_time()
        self.last = self.start
        self.seen = False
        self.busy = False
        self.finished = False
        self._first = trio.Event()

    def beat(self) -> float:
        """Note progress; returns the time, for the caller's own use."""
        if not self.seen:
            self.seen = True
            self._first.set()
        self.last = now = trio.current_time()
        return now

    def finish(self) -> None:
        """The answer is complete: what is left to read is not bound by the limits."""
        self.finished = True

    def _limit(self) -> float:
        return self.last + self.idle if self.seen else self.start + self.first_token

    async def run(self) -> None:
        while True:
            limit = self._limit()
            if self.seen:
                await trio.sleep_until(limit)
            else:
                with trio.move_on_at(limit):
                    await self._first.wait()
                    continue  # the idle limit applies from the first token on
            if self.finished:
                return
            if self.busy:
                self.last = trio.current_time()
                continue
            if trio.current_time() >= self._limit():
                self.scope.cancel()
                return
