"""How an answer cut short reads in a stored conversation: what was shown of
it, marked ``[interrupted]``. The agent ends an interrupted turn this way and
the store ends a response whose process died this way, so a later turn (and
the model) reads both the same."""

from __future__ import annotations

from .messages import ChatAssistantMessage

__all__ = ["INTERRUPTED_MARK", "interrupted_answer"]

INTERRUPTED_MARK = "[interrupted]"


def interrupted_answer(shown: str) -> ChatAssistantMessage:
    """The assistant message that ends a conversation whose answer stopped
    after ``shown`` (possibly nothing)."""
    return {
        "role": "assistant",
        "content": f"{shown} {INTERRUPTED_MARK}" if shown else INTERRUPTED_MARK,
    }
