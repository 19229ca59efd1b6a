"""Errors the model client raises once it has given up."""

from __future__ import annotations

from ..redaction import redact

__all__ = ["NO_MODEL_SERVER", "ModelError", "caller_status"]

# Every command says the same when no model server is configured.
NO_MODEL_SERVER = (
    "no model server configured: set model.base_url in config.yaml, "
    "HERMES_MODEL_BASE_URL or OPENAI_BASE_URL (an OpenAI-compatible URL ending in /v1), "
    "or pass --base-url"
)


# The model server's 4xx answers that say the request itself was wrong, and
# the status the caller is told: the same request would fail anywhere. 422 is
# FastAPI's validation status; OpenAI says 400 for the same thing.
# Not here, and so a 502: 401/403 (the server's own key is wrong or lacks a
# permission: telling a client with a valid key "unauthorised" would send it
# hunting for a fault that is ours), 404 (our base URL or configured model
# name), 405/407/408/415 (how we talk to the model server).
_CALLER_STATUSES = {400: 400, 413: 413, 422: 400, 429: 429}


def caller_status(model_status: int | None) -> int | None:
    """The HTTP status to pass on when the model server refused a request
    because of the request (too long, a bad field, too many), else None."""
    return _CALLER_STATUSES.get(model_status) if model_status is not None else None


class ModelError(Exception):
    """The model server could not give an answer.

    ``code`` is ``model_unreachable`` (no connection), ``model_timeout`` (a
    timeout fired) or ``model_error`` (the server answered with an error),
    or, when the model server refused the request itself (see
    :func:`caller_status`), the server's own error code where it gave one
    (``context_length_exceeded``). ``status`` is the model server's HTTP
    status when it answered with one.

    The message is redacted as the error is made: it usually quotes the
    model server, which may echo the API key it was sent, and it goes on to
    API clients, chat users and logs.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "model_error",
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
