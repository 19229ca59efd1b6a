"""The Responses SSE writer: turn events → Responses stream events in an
:class:`EventLog` → SSE bytes for every client that follows it.

A Responses stream can be resumed (``starting_after``) and outlive its first
client (``background``), so the writer does not write to one socket: it
appends each event to the response's log, and each HTTP stream — the one
that started the turn and any resumed one — is a :class:`LogFollower` that
replays the log from where its client left off and then waits for more.
Sequence numbers are log positions, so replay-then-follow can neither skip
nor repeat an event.

Like the Chat Completions writer it drains whatever events are already
waiting into one batch (consecutive text deltas become one delta event), a
follower returns everything new as one piece (one socket write, no added
delay when idle), and a silent stream gets ``: keep-alive`` comments.

Memory stays bounded by the length of one turn; while a primary reader is
attached (a stream that is not ``background``), the writer waits when that
reader falls more than ``window`` events behind, so a slow client slows the
model read as on every other stream (bounded channels: backpressure, not
memory; see docs/architecture.md).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence

import trio

from ..channels import receive_batch
from ..events import StreamEvent, coalesce
from ..wire.responses_out import ResponseBuilder, ResponseEvent
from ..wire.sse import KEEPALIVE

__all__ = ["EventLog", "LogFollower", "write_response_events"]

DEFAULT_WINDOW = 256


class EventLog:
    """Every event of one response so far, with wake-ups for followers.

    ``events[n].sequence_number == n`` always holds. Two separate wake-ups:
    followers (and the store writer) wait for the log to grow, the writer
    waits for the primary reader to catch up; neither wakes for the
    other's news, so a token costs no task a pass it does not need.
    """

    def __init__(self) -> None:
        self.events: list[ResponseEvent] = []
        self.closed = False
        self._grown = trio.Event()
        self._read = trio.Event()
        self.primary: int | None = None
        """How far the primary reader has read, while one is attached."""

    def __len__(self) -> int:
        return len(self.events)

    def _notify_grown(self) -> None:
        self._grown.set()
        self._grown = trio.Event()

    def _notify_read(self) -> None:
        self._read.set()
        self._read = trio.Event()

    def extend(self, events: Sequence[ResponseEvent]) -> None:
        if self.closed:
            raise trio.ClosedResourceError("the response's event log is closed")
        if not events:
            return
        if events[0].sequence_number != len(self.events):
            raise ValueError(
                f"event {events[0].sequence_number} appended at position {len(self.events)}"
            )
        self.events.extend(events)
        self._notify_grown()

    def close(self) -> None:
        """No more events: followers finish once they have read them all."""
        if not self.closed:
            self.closed = True
            self._notify_grown()

    async def wait_beyond(self, position: int) -> None:
        """Return once there is an event at ``position`` or the log is closed."""
        while len(self.events) <= position and not self.closed:
            await self._grown.wait()

    def attach_primary(self) -> None:
        self.primary = 0
        self._notify_read()

    def detach_primary(self) -> None:
        self.primary = None
        self._notify_read()

    def advance_primary(self, position: int) -> None:
        if self.primary is not None:
            self.primary = position
            self._notify_read()

    async def wait_for_primary(self, window: int) -> None:
        """Backpressure: wait while the primary reader is more than
        ``window`` events behind."""
        while self.primary is not None and len(self.events) - self.primary > window:
            await self._read.wait()


async def write_response_events(
    receive: trio.MemoryReceiveChannel[StreamEvent],
    builder: ResponseBuilder,
    log: EventLog,
    *,
    window: int = DEFAULT_WINDOW,
    admit: Callable[[list[ResponseEvent]], Awaitable[list[ResponseEvent]]] | None = None,
) -> None:
    """Consume one turn's events into ``log`` until the turn's channel ends.

    The log stays open: whoever runs the turn adds the ending it decides
    (an interruption, a cancel) and then closes it. Whoever runs the turn
    also starts ``builder``, so ``response.created`` needs no first token
    (``feed`` starts a builder that was not). ``admit``, if given, sees each
    batch of new events before any reader does and returns the ones to
    publish now (it may wait, and keep the rest for whoever runs the turn).
    """
    with receive:
        while (batch := await receive_batch(receive)) is not None:
            events = builder.feed_all(coalesce(batch))
            if admit is not None:
                events = await admit(events)
            log.extend(events)
            await log.wait_for_primary(window)


class LogFollower:
    """One client's view of a log: SSE bytes after sequence number ``after``.

    ``primary=True`` makes this reader the one the writer waits for, from
    its first read on: a reader that never reads (its response was never
    sent) holds nobody up.
    """

    def __init__(
        self,
        log: EventLog,
        *,
        after: int = -1,
        keepalive: float = 10.0,
        primary: bool = False,
    ) -> None:
        self.log = log
        self.position = max(after + 1, 0)
        # 0 turns keep-alives off rather than sending them in a tight loop.
        self.keepalive = keepalive if keepalive > 0 else math.inf
        self.primary = primary
        self._attached = False

    async def receive(self) -> bytes:
        """The next piece of the stream; ``trio.EndOfChannel`` at its end."""
        log = self.log
        if self.primary and not self._attached:
            self._attached = True
            log.attach_primary()
            log.advance_primary(self.position)
        with trio.move_on_after(self.keepalive):
            await log.wait_beyond(self.position)
        events = log.events
        if len(events) <= self.position:
            if log.closed:
                raise trio.EndOfChannel
            return KEEPALIVE
        batch = events[self.position :]
        self.position = len(events)
        if self.primary:
            log.advance_primary(self.position)
        return b"".join(event.frame for event in batch)

    def detach(self) -> None:
        if self.primary:
            self.primary = False
            if self._attached:
                self.log.detach_primary()
