"""Parsing JSON a model server sent: fast, bounded, and clean for re-encoding.

orjson refuses nesting deeper than 1,024 and numbers a double cannot hold,
which is what we want from untrusted input; it also refuses a lone UTF-16
surrogate escape (``"\\ud800"``), which is valid JSON text some servers do
send (an emoji split between two chunks, each half escaped on its own).
Those become U+FFFD here, at the edge: text that goes on to our own SSE
frames, stores and chat messages must be encodable, and one broken
character is no reason to fail a whole answer.

The repair runs only when orjson's error says it is needed (bytes that are
not UTF-8, a surrogate escape), and then looks only at the surrogate
escapes themselves: a body of tens of megabytes costs about one more parse,
not a scan of every backslash in it.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = ["loads_upstream"]

# Escapes of either surrogate half; whether one is really an escape (after an
# even run of backslashes) and whether it has its partner is decided per hit.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_REPLACEMENT = b"\\ufffd"
_BACKSLASH = ord("\\")
_HIGH = frozenset(b"89abAB")


def _escaped(text: bytes, at: int) -> bool:
    """Whether the backslash at ``at`` starts an escape: it does after an
    even run of backslashes (each pair before it is one escaped backslash)."""
    start = at
    while start > 0 and text[start - 1] == _BACKSLASH:
        start -= 1
    return (at - start) % 2 == 0


def _repair_surrogates(text: bytes) -> bytes:
    """``text`` with every lone surrogate escape replaced by ``\\ufffd``."""
    out: list[bytes] = []
    done = 0
    skip_to = -1
    for match in _SURROGATE_ESCAPE.finditer(text):
        at = match.start()
        if at < skip_to or not _escaped(text, at):
            continue
        if text[at + 3] in _HIGH:
            partner = _SURROGATE_ESCAPE.match(text, match.end())
            if partner is not None and text[partner.start() + 3] not in _HIGH:
                skip_to = partner.end()  # a proper pair
                continue
        out.append(text[done:at])
        out.append(_REPLACEMENT)
        done = match.end()
    if not out:
        return text
    out.append(text[done:])
    return b"".join(out)


def loads_upstream(raw: str | bytes) -> Any:
    """Parse ``raw``; raises ``ValueError`` saying what is wrong with it.

    Lone surrogate escapes become U+FFFD, and so do bytes that are not
    UTF-8; everything else orjson refuses stays refused.
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        first = exc
    reason = first.msg
    data: str | bytes = raw
    if "UTF-8" in reason:
        # Bytes that are not UTF-8, or surrogate characters in a str.
        if isinstance(raw, str):
            data = raw.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        else:
            data = bytes(raw).decode("utf-8", "replace")
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            reason = exc.msg
    if "surrogate" not in reason:
        raise ValueError(str(first)) from None
    body = data.encode() if isinstance(data, str) else bytes(data)
    try:
        return orjson.loads(_repair_surrogates(body))
    except orjson.JSONDecodeError:
        raise ValueError(str(first)) from None
