"""The opt-in ``hermes.approval.*`` events of a chat stream: a question a
tool call waits on, and how it ended (``X-Hermes-Stream-Extensions:
approvals``; answered with ``POST /v1/approvals/{id}``)."""

from __future__ import annotations

from typing import Any, TypedDict

from ..events import ApprovalOutcome, ApprovalRequested, ApprovalResolved

__all__ = [
    "ApprovalEventFields",
    "ApprovalRequestFields",
    "ApprovalResolvedFields",
    "approval_event",
]


class ApprovalRequestFields(TypedDict):
    """``hermes.approval.request``; ``expires_at`` in Unix seconds."""

    id: str
    tool: str
    arguments: dict[str, Any]
    """The tool call's arguments, as the model wrote them."""
    command: str
    reason: str
    timeout: float
    expires_at: float
    index: int
    call_id: str


class ApprovalResolvedFields(TypedDict):
    """``hermes.approval.resolved``."""

    id: str
    outcome: ApprovalOutcome
    by: str | None
    reason: str
    index: int
    call_id: str


ApprovalEventFields = ApprovalRequestFields | ApprovalResolvedFields


def approval_event(
    event: ApprovalRequested | ApprovalResolved, expires_at: float
) -> tuple[str, ApprovalEventFields]:
    """``(type, fields)`` of the approval event ``event`` becomes.
    ``expires_at`` is the question's deadline in Unix seconds (the event's
    own ``deadline`` is on the turn's trio clock, which means nothing to a
    client); unused for ``ApprovalResolved``."""
    if isinstance(event, ApprovalRequested):
        request: ApprovalRequestFields = {
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
        return "hermes.approval.request", request
    resolved: ApprovalResolvedFields = {
        "id": event.id,
        "outcome": event.outcome,
        "by": event.by,
        "reason": event.reason,
        "index": event.index,
        "call_id": event.call_id,
    }
    return "hermes.approval.resolved", resolved
