"""Time limits for one streamed answer: to its first token, between two
tokens, and for the whole answer.

Re-arming a cancel scope's deadline on every chunk costs more than the rest
of the per-token work, so a sleeping watchdog task checks a timestamp the
reader updates instead; it wakes about once per limit, not per chunk.
"""

from __future__ import annotations

from typing import Literal

import trio

__all__ = ["Expiry", "StreamWatchdog"]

#: Which limit ran out: the time to the first token, a silence in the middle
#: of the answer, or the whole answer's time.
Expiry = Literal["first_token", "idle", "total"]


class StreamWatchdog:
    """Cancels ``scope`` when the stream is silent, or takes, too long.

    Until the first :meth:`beat` the limit is ``start + first_token``; from
    then on ``last beat + idle``. The first beat can bring the limit forward
    (the idle limit is usually the shorter one), so the watchdog waits for
    it rather than sleeping through to the first-token limit. Whatever the
    stream does, it ends by ``start + total``.

    The reader calls :meth:`beat` after each chunk that carried some of the
    answer (headers, a role-only chunk or empty chunks are no answer). While
    ``busy`` is set the consumer is applying backpressure, and while
    ``paused`` is set the reader bounds the silence itself (the answer said
    it finished): neither is silence of the model, but neither stops the
    total limit. After :meth:`finish` the answer is complete and nothing is
    cancelled any more. ``expired`` says which limit cancelled the scope.
    """

    __slots__ = (
        "_first",
        "busy",
        "deadline",
        "expired",
        "finished",
        "first_token",
        "idle",
        "last",
        "paused",
        "scope",
        "start",
    )

    def __init__(
        self, scope: trio.CancelScope, *, first_token: float, idle: float, total: float
    ) -> None:
        self.scope = scope
        self.first_token = first_token
        self.idle = idle
        self.start = trio.current_time()
        self.deadline = self.start + total
        self.last = self.start
        self.busy = False
        self.paused = False
        self.finished = False
        self.expired: Expiry | None = None
        # Set at the first beat, then dropped: None means a token was seen.
        self._first: trio.Event | None = trio.Event()

    @property
    def seen(self) -> bool:
        """Whether any of the answer has arrived."""
        return self._first is None

    def beat(self) -> float:
        """Note progress; returns the time, for the caller's own use."""
        if self._first is not None:
            self._first.set()
            self._first = None
        self.last = now = trio.current_time()
        return now

    def finish(self) -> None:
        """The answer is complete: what is left to read is not bound by the limits."""
        self.finished = True

    def _expire(self, which: Expiry) -> None:
        self.expired = which
        self.scope.cancel()

    async def run(self) -> None:
        while True:
            first = self._first
            if first is not None:
                with trio.move_on_at(min(self.start + self.first_token, self.deadline)):
                    await first.wait()
                    continue  # the idle limit applies from the first token on
            else:
                await trio.sleep_until(min(self.last + self.idle, self.deadline))
            if self.finished:
                return
            now = trio.current_time()
            if now >= self.deadline:
                self._expire("total")
                return
            if self.busy or self.paused:
                self.last = now
                continue
            if self._first is not None:
                self._expire("first_token")
                return
            if now >= self.last + self.idle:
                self._expire("idle")
                return
