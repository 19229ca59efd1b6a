"""Stream events of every running response written together.

Each running response hands its new events to the store as they come (one
batch per model read: with a token every few milliseconds on dozens of
streams, thousands of batches a second). A transaction per batch cost more
CPU than the rest of the token's path. :class:`GroupedWrites` writes them in
groups instead: at most one transaction per ``interval``, holding every
batch that arrived meanwhile. A batch that arrives after a quiet spell is
written at once; under load a batch waits at most ``interval`` (plus the
write).

Every caller returns once its own batch is committed, or raises the store's
error for the group, exactly as if it had written alone. Only then does the
server show those events to anyone (durable, then visible:
``server/responses/live.py``), so under load a client gets each batch up to
``interval`` plus one write after it was made; after a quiet spell, one
write after.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import trio

from .base import StoreError
from .statements import Rows

__all__ = ["EVENT_WRITE_INTERVAL", "GroupedWrites"]

EVENT_WRITE_INTERVAL = 0.01
"""Seconds between two event writes under load."""


class _Group:
    __slots__ = ("done", "error", "rows")

    def __init__(self) -> None:
        self.rows: dict[str, Rows] = {}
        self.done = trio.Event()
        self.error: BaseException | None = None


class GroupedWrites:
    """Batches of rows by response id, written ``write(rows_by_id)`` in one
    transaction per group."""

    def __init__(
        self,
        write: Callable[[dict[str, Rows]], Awaitable[None]],
        interval: float = EVENT_WRITE_INTERVAL,
    ) -> None:
        self._write = write
        self.interval = interval
        self._open: _Group | None = None
        self._last = -math.inf

    async def add(self, response_id: str, rows: Rows) -> None:
        group = self._open
        if group is None:
            group = self._open = _Group()
            group.rows[response_id] = list(rows)
            await self._lead(group)
            if group.error is not None:
                raise group.error
            return
        group.rows.setdefault(response_id, []).extend(rows)
        # Cancellable: the group is written all the same.
        await group.done.wait()
        if group.error is not None:
            raise _again(group.error)

    async def _lead(self, group: _Group) -> None:
        """Wait out the interval, then write the group. Shielded: the other
        batches in it depend on this task, and the wait is short."""
        try:
            with trio.CancelScope(shield=True):
                await trio.sleep_until(self._last + self.interval)
                # Closed before the write: batches from here on form the
                # next group, never one already handed to the database.
                self._open = None
                self._last = trio.current_time()
                await self._write(group.rows)
        except BaseException as exc:
            group.error = exc
        finally:
            group.done.set()


def _again(exc: BaseException) -> BaseException:
    """The group's failure as this caller's own exception (one exception
    object raised in several tasks would share a traceback)."""
    if isinstance(exc, StoreError):
        return StoreError(exc.code, exc.message)
    return StoreError("store_error", f"the event write failed: {type(exc).__name__}")
