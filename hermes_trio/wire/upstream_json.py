"""Parsing JSON a model server sent: fast, bounded, and clean for re-encoding.

orjson refuses nesting deeper than 1,024 and numbers a double cannot hold,
which is what we want from untrusted input; it also refuses a lone UTF-16
surrogate escape (``"\\ud800"``), which is valid JSON text some servers do
send (an emoji split between two chunks, each half escaped on its own).
Those become U+FFFD here, at the edge: text that goes on to our own SSE
frames, stores and chat messages must be encodable, and one broken
character is no reason to fail a whole answer.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = ["loads_upstream"]

# A \uXXXX escape is real only after an odd run of backslashes ("\\ud800" is
# an escaped backslash and the letters "ud800"); the run is captured whole.
_SURROGATE_ESCAPE = re.compile(
    r"(\\+)u([dD][89abAB][0-9a-fA-F]{2})(\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
    r"|(\\+)u([dD][c-fC-F][0-9a-fA-F]{2})"
)
_REPLACEMENT = "\\ufffd"


def _fix(match: re.Match[str]) -> str:
    if match.group(1) is not None:
        run, high, low = match.group(1), match.group(2), match.group(3)
        if len(run) % 2 == 0:
            # Not an escape; a low half right after it is one, and alone.
            return f"{run}u{high}{_REPLACEMENT if low else ''}"
        if low:
            return match.group(0)  # a proper pair
        return run[:-1] + _REPLACEMENT
    run, low = match.group(4), match.group(5)
    if len(run) % 2 == 0:
        return match.group(0)
    return run[:-1] + _REPLACEMENT


def loads_upstream(raw: str | bytes) -> Any:
    """Parse ``raw``; raises ``ValueError`` saying what is wrong with it.

    Lone surrogate escapes become U+FFFD, and so do bytes that are not
    UTF-8; everything else orjson refuses stays refused.
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        first = exc
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes | bytearray) else raw
    if "\\" in text:
        text = _SURROGATE_ESCAPE.sub(_fix, text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        raise ValueError(str(first)) from None
