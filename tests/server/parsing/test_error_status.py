"""The HTTP status an API client sees for a turn that failed."""

from __future__ import annotations

import pytest

from hermes_trio.server.parsing.errors import error_status


@pytest.mark.parametrize(
    ("code", "model_status", "status"),
    [
        ("internal_error", None, 500),
        ("internal_error", 400, 500),
        ("model_timeout", None, 504),
        ("model_unreachable", None, 502),
        ("model_error", 500, 502),
        # The model server's key or our model name: ours to fix, not the client's.
        ("model_error", 401, 502),
        ("model_error", 403, 502),
        ("model_error", 404, 502),
        # The request's own fault is passed on, FastAPI's 422 as OpenAI's 400.
        ("context_length_exceeded", 400, 400),
        ("model_error", 413, 413),
        ("model_error", 422, 400),
        ("rate_limit_exceeded", 429, 429),
        (None, None, 502),
    ],
)
def test_error_status(code: str | None, model_status: int | None, status: int) -> None:
    assert error_status(code, model_status) == status
