"""The opt-in ``hermes.tool.*`` events: what the agent's own tool calls look
like on the wire, the same on the chat and the Responses streams."""

from __future__ import annotations

from typing import Any

from ..events import LongToolHint, StreamEvent, ToolCallChunk, ToolCallFinished, ToolProgress

__all__ = ["tool_event"]


def tool_event(event: StreamEvent) -> tuple[str, dict[str, Any]] | None:
    """``(type, fields)`` of the tool event ``event`` becomes, or None when
    it is not about one of the agent's tools."""
    if isinstance(event, ToolCallChunk):
        return "hermes.tool.started", {
            "tool": event.tool_name,
            "preview": event.preview,
            "index": event.index,
            "call_id": event.call_id,
        }
    if isinstance(event, ToolCallFinished):
        return "hermes.tool.finished", {
            "tool": event.tool_name,
            "index": event.index,
            "call_id": event.call_id,
            "ok": event.ok,
            "duration": round(event.duration, 3),
        }
    if isinstance(event, LongToolHint):
        return "hermes.tool.running", {
            "tool": event.tool_name,
            "duration": round(event.duration, 3),
        }
    if isinstance(event, ToolProgress):
        return "hermes.tool.progress", {
            "tool": event.tool_name,
            "index": event.index,
            "progress": event.progress,
            "total": event.total,
            "message": event.message,
        }
    return None
