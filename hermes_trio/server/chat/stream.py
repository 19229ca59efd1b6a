"""The SSE response body of a streamed chat request: the bytes of the turn's
writer (:func:`hermes_trio.consumers.sse.write_chat_sse`), the frame that
ends a stream whose writer could not say how it ended, and the cancel of the
turn when the response ends for any reason (the client went away).
"""

from __future__ import annotations

from functools import partial

import trio

from ...consumers.sse import LastPiece, PreStreamError, WriterOutput
from ...endings import CancelCause
from ...turn import Turn
from ...wire.chat_out import ChatStreamFrames
from ..edge.bodies import StreamedBody

__all__ = ["ChatStreamBody", "untold_failure"]


def untold_failure(turn: Turn, frames: ChatStreamFrames) -> PreStreamError | None:
    """A turn that failed before its writer sent anything: still a plain
    JSON error. None when the stream must start and say how it ended."""
    end = turn.result
    if end is not None and end.finish_reason == "error" and not frames.started:
        return PreStreamError(end.error or "the turn failed", end.error_code, end.model_status)
    return None


def _untold_end(turn: Turn, frames: ChatStreamFrames) -> bytes:
    """The last frame of a stream whose writer stopped before its own last
    frame reached the body (it crashed, or was cancelled with its turn
    while that frame waited): the failure, or the interruption. The 200 is
    out, so it is always a frame; its numbering continues the writer's."""
    end = turn.result
    if end is not None and end.finish_reason == "error":
        message = end.error or "the turn failed"
        return frames.error(message, type="server_error", code=end.error_code)
    reason = turn.interrupted or (
        "the turn ended without an answer"
        if end is None or end.finish_reason == "interrupted"
        else "the stream ended before its last frames were written"
    )
    return frames.error(reason, type="interrupted", code="interrupted")


def _release(turn: Turn, out: trio.MemoryReceiveChannel[WriterOutput]) -> None:
    """Nobody reads the stream any more: stop the turn and its writer."""
    turn.cancel(CancelCause.CLIENT_GONE)
    out.close()


class ChatStreamBody(StreamedBody):
    """The SSE response body: bytes from the turn's writer, and the cancel
    of the turn when the response ends for any reason (client gone)."""

    def __init__(
        self,
        first: bytes | LastPiece | None,
        out: trio.MemoryReceiveChannel[WriterOutput],
        turn: Turn,
        frames: ChatStreamFrames,
    ) -> None:
        super().__init__(partial(_release, turn, out))
        self._pending: list[WriterOutput] = [first] if first is not None else []
        self._out = out
        self._turn = turn
        self._frames = frames
        self._told = False
        """The writer's terminal frame is in hand: the stream has its end."""

    def close(self) -> None:
        _release(self._turn, self._out)

    async def __anext__(self) -> bytes:
        items, self._pending = self._pending, []
        if not items:
            try:
                items.append(await self._out.receive())
            except (trio.EndOfChannel, trio.ClosedResourceError):
                if self._told:
                    raise StopAsyncIteration from None
                self._told = True
                await self._turn.done.wait()
                return _untold_end(self._turn, self._frames)
        # Coalesce whatever else is already waiting into the same socket write.
        while True:
            try:
                items.append(self._out.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
        parts: list[bytes] = []
        for item in items:
            if isinstance(item, LastPiece):
                self._told = True
                parts.append(item.data)
            elif isinstance(item, bytes):
                parts.append(item)
            # A PreStreamError only ever comes first, before this body exists.
        return b"".join(parts)
