"""Errors the model client raises once it has given up."""

from __future__ import annotations

from ..redaction import redact

__all__ = ["NO_MODEL_SERVER", "ModelError"]

# Every command says the same when no model server is configured.
NO_MODEL_SERVER = (
    "no model server configured: set model.base_url in config.yaml, "
    "HERMES_MODEL_BASE_URL or OPENAI_BASE_URL (an OpenAI-compatible URL ending in /v1), "
    "or pass --base-url"
)


class ModelError(Exception):
    """The model server could not give an answer.

    ``code`` is ``model_unreachable`` (no connection), ``model_timeout`` (a
    timeout fired) or ``model_error`` (the server answered with an error).

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
