"""HTTP bodies the chat and Responses endpoints handle alike: the JSON
request body, and SSE response bodies produced while they are sent."""

from __future__ import annotations

import contextlib
import json
import weakref
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar

import trio
from quart import Response, request
from quart.wrappers.response import ResponseBody

from ... import metrics
from ...consumers.sse import parse_extensions
from ...store import owner_scope
from ..parsing.errors import APIError
from ..parsing.request_json import parse_request_json
from .gate import content_type_refusal

__all__ = [
    "JsonBody",
    "StreamedBody",
    "bearer_token",
    "json_response",
    "read_json",
    "read_json_body",
    "request_owner",
    "sse_response",
    "stream_extensions",
    "validate_body",
]

T = TypeVar("T")

THREAD_PARSE_BYTES = 256 * 1024
"""Bodies from this size on are parsed in a worker thread (orjson takes
about a millisecond per 500 KB; the thread hand-off about 0.1 ms)."""


def bearer_token() -> str:
    """The request's ``Authorization: Bearer`` token, or "" without one."""
    given = request.headers.get("Authorization", "")
    return given[7:] if given[:7].lower() == "bearer " else ""


def stream_extensions() -> frozenset[str]:
    """The opt-in stream extensions the request asks for; 400 naming an
    unknown one."""
    try:
        return parse_extensions(request.headers.get("X-Hermes-Stream-Extensions", ""))
    except ValueError as exc:
        raise APIError(400, str(exc), param="X-Hermes-Stream-Extensions") from None


def request_owner() -> str:
    """Whose sessions and stored responses this request may see."""
    return owner_scope(bearer_token())


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    response = Response(
        json.dumps(body, ensure_ascii=False), status=status, content_type="application/json"
    )
    response.headers.update(headers or {})
    return response


def _as_is(body: Any) -> Any:
    return body


@dataclass(frozen=True)
class JsonBody:
    """A request body parsed as JSON, and how many bytes it had: what
    decides whether later work on it leaves the event loop."""

    value: Any
    size: int


async def read_json_body(validate: Callable[[Any], T] = _as_is) -> T:
    """The request body parsed as JSON and checked by ``validate`` (pure);
    a 400 naming the problem otherwise.

    A big body is parsed and checked in a worker thread, so the checks (in
    Python) no longer hold up the event loop and every other stream with
    it. orjson's own parse still holds the GIL while it runs, but takes a
    fraction of the time the standard library took.
    """
    raw = await _read_raw()
    if len(raw) < THREAD_PARSE_BYTES:
        return validate(parse_request_json(raw))
    return await trio.to_thread.run_sync(_parse_and_validate, raw, validate)


async def read_json() -> JsonBody:
    """The request body parsed as JSON, to be completed and then checked
    with :func:`validate_body`."""
    raw = await _read_raw()
    if len(raw) < THREAD_PARSE_BYTES:
        return JsonBody(parse_request_json(raw), len(raw))
    return JsonBody(await trio.to_thread.run_sync(parse_request_json, raw), len(raw))


async def validate_body(validate: Callable[[Any], T], body: Any, size: int) -> T:
    """``validate(body)`` for a body already parsed (and then completed, as
    item references are), off the event loop when it came from ``size``
    bytes or more: the bytes actually read, whether or not the client
    declared a length."""
    if size < THREAD_PARSE_BYTES:
        return validate(body)
    return await trio.to_thread.run_sync(validate, body)


async def _read_raw() -> bytes:
    # The gate refuses a body that does not say JSON before the app sees
    # it; this is the one place bodies are parsed, so it checks again
    # rather than trust every way a body can arrive.
    refusal = content_type_refusal(request.headers.get("Content-Type"))
    if refusal is not None:
        raise APIError(refusal.status, refusal.message, param=refusal.param, code=refusal.code)
    # All three spelled out: only then do quart's overloads say bytes.
    return await request.get_data(cache=False, as_text=False, parse_form_data=False)


def _parse_and_validate(raw: bytes, validate: Callable[[Any], T]) -> T:
    return validate(parse_request_json(raw))


class StreamedBody(ResponseBody):
    """A response body whose bytes are made while it is sent.

    Quart sends a body inside ``async with body:`` and leaves that block
    however the send ends — done, failed, or the client gone — so
    :meth:`close` is the one place where the producer learns that nobody
    reads any more. A client can also be gone before that block is entered
    (cancelled while the response's head is written): the body is then
    dropped unsent, and ``release`` (given by the subclass, free of
    references to the body) runs in its stead.
    """

    def __init__(self, release: Callable[[], None]) -> None:
        token = trio.lowlevel.current_trio_token()
        # Dropped bodies are collected wherever the last reference goes, a
        # worker thread included: the release runs in trio's own thread.
        self._unsent = weakref.finalize(self, _run_in_trio, token, release)

    async def __aenter__(self) -> Self:
        # Being sent: close() says when it ends.
        self._unsent.detach()
        metrics.OPEN_STREAMS.inc()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        metrics.OPEN_STREAMS.dec()
        self.close()

    def __aiter__(self) -> Self:
        return self

    @abstractmethod
    async def __anext__(self) -> bytes: ...

    @abstractmethod
    def close(self) -> None: ...


def _run_in_trio(token: trio.lowlevel.TrioToken, release: Callable[[], None]) -> None:
    with contextlib.suppress(trio.RunFinishedError):
        token.run_sync_soon(release)


def sse_response(body: ResponseBody | bytes) -> Response:
    response = Response(body, status=200, content_type="text/event-stream")
    response.headers["Cache-Control"] = "no-cache"
    # Proxies such as nginx would otherwise hold events back in a buffer.
    response.headers["X-Accel-Buffering"] = "no"
    # Quart would silently cut a long stream after RESPONSE_TIMEOUT (60 s).
    response.timeout = None
    return response
