"""The Chat Completions SSE writer: a consumer task turning turn events
into the bytes of an OpenAI ``chat.completion.chunk`` stream.

It drains every event already waiting in the channel and writes them as one
piece (one socket write, no added delay when idle), sends ``: keep-alive``
comments while the turn is silent, and reports a failure that happens before
any byte was written as a :class:`PreStreamError` so the server can still
answer with a plain JSON error and pick its status. Its terminal frame
(the finish or an error) goes out as a :class:`LastPiece`, so the response
body knows whether the stream's ending reached it or still has to be said.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import trio

from ..channels import drain_after_cancel, receive_batch
from ..events import (
    ApprovalRequested,
    ApprovalResolved,
    ContextCompacted,
    LongToolHint,
    MessageChunk,
    MessageStop,
    ReasoningChunk,
    StreamEvent,
    ToolCallChunk,
    ToolCallDelta,
    ToolCallFinished,
    ToolProgress,
    TurnFinished,
)
from ..wire.approval_events import approval_event
from ..wire.chat_out import ChatStreamFrames
from ..wire.context_events import context_event
from ..wire.sse import KEEPALIVE
from ..wire.tool_events import tool_event

__all__ = [
    "EXTENSIONS",
    "LastPiece",
    "PreStreamError",
    "SSEOptions",
    "parse_extensions",
    "write_chat_sse",
]

# Opt-in stream extensions a client can ask for with X-Hermes-Stream-Extensions.
EXTENSIONS = frozenset({"tools", "reasoning", "approvals", "context"})

# How long a cancelled writer may take to send the approvals' last word.
_CANCEL_GRACE = 1.0


@dataclass(frozen=True, slots=True)
class SSEOptions:
    keepalive: float = 10.0
    extensions: frozenset[str] = frozenset()
    # The wall clock, read only to tell a client when an approval expires
    # (Unix seconds); a parameter so a test on MockClock can fix it.
    wall_clock: Callable[[], float] = time.time


@dataclass(frozen=True, slots=True)
class PreStreamError:
    """The turn failed before anything was written: answer with JSON.

    It carries the turn's failure (``TurnFinished.error_code`` and
    ``model_status``); the server picks the HTTP status from them."""

    message: str
    code: str | None
    model_status: int | None = None


@dataclass(frozen=True, slots=True)
class LastPiece:
    """The stream's last bytes, holding its terminal frame."""

    data: bytes


WriterOutput = bytes | PreStreamError | LastPiece
"""What the writer hands the response body."""


def parse_extensions(header: str) -> frozenset[str]:
    """The stream extensions an ``X-Hermes-Stream-Extensions`` header asks
    for (comma-separated, any case); ValueError naming one not known."""
    names = frozenset(part.strip().lower() for part in header.split(",") if part.strip())
    unknown = names - EXTENSIONS
    if unknown:
        raise ValueError(
            f"unknown stream extension '{sorted(unknown)[0]}' in X-Hermes-Stream-Extensions "
            f"(known: {', '.join(sorted(EXTENSIONS))})"
        )
    return names


async def write_chat_sse(
    receive: trio.MemoryReceiveChannel[StreamEvent],
    out: trio.MemorySendChannel[WriterOutput],
    frames: ChatStreamFrames,
    options: SSEOptions = SSEOptions(),
) -> None:
    """Consume one turn's events, sending SSE bytes to ``out`` until the end.

    When the response body closes its end (the client went away) the writer
    just stops: the turn is being cancelled and nobody is left to write to.
    """
    writer = _Writer(frames, options)
    with out, receive:
        try:
            await _write(receive, out, writer, options)
        except BaseException:
            # Cancelled, maybe inside an exception group from the nursery.
            if writer.approvals:
                await _tell_cancelled(receive, out, writer)
            raise


async def _tell_cancelled(
    receive: trio.MemoryReceiveChannel[StreamEvent],
    out: trio.MemorySendChannel[WriterOutput],
    writer: _Writer,
) -> None:
    """The turn was cancelled while it may have waited on a question: the
    stream (if still open) hears ``hermes.approval.resolved`` with
    ``cancelled`` before its end."""
    rest: list[StreamEvent] = [
        e for e in await drain_after_cancel(receive) if isinstance(e, ApprovalResolved)
    ]
    piece = writer.render(rest) if rest else b""
    if not piece:
        return
    with trio.move_on_after(_CANCEL_GRACE, shield=True):
        try:
            await out.send(piece)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client is gone: nobody to tell


async def _write(
    receive: trio.MemoryReceiveChannel[StreamEvent],
    out: trio.MemorySendChannel[WriterOutput],
    writer: _Writer,
    options: SSEOptions,
) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_keep_alive, out, writer, options.keepalive, nursery.cancel_scope)
        while (batch := await receive_batch(receive)) is not None:
            piece: WriterOutput = writer.render(batch)
            if writer.ended and isinstance(piece, bytes):
                piece = LastPiece(piece)
            if piece and not await _send(out, piece, writer):
                break
            if writer.ended:
                break
        nursery.cancel_scope.cancel()


async def _send(
    out: trio.MemorySendChannel[WriterOutput],
    piece: WriterOutput,
    writer: _Writer,
) -> bool:
    """Hand ``piece`` to the response body; False once the body is gone."""
    try:
        # Waiting only when the body is behind saves a scheduler pass per
        # write; receiving the events already checkpointed.
        try:
            out.send_nowait(piece)
        except trio.WouldBlock:
            await out.send(piece)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return False
    writer.wrote()
    return True


async def _keep_alive(
    out: trio.MemorySendChannel[WriterOutput],
    writer: _Writer,
    interval: float,
    scope: trio.CancelScope,
) -> None:
    """A comment whenever nothing was written for ``interval`` seconds.

    A sleeping task instead of a timeout around every receive: the writer
    only stores a timestamp per write, which keeps the per-token path short.
    """
    while True:
        await trio.sleep_until(writer.last_write + interval)
        if trio.current_time() >= writer.last_write + interval:
            if not await _send(out, KEEPALIVE, writer):
                scope.cancel()
                return


class _Writer:
    """Event batches to bytes; all decisions, no I/O."""

    def __init__(self, frames: ChatStreamFrames, options: SSEOptions) -> None:
        self.frames = frames
        self.tools = "tools" in options.extensions
        self.reasoning = "reasoning" in options.extensions
        self.approvals = "approvals" in options.extensions
        self.context = "context" in options.extensions
        self.wall_clock = options.wall_clock
        self.emitted = False
        self.ended = False
        self.last_write = trio.current_time()
        self.any_text = False
        self.boundary = False

    def wrote(self) -> None:
        self.emitted = True
        self.last_write = trio.current_time()

    def render(self, batch: list[StreamEvent]) -> bytes | PreStreamError:
        parts: list[bytes] = []
        text: list[str] = []
        frames = self.frames

        def flush_text() -> None:
            if text:
                parts.append(frames.content("".join(text)))
                text.clear()

        for event in batch:
            if isinstance(event, MessageChunk):
                if self.boundary and self.any_text:
                    # Text after a tool step is a new paragraph of the same answer.
                    text.append("\n\n")
                self.boundary = False
                self.any_text = True
                text.append(event.text)
                continue
            flush_text()
            if isinstance(event, MessageStop):
                if not event.final:
                    self.boundary = True
            elif isinstance(event, ReasoningChunk):
                if self.reasoning:
                    parts.append(frames.reasoning(event.text))
            elif isinstance(event, ToolCallDelta):
                parts.append(
                    frames.tool_call_delta(
                        event.index, event.arguments, call_id=event.call_id, name=event.name
                    )
                )
            elif isinstance(event, ToolCallChunk | ToolCallFinished | LongToolHint | ToolProgress):
                shown = tool_event(event) if self.tools else None
                if shown is not None:
                    name, fields = shown
                    parts.append(frames.extension(name, fields))
            elif isinstance(event, ContextCompacted):
                if self.context:
                    parts.append(frames.extension(*context_event(event)))
            elif isinstance(event, ApprovalRequested | ApprovalResolved):
                if self.approvals:
                    # A wall-clock moment for the client; the event's
                    # deadline is on the turn's trio clock.
                    expires_at = (
                        self.wall_clock() + event.deadline - trio.current_time()
                        if isinstance(event, ApprovalRequested)
                        else 0.0
                    )
                    name, approval = approval_event(event, expires_at)
                    parts.append(frames.extension(name, approval))
            elif isinstance(event, TurnFinished):
                self.ended = True
                if event.finish_reason == "error":
                    if not self.emitted and not parts and not frames.started:
                        return PreStreamError(
                            event.error or "the model server failed",
                            event.error_code,
                            event.model_status,
                        )
                    parts.append(
                        frames.error(
                            event.error or "the model server failed",
                            type="server_error",
                            code=event.error_code,
                        )
                    )
                    break
                # Client calls came as ToolCallDelta events (the agent
                # announces every one); the finish adds none.
                parts.append(frames.finish(event.finish_reason, event.usage))
                break
        flush_text()
        return b"".join(parts)
