"""What both upstream readers (Chat Completions chunks and Responses events)
share: their two errors, quoting a bad value for an error message, the
model server's own error objects, token counts, and stand-in call ids.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from hermes_trio.events import Usage

__all__ = [
    "ChunkError",
    "ProviderError",
    "chunk_error",
    "fallback_id",
    "provider_error",
    "quote",
    "usage_from",
]

_QUOTE_LIMIT = 300
# Token counts above this are nonsense (and past 2**64 our own encoder
# refuses them): such a count is taken as unknown.
_MAX_COUNT = 2**53


class ChunkError(ValueError):
    """A streamed chunk or response body that does not have the expected shape."""


class ProviderError(Exception):
    """The model server reported an error, e.g. a ``{"error": {...}}`` frame mid-stream."""

    def __init__(
        self,
        message: str,
        *,
        type: str | None = None,
        code: str | int | None = None,
        raw: object = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.type = type
        self.code = code
        self.raw = raw


def quote(obj: object) -> str:
    """``obj`` as short text for an error message: JSON, cut at 300 characters."""
    if isinstance(obj, str):
        text = obj
    else:
        try:
            text = json.dumps(obj, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            # Nested past the encoder's depth (repr would recurse as deep).
            text = f"(a JSON {type(obj).__name__} nested too deep to quote)"
    if len(text) > _QUOTE_LIMIT:
        text = text[:_QUOTE_LIMIT] + "…"
    return text


def chunk_error(reason: str, chunk: object) -> ChunkError:
    """A :class:`ChunkError` saying ``reason`` and quoting the culprit."""
    return ChunkError(f"{reason}: {quote(chunk)}")


def provider_error(error: object, raw: object) -> ProviderError:
    """Build a ProviderError from an ``error`` member (usually a dict, sometimes a string)."""
    if isinstance(error, dict):
        message = error.get("message")
        type_ = error.get("type")
        code = error.get("code")
        return ProviderError(
            message if isinstance(message, str) and message else quote(error),
            type=type_ if isinstance(type_, str) else None,
            code=code if isinstance(code, str | int) and not isinstance(code, bool) else None,
            raw=raw,
        )
    return ProviderError(error if isinstance(error, str) else quote(error), raw=raw)


def _int(value: object) -> int:
    # Some servers send null or floats for counts they do not track.
    if isinstance(value, bool):
        return 0
    if isinstance(value, float):
        # NaN fails both comparisons below, infinity the second.
        value = int(value) if 0 <= value < _MAX_COUNT else 0
    if isinstance(value, int) and 0 <= value < _MAX_COUNT:
        return value
    return 0


def _detail(usage: Mapping[str, object], details_key: str, key: str) -> int:
    details = usage.get(details_key)
    return _int(details.get(key)) if isinstance(details, dict) else 0


def usage_from(
    usage: Mapping[str, object], prompt: str = "prompt", completion: str = "completion"
) -> Usage:
    """A usage object of either API: Chat Completions names its counts
    ``prompt``/``completion``, the Responses API ``input``/``output``."""
    asked = _int(usage.get(f"{prompt}_tokens"))
    answered = _int(usage.get(f"{completion}_tokens"))
    return Usage(
        prompt_tokens=asked,
        completion_tokens=answered,
        total_tokens=_int(usage.get("total_tokens")) or asked + answered,
        reasoning_tokens=_detail(usage, f"{completion}_tokens_details", "reasoning_tokens"),
        cached_tokens=_detail(usage, f"{prompt}_tokens_details", "cached_tokens"),
    )


def fallback_id(slot: int) -> str:
    """A stable id for a tool call the server sent without one: the tool
    result must name its call."""
    return f"call_{slot}"
