"""The opt-in ``hermes.tool.*`` events: what the agent's own tool calls look
like on the wire, the same on the chat and the Responses streams.

Each event's fields are a TypedDict here; the stream adds its ``type``
(and, on the Responses stream, its ``sequence_number``)."""

from __future__ import annotations

from typing import TypedDict

from ..events import LongToolHint, StreamEvent, ToolCallChunk, ToolCallFinished, ToolProgress

__all__ = [
    "ToolEventFields",
    "ToolFinishedFields",
    "ToolProgressFields",
    "ToolRunningFields",
    "ToolStartedFields",
    "tool_event",
]


class ToolStartedFields(TypedDict):
    """``hermes.tool.started``."""

    tool: str
    preview: str
    index: int
    call_id: str


class ToolFinishedFields(TypedDict):
    """``hermes.tool.finished``; ``duration`` in seconds."""

    tool: str
    index: int
    call_id: str
    ok: bool
    duration: float


class ToolRunningFields(TypedDict):
    """``hermes.tool.running``: a tool that has run ``duration`` seconds."""

    tool: str
    duration: float


class ToolProgressFields(TypedDict):
    """``hermes.tool.progress``."""

    tool: str
    index: int
    progress: float
    total: float | None
    message: str


ToolEventFields = ToolStartedFields | ToolFinishedFields | ToolRunningFields | ToolProgressFields


def tool_event(event: StreamEvent) -> tuple[str, ToolEventFields] | None:
    """``(type, fields)`` of the tool event ``event`` becomes, or None when
    it is not about one of the agent's tools."""
    if isinstance(event, ToolCallChunk):
        started: ToolStartedFields = {
            "tool": event.tool_name,
            "preview": event.preview,
            "index": event.index,
            "call_id": event.call_id,
        }
        return "hermes.tool.started", started
    if isinstance(event, ToolCallFinished):
        finished: ToolFinishedFields = {
            "tool": event.tool_name,
            "index": event.index,
            "call_id": event.call_id,
            "ok": event.ok,
            "duration": round(event.duration, 3),
        }
        return "hermes.tool.finished", finished
    if isinstance(event, LongToolHint):
        running: ToolRunningFields = {
            "tool": event.tool_name,
            "duration": round(event.duration, 3),
        }
        return "hermes.tool.running", running
    if isinstance(event, ToolProgress):
        progress: ToolProgressFields = {
            "tool": event.tool_name,
            "index": event.index,
            "progress": event.progress,
            "total": event.total,
            "message": event.message,
        }
        return "hermes.tool.progress", progress
    return None
