"""The opt-in ``hermes.context.compacted`` event of a chat stream
(``X-Hermes-Stream-Extensions: context``): the conversation was made
smaller to fit the model's window before the next model request. It says
how and by how much, never the summary itself (what a conversation said
stays out of an event meant for a status line)."""

from __future__ import annotations

from typing import Literal, TypedDict

from ..events import ContextCompacted

__all__ = ["ContextCompactedFields", "context_event"]


class ContextCompactedFields(TypedDict):
    """``hermes.context.compacted``; token counts are estimates of the
    request's size before and after."""

    how: Literal["summary", "truncation"]
    tokens_before: int
    tokens_after: int
    folded: int
    window: int


def context_event(event: ContextCompacted) -> tuple[str, ContextCompactedFields]:
    """``(type, fields)`` of the stream event for ``event``."""
    fields: ContextCompactedFields = {
        "how": event.how,
        "tokens_before": event.tokens_before,
        "tokens_after": event.tokens_after,
        "folded": event.folded,
        "window": event.window,
    }
    return "hermes.context.compacted", fields
