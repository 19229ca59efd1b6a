"""A stdio MCP server's output cut into lines, none held past a cap.

Pure, no I/O: :class:`LineCap` is fed the bytes a server writes and gives
back its whole lines, except that a line longer than the cap is not kept:
past the cap only its first and last :data:`KEEP` bytes are, and at its
newline it comes back as :class:`Oversized`, with the id of the request it
answers when those ends say (:func:`answer_id`). The id is at one end or
the other: Python servers write ``{"jsonrpc", "id", "result"}``, the
TypeScript SDK ``{"result", "jsonrpc", "id"}``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

__all__ = ["KEEP", "LineCap", "Oversized", "answer_id"]

KEEP = 512
"""How many bytes of each end of an over-long line are kept, to find its id."""


@dataclass(frozen=True)
class Oversized:
    """A line that passed the cap: ``size`` bytes without its newline, and
    the id of the request it answers (None: not an answer, or no id seen)."""

    size: int
    answer_to: int | str | None


class LineCap:
    """Lines of at most ``limit`` bytes (newline not counted) whole; longer
    ones as :class:`Oversized`. A line with no newline yet is held, up to
    ``limit`` bytes of it and never more."""

    def __init__(self, limit: int, keep: int = KEEP) -> None:
        if limit < 2 * keep:
            raise ValueError(f"limit ({limit}) must hold both kept ends ({2 * keep} bytes)")
        self.limit = limit
        self._keep = keep
        self._line = bytearray()
        # Once a line passed the cap: its first bytes, its last bytes so far.
        self._head: bytes | None = None
        self._tail = b""
        self._size = 0

    @property
    def held(self) -> int:
        """Bytes of the unfinished line held now."""
        return len(self._line) + len(self._head or b"") + len(self._tail)

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        """The lines ``chunk`` ends, in order (without their newlines)."""
        out: list[bytes | Oversized] = []
        view = memoryview(chunk)
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            self._take(view[start:] if end < 0 else view[start:end])
            if end < 0:
                return out
            out.append(self._finish())
            start = end + 1

    def _take(self, piece: memoryview) -> None:
        self._size += len(piece)
        if self._head is None and self._size <= self.limit:
            self._line += piece
            return
        keep = self._keep
        if self._head is None:
            self._head = (bytes(self._line[:keep]) + bytes(piece[:keep]))[:keep]
            self._tail = bytes(self._line[-keep:])
            self._line = bytearray()
        self._tail = (self._tail + bytes(piece[-keep:]))[-keep:]

    def _finish(self) -> bytes | Oversized:
        if self._head is None:
            line = bytes(self._line)
            found: bytes | Oversized = line
        else:
            found = Oversized(self._size, answer_id(self._head, self._tail))
        self._line = bytearray()
        self._head = None
        self._tail = b""
        self._size = 0
        return found


_WS = b" \t\r\n"
_SCALAR = re.compile(rb"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null")
_SCALAR_CHARS = frozenset(b"0123456789+-.eEtruefalsn")


def answer_id(head: bytes, tail: bytes) -> int | str | None:
    """The id of the JSON-RPC answer whose line begins with ``head`` and
    ends with ``tail`` (the middle unknown); None unless the members these
    show make it an answer (``result`` or ``error``, no ``method``) with an
    integer or string id."""
    members = _members_forward(head)
    members.update(_members_backward(tail))
    if "method" in members or not {"result", "error"} & members.keys():
        return None
    found = members.get("id")
    if isinstance(found, bool) or not isinstance(found, int | str):
        return None
    return found


def _members_forward(text: bytes) -> dict[str, object]:
    """The object's leading members; a value cut off by the end counts as
    present (``...``), and nothing after it is read."""
    members: dict[str, object] = {}
    i = _skip(text, 0)
    if not text[i : i + 1] == b"{":
        return members
    i += 1
    while True:
        key = _string_forward(text, _skip(text, i))
        if key is None:
            return members
        name, i = key
        i = _skip(text, i)
        if text[i : i + 1] != b":":
            return members
        value = _value_forward(text, _skip(text, i + 1))
        if value is None:
            members.setdefault(name, ...)
            return members
        members.setdefault(name, value[0])
        i = _skip(text, value[1])
        if text[i : i + 1] != b",":
            return members
        i += 1


def _members_backward(text: bytes) -> dict[str, object]:
    """The object's trailing members, read from its closing brace back to
    the first member that does not lie wholly inside ``text``."""
    members: dict[str, object] = {}
    j = _skip_back(text, len(text))
    if text[j - 1 : j] != b"}":
        return members
    j -= 1
    while True:
        value = _value_backward(text, _skip_back(text, j))
        if value is None:
            return members
        found, j = value
        j = _skip_back(text, j)
        if text[j - 1 : j] != b":":
            return members
        key = _value_backward(text, _skip_back(text, j - 1))
        if key is None or not isinstance(key[0], str):
            return members
        members.setdefault(key[0], found)
        j = _skip_back(text, key[1])
        if text[j - 1 : j] != b",":
            return members
        j -= 1


def _skip(text: bytes, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _skip_back(text: bytes, j: int) -> int:
    while j > 0 and text[j - 1] in _WS:
        j -= 1
    return j


def _string_forward(text: bytes, i: int) -> tuple[str, int] | None:
    """The string starting at ``i`` and where it ends; None if cut off."""
    if text[i : i + 1] != b'"':
        return None
    j = i + 1
    while j < len(text):
        if text[j] == 0x5C:  # a backslash escapes the next byte
            j += 2
        elif text[j] == 0x22:
            return _decoded(text[i : j + 1]), j + 1
        else:
            j += 1
    return None


def _value_forward(text: bytes, i: int) -> tuple[object, int] | None:
    """A whole value starting at ``i`` (nested ones only skipped over) and
    where it ends; None if it is not wholly inside ``text``."""
    if text[i : i + 1] == b'"':
        return _string_forward(text, i)
    if text[i : i + 1] in (b"{", b"["):
        depth, j = 0, i
        while j < len(text):
            if text[j] == 0x22:
                string = _string_forward(text, j)
                if string is None:
                    return None
                j = string[1]
                continue
            depth += (text[j] in b"{[") - (text[j] in b"}]")
            j += 1
            if depth == 0:
                return ..., j
        return None
    scalar = _SCALAR.match(text, i)
    # A scalar that reaches the end may go on past it (12 of 123).
    if scalar is None or scalar.end() >= len(text):
        return None
    return json.loads(scalar.group()), scalar.end()


def _value_backward(text: bytes, j: int) -> tuple[object, int] | None:
    """A whole value ending at ``j`` and where it starts; None if it is
    not wholly inside ``text``."""
    if text[j - 1 : j] == b'"':
        start = _string_start(text, j - 1)
        return None if start is None else (_decoded(text[start:j]), start)
    if text[j - 1 : j] in (b"}", b"]"):
        depth, i = 0, j
        while i > 0:
            if text[i - 1] == 0x22:
                start = _string_start(text, i - 1)
                if start is None:
                    return None
                i = start
                continue
            depth += (text[i - 1] in b"}]") - (text[i - 1] in b"{[")
            i -= 1
            if depth == 0:
                return ..., i
        return None
    i = j
    while i > 0 and text[i - 1] in _SCALAR_CHARS:
        i -= 1
    # A scalar that reaches the start may begin before it (23 of 123).
    if i == 0 or i == j or _SCALAR.fullmatch(text, i, j) is None:
        return None
    return json.loads(text[i:j]), i


def _string_start(text: bytes, close: int) -> int | None:
    """Where the string whose closing quote is at ``close`` opens: the
    first quote back that an even run of backslashes precedes (a quote
    inside a string is escaped, so an odd run precedes it)."""
    q = close
    while True:
        q = text.rfind(b'"', 0, q)
        if q < 0:
            return None
        run = q
        while run > 0 and text[run - 1] == 0x5C:
            run -= 1
        if run == 0:
            return None  # the backslashes may go on before what was kept
        if (q - run) % 2 == 0:
            return q


def _decoded(token: bytes) -> str:
    try:
        value = json.loads(token)
    except ValueError:
        return ""
    return value if isinstance(value, str) else ""
