"""OpenAI-format errors: ``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

from ...endings import ErrorCode
from ...listener.errors import ErrorBody, error_body
from ...llm.errors import request_refused
from ...store import StoreError

__all__ = ["APIError", "error_status", "store_refused"]

# The status a client is told for a model server's refusal of its request:
# the model server's own, except FastAPI's 422, which OpenAI says as 400.
_RENAMED = {422: 400}


def error_status(code: str | None, model_status: int | None = None) -> int:
    """HTTP status for a turn that failed: 504 for a model timeout, the
    model server's 4xx when it refused the request itself (too long, a bad
    field, too many: see ``llm.errors.request_refused``), else 502. A
    401/403 from the model server stays a 502: its key is the server's, not
    the client's. A turn that crashed (``internal_error``) is a 500."""
    if code == ErrorCode.INTERNAL_ERROR:
        return 500
    if model_status is not None and request_refused(model_status):
        return _RENAMED.get(model_status, model_status)
    return 504 if code == ErrorCode.MODEL_TIMEOUT else 502


class APIError(Exception):
    """Raised anywhere in a request; the app renders it as OpenAI error JSON."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> ErrorBody:
        return error_body(self.message, status=self.status, param=self.param, code=self.code)


def store_refused(exc: StoreError) -> APIError:
    """The store's refusal as a client sees it: 503 (it is temporary), the
    store's code and message."""
    return APIError(exc.status, exc.message, code=exc.code)
