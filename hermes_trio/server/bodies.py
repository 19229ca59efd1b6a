"""HTTP bodies the chat and Responses endpoints handle alike: the JSON
request body, and SSE response bodies produced while they are sent."""

from __future__ import annotations

import json
from abc import abstractmethod
from types import TracebackType
from typing import Any, Self

from quart import Response, request
from quart.wrappers.response import ResponseBody

from .errors import APIError

__all__ = ["StreamedBody", "read_json_body", "sse_response"]


async def read_json_body() -> Any:
    """The request body parsed as JSON; 400 ``invalid_json`` otherwise."""
    raw = await request.get_data(cache=False)
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise APIError(400, f"invalid JSON in request body: {exc}", code="invalid_json") from None


class StreamedBody(ResponseBody):
    """A response body whose bytes are made while it is sent.

    Quart sends a body inside ``async with body:`` and leaves that block
    however the send ends — done, failed, or the client gone — so
    :meth:`close` is the one place where the producer learns that nobody
    reads any more.
    """

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __aiter__(self) -> Self:
        return self

    @abstractmethod
    async def __anext__(self) -> bytes: ...

    @abstractmethod
    def close(self) -> None: ...


def sse_response(body: ResponseBody | bytes) -> Response:
    response = Response(body, status=200, content_type="text/event-stream")
    response.headers["Cache-Control"] = "no-cache"
    # Proxies such as nginx would otherwise hold events back in a buffer.
    response.headers["X-Accel-Buffering"] = "no"
    # Quart would cut a long stream after RESPONSE_TIMEOUT (DESIGN §7).
    response.timeout = None
    return response
