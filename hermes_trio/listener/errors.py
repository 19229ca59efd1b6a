"""The error body every HTTP answer of this project uses, from the app or
from below it: ``{"error": {"message", "type", "param", "code"}}`` (the
OpenAI shape, which clients of the API server already parse)."""

from __future__ import annotations

from typing import TypedDict

__all__ = ["ErrorBody", "ErrorObject", "error_body"]


class ErrorObject(TypedDict):
    """OpenAI's ``Error`` object."""

    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(TypedDict):
    """OpenAI's ``ErrorResponse``: the body of every error answer."""

    error: ErrorObject


_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "upstream_error",
    503: "server_error",
    504: "upstream_timeout",
}


def error_body(
    message: str, *, status: int, param: str | None = None, code: str | None = None
) -> ErrorBody:
    return {
        "error": {
            "message": message,
            "type": _TYPES.get(
                status, "server_error" if status >= 500 else "invalid_request_error"
            ),
            "param": param,
            "code": code,
        }
    }
