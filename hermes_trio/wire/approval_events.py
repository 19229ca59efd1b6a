"""The opt-in ``hermes.approval.*`` events of a chat stream: a question a
tool call waits on, and how it ended (``X-Hermes-Stream-Extensions:
approvals``; answered with ``POST /v1/approvals/{id}``)."""

from __future__ import annotations

from typing import Any

from ..events import ApprovalRequested, ApprovalResolved

__all__ = ["approval_event"]


def approval_event(
    event: ApprovalRequested | ApprovalResolved, expires_at: float
) -> tuple[str, dict[str, Any]]:
    """``(type, fields)`` of the approval event ``event`` becomes.
    ``expires_at`` is the question's deadline in Unix seconds (the event's
    own ``deadline`` is on the turn's trio clock, which means nothing to a
    client); unused for ``ApprovalResolved``."""
    if isinstance(event, ApprovalRequested):
        return "hermes.approval.request", {
            "id": event.id,
            "tool": event.tool_name,
            "arguments": event.arguments,
            "command": event.command,
            "reason": event.reason,
            "timeout": event.timeout,
            "expires_at": round(expires_at, 3),
            "index": event.index,
            "call_id": event.call_id,
        }
    return "hermes.approval.resolved", {
        "id": event.id,
        "outcome": event.outcome,
        "by": event.by,
        "reason": event.reason,
        "index": event.index,
        "call_id": event.call_id,
    }
