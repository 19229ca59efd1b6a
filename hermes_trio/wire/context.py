"""Keeping a conversation inside the model's context window (pure).

The decisions of compaction, with no I/O: how big a conversation is (an
estimate from its text, calibrated by what the model server measured),
where it may be cut (never between an assistant message with tool calls
and the tool results that answer it; preferably where a user's message
starts an exchange), what the summary request asks, and how a refused
request's error says the window was passed. :mod:`hermes_trio.compaction`
is the trio shell that runs the summary request.

A compacted conversation is ``[summary] + kept``: one user message that
starts with :data:`SUMMARY_MARK`, then the newest messages as they were.
A later compaction folds that summary into the next one (it is the
oldest message of the part being folded), so summaries never stack.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .messages import ChatToolCall, ChatUserMessage, Message

__all__ = [
    "SUMMARY_MARK",
    "Calibration",
    "ContextPolicy",
    "Overflow",
    "choose_cut",
    "drop_oldest",
    "estimate_tokens",
    "exchange_starts",
    "is_summary",
    "message_tokens",
    "overflow_of",
    "schemas_tokens",
    "summary_message",
    "summary_pieces",
    "summary_request",
    "transcript",
    "unit_starts",
]

SUMMARY_MARK = "[Summary of the earlier conversation, kept to stay within the model's context]\n"

# About four characters a token for English text and JSON; the calibration
# corrects it for the model's own tokenizer once the server has measured.
_CHARS_PER_TOKEN = 4
# What a message costs besides its text (role, separators of chat templates).
_MESSAGE_OVERHEAD = 4
# An image part: what a low-detail image costs at OpenAI, a fair middle.
_IMAGE_TOKENS = 256
# A tool result longer than this many characters is shown cut in the text
# a summary is written from: the summary keeps what matters of it, not all.
_TRANSCRIPT_RESULT_CHARS = 4000


def _text_of(content: object) -> tuple[str, int]:
    """(text, images) of a message's content: a string or a list of parts."""
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        return "", 0
    texts: list[str] = []
    images = 0
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") in ("image_url", "input_image"):
            images += 1
    return "\n".join(texts), images


def _calls(message: Message) -> list[ChatToolCall]:
    if message["role"] != "assistant":
        return []
    return message.get("tool_calls") or []


def message_tokens(message: Message) -> int:
    """An uncalibrated estimate of what ``message`` costs in a prompt."""
    text, images = _text_of(message.get("content"))
    chars = len(text)
    for call in _calls(message):
        function = call.get("function", {})
        chars += len(function.get("name", "")) + len(function.get("arguments", ""))
    return _MESSAGE_OVERHEAD + math.ceil(chars / _CHARS_PER_TOKEN) + images * _IMAGE_TOKENS


def estimate_tokens(messages: Sequence[Message]) -> int:
    return sum(message_tokens(m) for m in messages)


@dataclass
class Calibration:
    """How the model server's counts relate to :func:`message_tokens`.

    ``ratio`` multiplies an estimate; each measured prompt (the server's
    ``usage.prompt_tokens`` for a request whose estimate was known) sets it
    anew, within bounds, so a tokenizer that counts 3 characters a token (or
    5) is learned from the first answer."""

    ratio: float = 1.0
    measured: int = 0

    def observe(self, estimated: int, measured: int) -> None:
        if estimated <= 0 or measured <= 0:
            return
        self.ratio = min(4.0, max(0.25, measured / estimated))
        self.measured += 1

    def tokens(self, estimated: int) -> int:
        return math.ceil(estimated * self.ratio)


def is_summary(message: Message) -> bool:
    content = message.get("content")
    return (
        message.get("role") == "user"
        and isinstance(content, str)
        and content.startswith(SUMMARY_MARK)
    )


def summary_message(text: str) -> ChatUserMessage:
    return {"role": "user", "content": SUMMARY_MARK + text.strip()}


def unit_starts(messages: Sequence[Message]) -> list[int]:
    """Where the conversation may be cut: every message but a tool result
    (a tool result stays with the assistant message that called it)."""
    return [i for i, m in enumerate(messages) if m.get("role") != "tool"]


def exchange_starts(messages: Sequence[Message]) -> list[int]:
    """Where an exchange starts: a user's message (not a summary)."""
    return [i for i, m in enumerate(messages) if m.get("role") == "user" and not is_summary(m)]


def _suffix_sums(sizes: Sequence[int]) -> list[int]:
    sums = [0] * (len(sizes) + 1)
    for i in range(len(sizes) - 1, -1, -1):
        sums[i] = sums[i + 1] + sizes[i]
    return sums


def choose_cut(
    messages: Sequence[Message], sizes: Sequence[int], *, room: int, keep_recent: int
) -> int | None:
    """Where to cut so that ``messages[cut:]`` (kept as they are) fits in
    ``room`` tokens, with at least ``keep_recent`` of them when it can;
    None when not even the newest message fits.

    The cut falls where an exchange starts (a user's message) when one
    fits, so the newest exchange stays whole; only when the newest exchange
    alone is larger than ``room`` (a long tool loop) does it fall between
    two of its steps, and never between a tool call and its result.
    """
    kept = _suffix_sums(sizes)
    target = min(keep_recent, room)
    exchanges = [c for c in exchange_starts(messages) if c > 0 and kept[c] <= room]
    if exchanges:
        enough = [c for c in exchanges if kept[c] >= target]
        return max(enough) if enough else min(exchanges)
    last_exchange = max(exchange_starts(messages), default=0)
    steps = [c for c in unit_starts(messages) if c > last_exchange and kept[c] <= room]
    return min(steps) if steps else None


def drop_oldest(messages: Sequence[Message], sizes: Sequence[int], *, room: int) -> int | None:
    """How many leading messages to drop so the rest fits in ``room``:
    whole exchanges first, then whole steps of the newest one (a tool call
    goes with its results); 0 when it fits; None when nothing does."""
    kept = _suffix_sums(sizes)
    if kept[0] <= room:
        return 0
    for starts in (exchange_starts(messages), unit_starts(messages)):
        fitting = [c for c in starts if c > 0 and kept[c] <= room]
        if fitting:
            return min(fitting)
    return None


def transcript(messages: Sequence[Message]) -> str:
    """The conversation as plain text, for the model to summarise."""
    lines: list[str] = []
    for m in messages:
        role = m.get("role")
        text, images = _text_of(m.get("content"))
        if role == "user" and is_summary(m):
            lines.append(f"Summary of what came before:\n{text[len(SUMMARY_MARK) :]}")
            continue
        if images:
            text = f"{text} [{images} image(s)]".strip()
        if role == "tool":
            if len(text) > _TRANSCRIPT_RESULT_CHARS:
                cut = len(text) - _TRANSCRIPT_RESULT_CHARS
                text = f"{text[:_TRANSCRIPT_RESULT_CHARS]} […{cut} more characters]"
            lines.append(f"Tool result: {text}")
            continue
        if text:
            lines.append(f"{str(role).capitalize()}: {text}")
        for call in _calls(m):
            function = call.get("function", {})
            lines.append(
                f"Assistant called the tool {function.get('name', '?')} with "
                f"{function.get('arguments', '')}"
            )
    return "\n\n".join(lines)


def summary_pieces(
    messages: Sequence[Message], sizes: Sequence[int], *, budget: int
) -> list[list[Message]]:
    """``messages`` in consecutive pieces of at most ``budget`` tokens each
    (a message larger than that is a piece of its own: its transcript is
    cut by the caller's limit), so each summary request fits the window."""
    pieces: list[list[Message]] = []
    current: list[Message] = []
    used = 0
    for message, size in zip(messages, sizes, strict=True):
        if current and used + size > budget:
            pieces.append(current)
            current, used = [], 0
        current.append(message)
        used += size
    if current:
        pieces.append(current)
    return pieces


_INSTRUCTIONS = (
    "You write the memory of a conversation that has grown too long for the "
    "model's context. Summarise the conversation below so the assistant can "
    "continue it without it: the user's goals, requests and preferences; facts, "
    "names, numbers and decisions; what tools were used and what they found "
    "(file names, values, errors); what is still open. Fold any earlier summary "
    "into yours. Write compact notes in the conversation's language. Do not "
    "answer or address the user; output only the summary."
)


def summary_request(
    piece: Sequence[Message], previous: str | None, *, max_chars: int
) -> list[Message]:
    """The messages of one summary request: ``piece`` (after the summary
    of the pieces before it, ``previous``) as a transcript of at most
    ``max_chars`` characters."""
    text = transcript(piece)
    if previous:
        text = f"Summary of what came before:\n{previous}\n\n{text}"
    if len(text) > max_chars:
        # The newest part matters most to what follows; the cut is said.
        text = "[…the start is cut]\n" + text[len(text) - max_chars :]
    return [
        {"role": "system", "content": _INSTRUCTIONS},
        {"role": "user", "content": f"The conversation so far:\n\n{text}"},
    ]


@dataclass(frozen=True)
class Overflow:
    """A model server's refusal of a prompt too long for its window, with
    the figures it quoted (0 when it quoted none)."""

    window: int = 0
    requested: int = 0


_OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
_OVERFLOW_TEXT = re.compile(
    r"context.{0,12}(length|window|size)|maximum context|prompt is too long|"
    r"too many (input )?tokens|input is too long",
    re.IGNORECASE,
)
_WINDOW_FIGURE = re.compile(
    r"(?:maximum context length|context (?:length|window|size))(?: is| of)?\D{0,20}(\d+)",
    re.IGNORECASE,
)
_REQUESTED_FIGURE = re.compile(
    r"(?:resulted in|requested|you (?:sent|have)|prompt (?:has|contains|is))\D{0,12}(\d+)",
    re.IGNORECASE,
)


def overflow_of(code: str | None, message: str, status: int | None) -> Overflow | None:
    """The window overflow a model server's error describes, or None.

    Servers say it differently: OpenAI and vLLM with the code
    ``context_length_exceeded`` (vLLM often with a numeric code and only
    the words), llama.cpp with ``exceed_context_size_error``, others in
    words alone; a 4xx whose words talk of the context is taken as one."""
    if code not in _OVERFLOW_CODES:
        if status is None or not 400 <= status < 500 or not _OVERFLOW_TEXT.search(message):
            return None
    window = _WINDOW_FIGURE.search(message)
    requested = _REQUESTED_FIGURE.search(message)
    return Overflow(
        int(window.group(1)) if window else 0,
        int(requested.group(1)) if requested else 0,
    )


def schemas_tokens(schemas: Sequence[object]) -> int:
    """An uncalibrated estimate of what tool definitions cost in a prompt."""
    if not schemas:
        return 0
    return math.ceil(len(json.dumps(list(schemas), ensure_ascii=False)) / _CHARS_PER_TOKEN)


@dataclass(frozen=True)
class ContextPolicy:
    """What a turn does when its conversation would not fit the window.

    ``compact``: summarise the older part (``compact_at``: past this many
    tokens rather than the configured share of the window); ``truncate``:
    drop the oldest whole items (the Responses API's ``truncation:
    "auto"``); ``refuse``: send nothing that cannot fit, and end with a
    ``context_length_exceeded`` error (its ``truncation: "disabled"``)."""

    mode: Literal["compact", "truncate", "refuse"] = "compact"
    compact_at: int | None = None
