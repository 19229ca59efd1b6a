"""Checks shared by the request parsers of the chat and Responses endpoints
(pure).

Both endpoints refuse what they cannot honour with a 400 that names the
field, so a client sees the same message for the same mistake on either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Set
from typing import Any, Literal

from .errors import APIError

__all__ = [
    "DOCUMENTED_EXTRAS",
    "UNSUPPORTED",
    "ExtraParams",
    "FieldCheck",
    "a_bool",
    "a_string",
    "an_integer",
    "an_object",
    "bad",
    "check_fields",
    "extra_params",
    "join_system",
    "metadata",
    "number",
    "optional_bool",
    "optional_str",
    "positive_int",
    "refuse_unsupported",
    "request_object",
    "role_of",
    "stream_options",
]


def bad(message: str, param: str, code: str = "invalid_value") -> APIError:
    return APIError(400, message, param=param, code=code)


def request_object(body: Any) -> dict[str, Any]:
    """The body as a JSON object."""
    if not isinstance(body, dict):
        raise APIError(400, "the request body must be a JSON object", code="invalid_json")
    return body


# ---------------------------------------------------------------------------
# Types of single fields: each check takes the value and its field path.

FieldCheck = Callable[[Any, str], None]


def a_string(value: Any, param: str) -> None:
    if not isinstance(value, str):
        raise bad(f"'{param}' must be a string", param, "invalid_type")


def a_bool(value: Any, param: str) -> None:
    if not isinstance(value, bool):
        raise bad(f"'{param}' must be true or false", param, "invalid_type")


def an_integer(value: Any, param: str) -> None:
    # bool is an int subclass, but `true` is no seed.
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(f"'{param}' must be an integer", param, "invalid_type")


def an_object(value: Any, param: str) -> None:
    if not isinstance(value, dict):
        raise bad(f"'{param}' must be an object", param, "invalid_type")


def metadata(value: Any, param: str) -> None:
    """OpenAI's ``metadata``: at most 16 string values under keys of at most
    64 characters."""
    if not isinstance(value, dict) or len(value) > 16:
        raise bad(f"'{param}' must be an object with at most 16 keys", param, "invalid_type")
    for key, item in value.items():
        if len(key) > 64 or not isinstance(item, str) or len(item) > 512:
            raise bad(
                f"'{param}' keys must be at most 64 characters and values strings of at most 512",
                f"{param}.{key}",
            )


def check_fields(
    body: Mapping[str, object], checks: Mapping[str, FieldCheck], prefix: str = ""
) -> None:
    """Run the check of every field of ``body`` that has one and is not null;
    ``prefix`` is the path of ``body`` in the request (``"tools[0].function."``)."""
    for key, check in checks.items():
        value = body.get(key)
        if value is not None:
            check(value, prefix + key)


# ---------------------------------------------------------------------------
# Fields the server does not use itself

ExtraParams = Literal["pass", "drop", "reject"]

# OpenAI documents these; the server does not use them itself, so they are
# extra parameters like any other, but of a known type.
DOCUMENTED_EXTRAS: dict[str, FieldCheck] = {
    "user": a_string,
    "safety_identifier": a_string,
    "prompt_cache_key": a_string,
    "prompt_cache_retention": a_string,
    "service_tier": a_string,
    "verbosity": a_string,
    "store": a_bool,
    "metadata": metadata,
    "prediction": an_object,
    "audio": an_object,
    "web_search_options": an_object,
    "prompt_cache_options": an_object,
}

# The model request is built from these: passed on from a client, they would
# replace what the server built.
_BUILT_BY_SERVER = frozenset(
    {"model", "messages", "input", "instructions", "tools", "stream", "stream_options"}
)


def _check_n(value: Any, param: str) -> None:
    if value != 1:
        raise bad("'n' must be 1: this server returns one choice per request", param)


def _check_logprobs(value: Any, param: str) -> None:
    if value:
        raise bad(f"'{param}' is not supported by this server", param)


def _check_modalities(value: Any, param: str) -> None:
    if value != ["text"]:
        raise bad("only the 'text' modality is supported", param)


def _refuse(why: str) -> FieldCheck:
    def check(value: Any, param: str) -> None:
        raise bad(why, param)

    return check


UNSUPPORTED: dict[str, FieldCheck] = {
    "n": _check_n,
    "logprobs": _check_logprobs,
    "top_logprobs": _check_logprobs,
    "modalities": _check_modalities,
    "functions": _refuse("'functions' is not supported: send 'tools'"),
    "function_call": _refuse("'function_call' is not supported: send 'tool_choice'"),
}
"""What the server could not honour, on either endpoint: 400 naming the
field unless it asks for no more than the server does anyway."""


def refuse_unsupported(body: Mapping[str, object]) -> None:
    check_fields(body, UNSUPPORTED)


def extra_params(
    body: Mapping[str, object],
    known: Set[str],
    policy: ExtraParams,
    checks: Mapping[str, FieldCheck] = DOCUMENTED_EXTRAS,
) -> dict[str, Any]:
    """The fields of ``body`` the endpoint does not use (not in ``known``),
    to pass on to the model as they are: all of them with ``pass``, none
    with ``drop``; with ``reject`` the first one is a 400 naming it.

    A field with a check in ``checks`` (one OpenAI documents) of the wrong
    type is a 400 whatever the policy; a null one means "not set" and is
    left out.
    """
    extras: dict[str, Any] = {}
    for key, value in body.items():
        if key in known or key in UNSUPPORTED:
            continue
        if key in _BUILT_BY_SERVER:
            raise bad(f"'{key}' is not a field of this endpoint", key, "unknown_parameter")
        if value is None:
            continue
        check = checks.get(key)
        if check is not None:
            check(value, key)
        if policy == "reject":
            raise bad(
                f"'{key}' is not used by this server, which is set to refuse such fields "
                "(api_server.extra_params: reject)",
                key,
                "unknown_parameter",
            )
        if policy == "pass":
            extras[key] = value
    return extras


def optional_bool(body: Mapping[str, object], key: str, default: bool) -> bool:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad(f"'{key}' must be true or false", key)
    return value


def optional_str(body: Mapping[str, object], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise bad(f"'{key}' must be a string", key)
    return value


def number(body: Mapping[str, object], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    # bool is an int subclass, but `true` is no temperature.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad(f"'{key}' must be a number", key)
    if not low <= value <= high:
        raise bad(f"'{key}' must be between {low:g} and {high:g}, got {value}", key)
    return value


def positive_int(body: Mapping[str, object], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad(f"'{key}' must be a positive integer", key)
    return value


def stream_options(body: Mapping[str, object], stream: bool) -> dict[str, object] | None:
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


def role_of(message: Mapping[str, object], where: str, roles: Set[str]) -> str:
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
