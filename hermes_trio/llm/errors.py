"""Errors the model client raises once it has given up."""

from __future__ import annotations

from ..endings import ErrorCode
from ..redaction import redact

__all__ = ["NO_MODEL_SERVER", "REQUEST_FAULTS", "ModelError", "request_refused"]

# Every command says the same when no model server is configured.
NO_MODEL_SERVER = (
    "no model server configured: set model.base_url in config.yaml, "
    "HERMES_MODEL_BASE_URL or OPENAI_BASE_URL (an OpenAI-compatible URL ending in /v1), "
    "or pass --base-url"
)


# The model server's 4xx answers that say the request itself was wrong (too
# long, a bad field, too many): the same request would fail anywhere, so the
# caller gets the model server's own words and code. 422 is FastAPI's
# validation status. Not here: 401/403 (the server's own key is wrong or
# lacks a permission, a fault that is ours, not the caller's), 404 (our base
# URL or configured model name), 405/407/408/415 (how we talk to the model
# server). Which HTTP status an API client then sees is the server's
# business (``hermes_trio.server.parsing.errors.error_status``).
REQUEST_FAULTS = frozenset({400, 413, 422, 429})


def request_refused(model_status: int | None) -> bool:
    """Whether the model server refused a request because of the request."""
    return model_status in REQUEST_FAULTS


class ModelError(Exception):
    """The model server could not give an answer.

    ``code`` is one of :class:`~hermes_trio.endings.ErrorCode`:
    ``model_unreachable`` (no connection), ``model_timeout`` (a timeout
    fired) or ``model_error`` (the server answered with an error),
    or, when the model server refused the request itself (see
    :func:`request_refused`), the server's own error code where it gave one
    (``context_length_exceeded``). ``status`` is the model server's HTTP
    status when it answered with one; ``cause`` the name of the HTTP
    client's exception (``ConnectError``, ``ReadTimeout``) when the
    connection failed, and ``timed_out`` whether that was a timeout.

    The message is redacted as the error is made: it usually quotes the
    model server, which may echo the API key it was sent, and it goes on to
    API clients, chat users and logs.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = ErrorCode.MODEL_ERROR,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        cause: str | None = None,
        timed_out: bool = False,
    ) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.cause = cause
        self.timed_out = timed_out
