"""Checks shared by the request parsers of the chat and Responses endpoints
(pure).

Both endpoints refuse what they cannot honour with a 400 that names the
field, so a client sees the same message for the same mistake on either.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from typing import Any

from .errors import APIError

__all__ = [
    "bad",
    "join_system",
    "number",
    "optional_bool",
    "optional_str",
    "positive_int",
    "request_object",
    "role_of",
    "stream_options",
]


def bad(message: str, param: str, code: str = "invalid_value") -> APIError:
    return APIError(400, message, param=param, code=code)


def request_object(body: Any, known: Set[str]) -> dict[str, Any]:
    """The body as a JSON object with only fields in ``known``."""
    if not isinstance(body, dict):
        raise APIError(400, "the request body must be a JSON object", code="invalid_json")
    unknown = sorted(set(body) - known)
    if unknown:
        raise bad(f"unknown field '{unknown[0]}': this server cannot honour it", unknown[0])
    return body


def optional_bool(body: dict[str, Any], key: str, default: bool) -> bool:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad(f"'{key}' must be true or false", key)
    return value


def optional_str(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise bad(f"'{key}' must be a string", key)
    return value


def number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    # bool is an int subclass, but `true` is no temperature.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad(f"'{key}' must be a number", key)
    if not low <= value <= high:
        raise bad(f"'{key}' must be between {low:g} and {high:g}, got {value}", key)
    return value


def positive_int(body: dict[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad(f"'{key}' must be a positive integer", key)
    return value


def stream_options(body: dict[str, Any], stream: bool) -> dict[str, Any] | None:
    """``stream_options`` as an object, refused on a request that does not
    stream; what may be in it is the caller's to check."""
    options = body.get("stream_options")
    if options is None:
        return None
    if not isinstance(options, dict):
        raise bad("'stream_options' must be an object", "stream_options")
    if not stream:
        raise bad("'stream_options' is only allowed with 'stream': true", "stream_options")
    return options


def role_of(message: dict[str, Any], where: str, roles: Set[str]) -> str:
    role = message.get("role")
    if not isinstance(role, str) or role not in roles:
        raise bad(
            f"'{where}.role' must be one of {', '.join(sorted(roles))}, got {role!r}",
            f"{where}.role",
        )
    return role


def join_system(parts: Iterable[str]) -> str | None:
    """System and developer texts as the one system text layered on the
    agent's own prompt; ``None`` when they say nothing."""
    return "\n\n".join(p for p in parts if p) or None
