"""Request bodies from bytes to JSON values (pure): what no endpoint can
use is refused here with a 400 that names where it is.

- Text that cannot be encoded as UTF-8 (a lone surrogate such as
  ``"\\ud800"``): every later step (the model request, the store, the
  session) would fail on it.
- Arrays and objects nested deeper than :data:`MAX_DEPTH`: copying or
  encoding them again would exhaust Python's recursion limit.

orjson parses several times faster than the standard library and refuses
both outright, but says only at which character; the location as a field
path is worked out only for a body that failed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import orjson

from .errors import APIError

__all__ = [
    "MAX_DEPTH",
    "field_path",
    "parse_request_json",
    "too_deep",
    "too_deep_in_text",
    "unencodable",
]

MAX_DEPTH = 64
"""Most levels of arrays and objects in a request body; a JSON schema or a
message needs far fewer."""

# How many leading components of a too-deep location a 400 names as `param`.
_PARAM_PARTS = 4

Path = list[str | int]

# Digits enough to exceed a 64-bit integer (or to be part of one that does).
_LONG_NUMBER = re.compile(rb"[0-9]{19}")


def parse_request_json(raw: bytes) -> Any:
    """``raw`` as a JSON value; 400 naming the problem (and the field, where
    there is one) otherwise."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _refusal(raw, str(exc)) from None
    if _LONG_NUMBER.search(raw):
        # orjson reads an integer beyond 64 bits as a float, losing digits;
        # the standard library keeps it exact (orjson has checked the rest).
        value = json.loads(raw)
    deep = too_deep(value, MAX_DEPTH)
    if deep is not None:
        raise _too_deep_error(deep)
    return value


def field_path(parts: Sequence[str | int]) -> str:
    """``["messages", 0, "content"]`` as ``messages[0].content``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _refusal(raw: bytes, reason: str) -> APIError:
    if "depth limit" in reason or "recursion" in reason:
        return _too_deep_error(too_deep_in_text(raw, MAX_DEPTH) or [])
    if "surrogate" in reason:
        where = _unencodable_in(raw)
        if where is not None:
            param = field_path(where) or None
            what = f"'{param}'" if param else "the request body"
            return APIError(
                400,
                f"{what} is not valid Unicode text: it holds a lone surrogate (such as \\ud800) "
                "that cannot be encoded as UTF-8",
                param=param,
                code="invalid_value",
            )
    return APIError(400, f"invalid JSON in request body: {reason}", code="invalid_json")


def _too_deep_error(path: Path) -> APIError:
    param = field_path(path[:_PARAM_PARTS]) or None
    where = f"'{param}'" if param else "the request body"
    return APIError(
        400,
        f"{where} nests arrays and objects more than {MAX_DEPTH} levels deep",
        param=param,
        code="invalid_value",
    )


def too_deep(value: Any, limit: int, depth: int = 1) -> Path | None:
    """The path to the first array or object in ``value`` (which is at
    ``depth``) nested more than ``limit`` levels deep, or None."""
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    if depth > limit:
        return []
    for key, child in items:
        if isinstance(child, dict | list):
            found = too_deep(child, limit, depth + 1)
            if found is not None:
                return [key, *found]
    return None


_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{},]', re.DOTALL)


def too_deep_in_text(raw: bytes, limit: int) -> Path | None:
    """The same path as :func:`too_deep`, found in the text of a body too
    deep to parse at all."""
    # One frame per open container: [key or index, is_object, expecting_key].
    stack: list[list[Any]] = []
    for match in _TOKEN.finditer(raw):
        token = match.group()
        first = token[:1]
        if first in (b"{", b"["):
            if len(stack) >= limit:
                return [frame[0] for frame in stack]
            is_object = first == b"{"
            stack.append([None if is_object else 0, is_object, is_object])
        elif first in (b"}", b"]"):
            if stack:
                stack.pop()
        elif first == b",":
            if stack:
                top = stack[-1]
                if top[1]:
                    top[2] = True
                else:
                    top[0] += 1
        elif stack and stack[-1][1] and stack[-1][2]:
            top = stack[-1]
            top[0] = _key_text(token)
            top[2] = False
    return None


def _key_text(token: bytes) -> str:
    try:
        key = json.loads(token)
    except ValueError:
        return token[1:-1].decode("utf-8", "replace")
    return key if isinstance(key, str) else str(key)


def _unencodable_in(raw: bytes) -> Path | None:
    """Where the body holds text UTF-8 cannot encode, by the standard
    library's parser (which, unlike orjson, accepts lone surrogates)."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return unencodable(value)


def unencodable(value: Any) -> Path | None:
    """The path to the first text (a value or a key) in ``value`` that UTF-8
    cannot encode, or None."""
    stack: list[tuple[Any, Path]] = [(value, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if not _encodes(node):
                return path
        elif isinstance(node, dict):
            for key, child in reversed(list(node.items())):
                if not _encodes(key):
                    return path
                stack.append((child, [*path, key]))
        elif isinstance(node, list):
            stack.extend((child, [*path, i]) for i, child in reversed(list(enumerate(node))))
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
