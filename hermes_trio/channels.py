"""Helpers for reading a turn's event channel.

They live apart from :mod:`hermes_trio.events` so the event vocabulary stays
sans-IO: importing the events (or the wire layer) never imports trio.
"""

from __future__ import annotations

import trio

from .events import StreamEvent

__all__ = ["receive_batch"]


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
