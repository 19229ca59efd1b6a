"""Responses that run in another process sharing the store: following their
stored events, and asking their process to stop them.

A response's turn runs in the process that created it; another worker (or
another instance on the same PostgreSQL) knows it only through the store.
A resumed stream there follows the stored events, polled every
:data:`FOLLOW_POLL` seconds: a client sees each event at most that long
after its process stored it (which it does as the events come, in batches).
Stopping it is a signal to its process, then a wait until the store says it
ended.

A finished response's stream is replayed from the store the same way,
without the waiting: in pages of :data:`PAGE_EVENTS` events, one query and
one socket write each, so a reader of a long stream never holds it whole.
"""

from __future__ import annotations

import trio

from ...consumers.responses_sse import PAGE_EVENTS
from ...store import Signal, Store, StoredResponse
from ...wire.responses_out import TERMINAL_TYPES
from ...wire.sse import KEEPALIVE
from ..edge.bodies import StreamedBody

__all__ = ["FOLLOW_POLL", "StoredFollowBody", "stop_elsewhere"]

FOLLOW_POLL = 0.01
# How often a follower checks that the response still exists (a DELETE
# elsewhere leaves no ending to wait for).
_EXISTS_EVERY = 1.0


class StoredFollowBody(StreamedBody):
    """An SSE body of a stored response's events after ``after``, a page at
    a time; with ``follow`` it waits for new ones until its ending, without
    it ends with the last stored event."""

    def __init__(
        self,
        store: Store,
        response_id: str,
        owner: str,
        after: int,
        keepalive: float,
        *,
        follow: bool = True,
    ) -> None:
        super().__init__(_nothing)
        self._store = store
        self._id = response_id
        self._owner = owner
        self._after = after
        self._keepalive = keepalive
        self._follow = follow
        self._ended = False

    def close(self) -> None:
        self._ended = True

    async def __anext__(self) -> bytes:
        if self._ended:
            raise StopAsyncIteration
        quiet_since = trio.current_time()
        next_check = quiet_since + _EXISTS_EVERY
        while True:
            events = await self._store.events_after(self._id, self._after, limit=PAGE_EVENTS)
            if events:
                self._after = events[-1].sequence_number
                self._ended = any(event.type in TERMINAL_TYPES for event in events) or (
                    not self._follow and len(events) < PAGE_EVENTS
                )
                return b"".join(event.frame for event in events)
            if not self._follow:
                raise StopAsyncIteration
            now = trio.current_time()
            if self._keepalive > 0 and now - quiet_since >= self._keepalive:
                return KEEPALIVE
            if now >= next_check:
                next_check = now + _EXISTS_EVERY
                if await self._store.get(self._id, self._owner) is None:
                    raise StopAsyncIteration
            await trio.sleep(FOLLOW_POLL)


async def stop_elsewhere(
    store: Store, row: StoredResponse, kind: str, *, wait: float
) -> StoredResponse:
    """Ask the process running ``row`` to end it (``cancel_response`` or
    ``stop_response``) and wait up to ``wait`` seconds for the store to say
    it ended; returns the row as it is then."""
    if row.runner is not None:
        await store.send_signal(row.runner, Signal(kind, row.id))
    with trio.move_on_after(wait):
        while row.status == "in_progress":
            await trio.sleep(FOLLOW_POLL)
            found = await store.get(row.id, row.owner)
            if found is None:
                break
            row = found
    return row


def _nothing() -> None:
    pass
