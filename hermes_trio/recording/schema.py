"""Whether a file holds a recording a replay can run: its bytes read as
bounded JSON, then the whole document checked against its shapes
(:mod:`.document`) before anything replays. Sans-IO: no trio, no httpx, no
files.

A replay trusts what passes: times are finite and within ``Range``, every
field has its type, an event's fields are its class's, the settings are
ones config.yaml would accept. So a file edited by hand (or cut, or
crafted) ends in one line naming where it is wrong
(``exchanges[2].pieces[0].after: expected a number, got a string``), never
in a traceback or a replayed turn that crashes on it.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import json
import math
import re
import sys
import types
import urllib.parse
from collections.abc import Callable, Mapping
from typing import (
    Annotated,
    Any,
    Literal,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

from ..config import ConfigError, config_from_sections
from ..events import StreamEvent
from .document import (
    EventRecord,
    ExchangeRecord,
    PieceRecord,
    Range,
    RecordingDocument,
    TurnSettings,
)

__all__ = ["MAX_BYTES", "MAX_DEPTH", "check_document", "read_json"]

#: The most a replay reads of a file (``record.max_file_bytes`` is 8 MiB).
MAX_BYTES = 64 * 1024 * 1024
#: The deepest nesting of arrays and objects a recording may hold: the
#: document's own levels and a request body's JSON schemas fit well inside,
#: and everything that walks it later (copies, comparisons) stays far from
#: Python's recursion limit.
MAX_DEPTH = 100
# A path shown in full up to this many steps; deeper ones are cut.
_SHOWN_STEPS = 12

_EVENTS: dict[str, type] = {cls.__name__: cls for cls in get_args(StreamEvent)}
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Any text but control characters (a server's UTF-8 or Latin-1 included).
_HEADER_VALUE = re.compile(r"[^\x00-\x08\x0a-\x1f\x7f]*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# JSON's strings and brackets, to find where nesting gets too deep.
_BRACKETS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


class _Wrong(ValueError):
    """What is wrong, and where: a path into the document ("" for the
    document itself), or None where the problem says (a byte, a line)."""

    def __init__(self, where: str | None, problem: str) -> None:
        super().__init__(problem if where is None else f"{where or 'top level'}: {problem}")


@dataclasses.dataclass(frozen=True)
class _Unreadable:
    """A number Python's reader would refuse or a replay cannot use, kept in
    its place so the check after reading names where it is."""

    problem: str


def _int(digits: str) -> int | _Unreadable:
    try:
        return int(digits)
    except ValueError:
        # Past sys.get_int_max_str_digits().
        return _Unreadable(
            f"an integer of {len(digits.lstrip('-'))} digits is more than Python reads"
        )


def _constant(name: str) -> _Unreadable:
    return _Unreadable(f"{name} is not a JSON number")


def read_json(data: str | bytes) -> Any:
    """The JSON value in ``data``, within ``MAX_BYTES`` and ``MAX_DEPTH``;
    ``ValueError`` in one line naming where it is not (a byte offset, a
    line, a path)."""
    if len(data) > MAX_BYTES:
        raise _Wrong(None, f"larger than {MAX_BYTES // 2**20} MiB, the most a replay reads")
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Wrong(
                None, f"not UTF-8 (byte 0x{data[exc.start]:02x} at byte offset {exc.start})"
            ) from None
    else:
        text = data
    try:
        value = json.loads(text, parse_int=_int, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise _Wrong(None, f"not JSON ({exc.msg} at {where})") from None
    except RecursionError:
        raise _Wrong(
            None, f"{_deep_at(text)}arrays and objects nested deeper than {MAX_DEPTH}"
        ) from None
    _check_values(value)
    return value


def _deep_at(text: str) -> str:
    """ "line L column C: " where nesting first passes ``MAX_DEPTH``."""
    depth = 0
    for match in _BRACKETS.finditer(text):
        mark = text[match.start()]
        if mark in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                column = match.start() - text.rfind("\n", 0, match.start())
                return f"line {line} column {column}: "
        elif mark in "]}":
            depth -= 1
    return ""


def _check_values(document: Any) -> None:
    """Every value of ``document``, open JSON included: nesting, numbers
    Python could not read or a double cannot hold, strings UTF-8 cannot
    write. Without recursion, so any depth is safe to look at."""
    # (value, depth, the path to it as (parent's path, key) links)
    stack: list[tuple[Any, int, Any]] = [(document, 0, None)]
    while stack:
        value, depth, at = stack.pop()
        if isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                raise _Wrong(_path_of(at), f"arrays and objects nested deeper than {MAX_DEPTH}")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str) and not _writable(key):
                    raise _Wrong(_path_of(at), "a key with a lone surrogate (\\udXXX) is not text")
                stack.append((item, depth + 1, (at, key)))
        elif isinstance(value, _Unreadable):
            raise _Wrong(_path_of(at), value.problem)
        elif isinstance(value, float) and not math.isfinite(value):
            raise _Wrong(_path_of(at), "expected a finite number (a double's range)")
        elif isinstance(value, str) and not _writable(value):
            raise _Wrong(_path_of(at), "a string with a lone surrogate (\\udXXX) is not text")


def _writable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _path_of(at: Any) -> str:
    keys: list[str | int] = []
    while at is not None:
        at, key = at
        keys.append(key)
    keys.reverse()
    path = ""
    for key in keys[:_SHOWN_STEPS]:
        path = _step(path, key)
    return path + ("…" if len(keys) > _SHOWN_STEPS else "")


def _step(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _NAME.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{_shown(key)}]"


def _number(bound: float) -> str:
    return str(int(bound)) if bound == int(bound) and abs(bound) < 1e15 else f"{bound:g}"


def _shown(value: Any) -> str:
    """A value of the file in a message: JSON, one line, cut at 40 characters."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


def check_document(document: Any) -> RecordingDocument:
    """``document`` (from :func:`read_json`) as a recording, when it has
    the shape of one in every part; else ``ValueError`` in one line naming
    the first place it does not."""
    # Again, for a document built or edited in Python since it was read.
    _check_values(document)
    _check(RecordingDocument, document, "")
    return document  # type: ignore[no-any-return]


# -- the shapes, as the type hints of document.py and events.py give them ----


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _expected(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Annotated:
        return _expected(get_args(tp)[0])
    if origin is Literal:
        return "one of " + ", ".join(_shown(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_expected(a) for a in get_args(tp))
    if origin in (list, tuple):
        return "an array"
    simple = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
    if tp in simple:
        return simple[tp]
    if tp is type(None):
        return "null"
    return "anything" if tp is Any else "an object"


def _fits(tp: Any, value: Any) -> bool:
    """Whether ``value`` is the right kind of JSON for ``tp`` (not looking inside)."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _fits(get_args(tp)[0], value)
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return any(_fits(a, value) for a in get_args(tp))
    if origin in (list, tuple):
        return isinstance(value, list)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp in (str, bool):
        return isinstance(value, tp)
    if tp is type(None):
        return value is None
    return True if tp is Any else isinstance(value, dict)


def _check(tp: Any, value: Any, path: str) -> None:
    if not _fits(tp, value):
        named = isinstance(value, str) and _expected(tp).startswith("one of")
        got = _shown(value) if named else _describe(value)
        raise _Wrong(path, f"expected {_expected(tp)}, got {got}")
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        _check(args[0], value, path)
        for mark in args[1:]:
            if isinstance(mark, Range) and not mark.low <= value <= mark.high:
                low, high = _number(mark.low), _number(mark.high)
                raise _Wrong(path, f"expected a number from {low} to {high}, got {_shown(value)}")
    elif origin in (Union, types.UnionType):
        _check_union([a for a in args if _fits(a, value)], value, path)
    elif origin is list or (origin is tuple and args[-1] is Ellipsis):
        for index, item in enumerate(value):
            _check(args[0], item, f"{path}[{index}]")
    elif origin is dict:
        for key, item in value.items():
            _check(args[1], item, _step(path, key))
    elif is_typeddict(tp):
        _check_fields(_typed_fields(tp), value, path)
        after = _AFTER.get(tp)
        if after is not None:
            after(value, path)
    elif isinstance(tp, type) and dataclasses.is_dataclass(tp):
        _check_fields(_class_fields(tp), value, path)
    elif tp is int and not -(2**63) <= value < 2**63:
        raise _Wrong(path, f"expected an integer of at most 64 bits, got {_shown(value)}")
    elif tp is float and not -sys.float_info.max <= value <= sys.float_info.max:
        raise _Wrong(path, "expected a finite number (a double's range)")


def _check_union(arms: list[Any], value: Any, path: str) -> None:
    """``value`` as one of the ``arms`` that fit it: of several objects (the
    messages), the one its ``Literal`` field names."""
    typed = [a for a in arms if is_typeddict(a)]
    if len(typed) > 1:
        arms = _by_literal(typed, value, path)
    for arm in arms[:-1]:
        try:
            _check(arm, value, path)
        except _Wrong:
            continue
        return
    _check(arms[-1], value, path)


def _by_literal(typed: list[Any], value: dict[str, Any], path: str) -> list[Any]:
    fields = [_typed_fields(arm) for arm in typed]
    for key in fields[0]:
        kinds = [f.get(key, (None, False))[0] for f in fields]
        if all(get_origin(k) is Literal for k in kinds):
            if key not in value:
                raise _Wrong(_step(path, key), "missing")
            chosen = [
                arm for arm, kind in zip(typed, kinds, strict=True) if _fits(kind, value[key])
            ]
            if not chosen:
                names = ", ".join(_shown(a) for k in kinds for a in get_args(k))
                raise _Wrong(_step(path, key), f"expected one of {names}, got {_shown(value[key])}")
            return chosen
    return typed


@functools.cache
def _typed_fields(tp: Any) -> dict[str, tuple[Any, bool]]:
    """A TypedDict's fields: name -> (type, required)."""
    fields = {}
    for name, hint in get_type_hints(tp, include_extras=True).items():
        origin = get_origin(hint)
        if origin in (NotRequired, Required):
            fields[name] = (get_args(hint)[0], origin is Required)
        else:
            fields[name] = (hint, bool(tp.__total__))
    return fields


@functools.cache
def _class_fields(tp: Any) -> dict[str, tuple[Any, bool]]:
    """A dataclass's fields as an object: name -> (type, required)."""
    hints = get_type_hints(tp)
    return {
        f.name: (
            hints[f.name],
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in dataclasses.fields(tp)
    }


def _check_fields(fields: Mapping[str, tuple[Any, bool]], value: dict[str, Any], path: str) -> None:
    for key in value:
        if key not in fields:
            raise _Wrong(_step(path, key), "unknown field")
    for key, (tp, required) in fields.items():
        if key in value:
            _check(tp, value[key], _step(path, key))
        elif required:
            raise _Wrong(_step(path, key), "missing")


# -- what the types alone do not say -----------------------------------------


def _check_exchange(exchange: dict[str, Any], path: str) -> None:
    try:
        url = urllib.parse.urlsplit(exchange["url"])
    except ValueError:
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.netloc:
        raise _Wrong(f"{path}.url", f"expected an http(s) URL, got {_shown(exchange['url'])}")
    for index, header in enumerate(exchange.get("headers") or []):
        where = f"{path}.headers[{index}]"
        if len(header) != 2:
            raise _Wrong(where, f"expected a [name, value] pair, got {len(header)} strings")
        if not _TOKEN.fullmatch(header[0]) or not _HEADER_VALUE.fullmatch(header[1]):
            raise _Wrong(
                where, "expected a header's name (a token) and value (no control characters)"
            )
    body = exchange["body"]
    if not isinstance(body, dict):
        return
    # What a replay reads of the body: the model it named, the tools it offered.
    if "model" in body:
        _check(str, body["model"], f"{path}.body.model")
    tools = body.get("tools")
    if tools is not None:
        _check(list[dict[str, Any]], tools, f"{path}.body.tools")
        for index, tool in enumerate(tools):
            if "function" in tool:
                where = f"{path}.body.tools[{index}].function"
                _check(dict[str, Any], tool["function"], where)
                if "name" in tool["function"]:
                    _check(str, tool["function"]["name"], f"{where}.name")


def _check_piece(piece: dict[str, Any], path: str) -> None:
    if ("text" in piece) == ("base64" in piece):
        raise _Wrong(path, "expected either text or base64")
    if "base64" in piece:
        try:
            base64.b64decode(piece["base64"], validate=True)
        except (binascii.Error, ValueError):
            raise _Wrong(f"{path}.base64", "not Base64") from None


def _check_event(record: dict[str, Any], path: str) -> None:
    kind = _EVENTS.get(record["type"])
    if kind is None:
        raise _Wrong(f"{path}.type", f"unknown event type {_shown(record['type'])}")
    # The fields a replay builds the event from (an approval), or compares.
    _check(kind, record["data"], f"{path}.data")


def _check_settings(settings: dict[str, Any], path: str) -> None:
    # As config.yaml's would be: the replay runs the turn under them.
    try:
        config_from_sections({"model": settings.get("model"), "agent": settings.get("agent")})
    except ConfigError as exc:
        # "agent.max_iterations: expected …", the key as the file has it.
        key, _, problem = str(exc).partition(": ")
        raise _Wrong(f"{path}.{key}", problem) from None


_AFTER: dict[Any, Callable[[dict[str, Any], str], None]] = {
    ExchangeRecord: _check_exchange,
    PieceRecord: _check_piece,
    EventRecord: _check_event,
    TurnSettings: _check_settings,
}
