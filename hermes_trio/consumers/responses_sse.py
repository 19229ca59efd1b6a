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

A stored response's log is *durable*: its events reach readers only once
the store has them (whoever writes them to the store calls
:meth:`EventLog.publish` after each commit), so a client never holds an
event that a crash could take from the store, and a stream resumed after a
restart continues exactly where its client left off. A log of a response
that is not stored shows each event as it is appended.

Memory stays bounded by the length of one turn; a follower hands out at
most ``PAGE_EVENTS`` events per read, so a reader replaying a long log from
its start does not copy it whole. While a primary reader is
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

__all__ = ["PAGE_EVENTS", "EventLog", "LogFollower", "write_response_events"]

DEFAULT_WINDOW = 256
PAGE_EVENTS = 512
"""The most events one read of a follower returns (one socket write)."""


class EventLog:
    """Every event of one response so far, with wake-ups for followers.

    ``events[n].sequence_number == n`` always holds; readers see the first
    ``visible`` of them. Three separate wake-ups: followers wait for more to
    be visible, the store writer (of a durable log) waits for the log to
    grow, the writer waits for the primary reader to catch up; none wakes
    for another's news, so a token costs no task a pass it does not need.
    """

    def __init__(self, *, durable: bool = False) -> None:
        self.events: list[ResponseEvent] = []
        self.durable = durable
        """Events become visible through :meth:`publish` only (once stored)."""
        self.visible = 0
        """How many events readers may see."""
        self.closed = False
        self._grown = trio.Event()
        self._shown = trio.Event()
        self._read = trio.Event()
        self.primary: int | None = None
        """How far the primary reader has read, while one is attached."""

    def __len__(self) -> int:
        return len(self.events)

    def _notify_grown(self) -> None:
        self._grown.set()
        self._grown = trio.Event()

    def _notify_shown(self) -> None:
        self._shown.set()
        self._shown = trio.Event()

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
        if self.durable:
            self._notify_grown()
        else:
            self.publish(len(self.events))

    def publish(self, upto: int) -> None:
        """The events before position ``upto`` may reach readers (for a
        durable log: the store has them)."""
        upto = min(upto, len(self.events))
        if upto > self.visible:
            self.visible = upto
            self._notify_shown()

    def truncate(self, length: int) -> None:
        """Forget the events from position ``length`` on; none of them may
        have been visible (the store refused them: nobody will see them)."""
        if length < self.visible:
            raise ValueError(f"event {length} was visible already")
        del self.events[length:]

    def close(self) -> None:
        """No more events: every event in the log is visible now (whoever
        closes it has stored them or decided they may be seen), and
        followers finish once they have read them all."""
        if not self.closed:
            self.closed = True
            self.visible = len(self.events)
            self._notify_shown()
            self._notify_grown()

    async def wait_beyond(self, position: int) -> None:
        """Return once the event at ``position`` is visible or the log is
        closed."""
        while self.visible <= position and not self.closed:
            await self._shown.wait()

    async def wait_grown(self, position: int) -> None:
        """Return once there is an event at ``position``, visible or not,
        or the log is closed (the store writer's wait)."""
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
        ``window`` events behind (of a durable log, the store's lag counts
        too: the reader cannot read what is not stored yet)."""
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
        if log.visible <= self.position:
            if log.closed:
                raise trio.EndOfChannel
            return KEEPALIVE
        end = min(log.visible, self.position + PAGE_EVENTS)
        batch = log.events[self.position : end]
        self.position = end
        if self.primary:
            log.advance_primary(self.position)
        return b"".join(event.frame for event in batch)

    def detach(self) -> None:
        if self.primary:
            self.primary = False
            if self._attached:
                self.log.detach_primary()
