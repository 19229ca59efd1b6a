"""JSON as the scripted model writes it: compact, deterministic, and the
OpenAI error body."""

from __future__ import annotations

import functools
import json
from typing import Any

__all__ = ["CREATED", "dumps", "dumps_str", "error_body"]

# A fixed `created` keeps responses deterministic; wall-clock time has no
# business in a scripted model (time comes from trio).
CREATED = 1_700_000_000

dumps_str = functools.partial(json.dumps, ensure_ascii=False, separators=(",", ":"))


def dumps(obj: Any) -> bytes:
    return dumps_str(obj).encode()


_ERROR_DEFAULTS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("requests", "rate_limit_exceeded"),
}


def error_body(
    status: int, message: str, type_: str | None = None, code: str | None = None, param: Any = None
) -> bytes:
    """``{"error": {...}}`` with the type and code OpenAI uses for ``status``
    unless given."""
    default_type, default_code = _ERROR_DEFAULTS.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return dumps(
        {
            "error": {
                "message": message,
                "type": type_ or default_type,
                "param": param,
                "code": code if code is not None else default_code,
            }
        }
    )
