"""What a person is told about the model's context: the line a compaction
shows in a chat or a terminal, and the answer to ``/context`` and
``/compact``. Pure text, shared by every surface so they say the same."""

from __future__ import annotations

from ..events import ContextCompacted

__all__ = ["compact_reply", "compaction_line", "context_line", "short_tokens"]


def short_tokens(tokens: int) -> str:
    """``950``, ``12.3k``, ``41k``, ``1.2M``: a token count at a glance
    (one decimal below ten units, where it still says something)."""
    tokens = max(0, int(tokens))
    for size, unit in ((1_000_000, "M"), (1_000, "k")):
        if tokens >= size:
            value = tokens / size
            # Rounding up to the next unit ("1000k") reads as the next unit.
            if unit == "k" and round(value) >= 1000:
                return short_tokens(1_000_000)
            if value < 9.95:
                return f"{value:.1f}".rstrip("0").rstrip(".") + unit
            return f"{round(value)}{unit}"
    return str(tokens)


def _sizes(event: ContextCompacted) -> str:
    return f"{short_tokens(event.tokens_before)} → {short_tokens(event.tokens_after)} tokens"


def compaction_line(event: ContextCompacted) -> str:
    """The one line a chat or terminal shows for a compaction."""
    if event.how == "summary":
        return (
            "🗜 Summarised the earlier conversation to stay within the model's context "
            f"({_sizes(event)})."
        )
    line = f"🗜 Dropped the oldest messages to stay within the model's context ({_sizes(event)})"
    return f"{line}: {event.reason}" if event.reason else f"{line}."


def context_line(tokens: int, window: int, messages: int) -> str:
    """The answer to ``/context``: how full the model's window is."""
    share = round(100 * tokens / window) if window > 0 else 0
    noun = "message" if messages == 1 else "messages"
    return (
        f"Context: {short_tokens(tokens)} of {short_tokens(window)} tokens ({share}%), "
        f"{messages} {noun}"
    )


def compact_reply(event: ContextCompacted | None) -> str:
    """The answer to ``/compact``."""
    if event is None:
        return "Nothing to compact: the conversation is no longer than its newest exchange."
    return compaction_line(event)
