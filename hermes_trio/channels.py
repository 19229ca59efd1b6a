"""Helpers for reading a turn's event channel.

They live apart from :mod:`hermes_trio.events` so the event vocabulary stays
sans-IO: importing the events (or the wire layer) never imports trio.
"""

from __future__ import annotations

import trio

from .events import StreamEvent

__all__ = ["DRAIN_GRACE", "drain_after_cancel", "receive_batch"]

DRAIN_GRACE = 1.0
"""Seconds a cancelled consumer waits for the last events of its turn."""


async def receive_batch(
    receive: trio.MemoryReceiveChannel[StreamEvent],
) -> list[StreamEvent] | None:
    """Wait for one event, then take every one already waiting behind it, so
    a consumer that fell behind catches up in one step; None once the channel
    has ended."""
    try:
        batch = [await receive.receive()]
    except trio.EndOfChannel:
        return None
    while True:
        try:
            batch.append(receive.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            # An end seen here shows up again on the next call.
            return batch


async def drain_after_cancel(
    receive: trio.MemoryReceiveChannel[StreamEvent], grace: float = DRAIN_GRACE
) -> list[StreamEvent]:
    """The events a cancelled turn still sends on its way out, for a
    consumer that was cancelled with it: everything up to the end of the
    channel, waited for at most ``grace`` seconds in a shielded scope.

    A turn's cleanups send what a person was shown must be updated about
    (``ApprovalResolved(outcome="cancelled")`` for a question left
    unanswered) before the agent closes its side; call this from the
    consumer's ``except trio.Cancelled`` (then re-raise).
    """
    events: list[StreamEvent] = []
    with trio.move_on_after(grace, shield=True):
        try:
            while True:
                events.append(await receive.receive())
        except (trio.EndOfChannel, trio.ClosedResourceError):
            pass
    return events
