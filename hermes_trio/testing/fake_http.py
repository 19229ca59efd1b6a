"""A tiny HTTP/1.1 server on trio and h11 for the fake platform APIs, and
the same handlers as an in-process httpx transport.

One coroutine handles one request: it gets the whole request (body read) and
returns the whole response. Keep-alive works, so the code under test reuses
connections the way it would against the real service. The server runs in
its own nursery and stops when the ``async with`` block ends.

``FakeTransport(fake.handle)`` serves the same fake without a socket, so an
adapter's polling, backoff and rate limits can be tested on trio's
``MockClock``.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from http import HTTPStatus
from typing import Any

import h11
import httpx
import trio

__all__ = [
    "FakeRequest",
    "FakeResponse",
    "FakeTransport",
    "Handler",
    "serve_http",
    "server_nursery",
]

log = logging.getLogger(__name__)

_RECV_SIZE = 65536
_MAX_BODY = 16 * 1024 * 1024


@dataclass(frozen=True)
class FakeRequest:
    method: str
    target: str
    path: str
    query: dict[str, str]
    #: Header names lower-cased; a repeated header keeps its last value.
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def json_or_none(self) -> Any:
        """The JSON body, or None when there is none or it is not JSON
        (for fakes that record what they were sent before judging it)."""
        try:
            return self.json() if self.body else None
        except ValueError:
            return None

    def params(self) -> dict[str, Any]:
        """Query string merged with a JSON or form body (body wins)."""
        merged: dict[str, Any] = dict(self.query)
        ctype = self.headers.get("content-type", "")
        if self.body and "json" in ctype:
            body = self.json()
            if isinstance(body, dict):
                merged.update(body)
        elif self.body and "x-www-form-urlencoded" in ctype:
            merged.update(urllib.parse.parse_qsl(self.body.decode(), keep_blank_values=True))
        return merged


@dataclass
class FakeResponse:
    status: int = 200
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def json(
        cls, obj: Any, status: int = 200, headers: list[tuple[str, str]] | None = None
    ) -> FakeResponse:
        body = json.dumps(obj, ensure_ascii=False).encode()
        return cls(status, body, [("content-type", "application/json"), *(headers or [])])

    @classmethod
    def text(cls, text: str, status: int = 200) -> FakeResponse:
        return cls(status, text.encode(), [("content-type", "text/plain; charset=utf-8")])


Handler = Callable[[FakeRequest], Awaitable[FakeResponse]]


@asynccontextmanager
async def serve_http(
    handler: Handler, *, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[str]:
    """Serve ``handler`` on ``host:port`` (0: any free port); yields the base
    URL, e.g. ``http://127.0.0.1:54321``.

    An exception raised in the ``async with`` body comes out as itself, not
    wrapped in the server nursery's exception group, so tests can use
    ``pytest.raises`` around the whole block."""
    async with server_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_tcp, partial(_connection, handler), port, host=host)
        )
        bound_port = listeners[0].socket.getsockname()[1]
        url_host = f"[{host}]" if ":" in host else host
        yield f"http://{url_host}:{bound_port}"


@asynccontextmanager
async def server_nursery() -> AsyncIterator[trio.Nursery]:
    """A nursery for a fake server's tasks, cancelled when the block ends.

    An exception raised in the block comes out as itself, not wrapped in the
    nursery's exception group, so tests can ``pytest.raises`` around it."""
    body_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                yield nursery
            except BaseException as exc:
                body_error = exc
                raise
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if body_error is not None and list(group.exceptions) == [body_error]:
            raise body_error from None
        raise


async def _connection(handler: Handler, stream: trio.SocketStream) -> None:
    conn = h11.Connection(h11.SERVER)
    try:
        while True:
            request = await _read_request(conn, stream)
            if request is None:
                return
            response = await _handle(handler, request)
            await _write_response(conn, stream, response)
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()
    except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
        return
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


async def _read_request(conn: h11.Connection, stream: trio.SocketStream) -> FakeRequest | None:
    head: h11.Request | None = None
    chunks: list[bytes] = []
    size = 0
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(_RECV_SIZE)
            conn.receive_data(data)
            continue
        if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
            return None
        if isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            size += len(event.data)
            if size > _MAX_BODY:
                raise h11.RemoteProtocolError("request body too large")
            chunks.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None
            return _fake_request(
                head.method.decode("ascii"),
                head.target.decode("latin-1"),
                [(k.decode("latin-1"), v.decode("latin-1")) for k, v in head.headers],
                b"".join(chunks),
            )


def _fake_request(
    method: str, target: str, headers: list[tuple[str, str]], body: bytes
) -> FakeRequest:
    split = urllib.parse.urlsplit(target)
    return FakeRequest(
        method=method,
        target=target,
        path=urllib.parse.unquote(split.path),
        query=dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True)),
        headers={k.lower(): v for k, v in headers},
        body=body,
    )


async def _handle(handler: Handler, request: FakeRequest) -> FakeResponse:
    try:
        return await handler(request)
    except Exception:
        # A bug in a fake should be loud in the test log, not a hang.
        log.exception("fake server handler failed for %s %s", request.method, request.path)
        return FakeResponse.text("internal error in fake server", 500)


async def _write_response(
    conn: h11.Connection, stream: trio.SocketStream, response: FakeResponse
) -> None:
    headers = [(k.encode(), v.encode()) for k, v in response.headers]
    headers.append((b"content-length", str(len(response.body)).encode()))
    try:
        reason = HTTPStatus(response.status).phrase.encode()
    except ValueError:
        reason = b""
    data = conn.send(h11.Response(status_code=response.status, headers=headers, reason=reason))
    data += conn.send(h11.Data(data=response.body)) if response.body else b""
    data += conn.send(h11.EndOfMessage())
    await stream.send_all(data)


class FakeTransport(httpx.AsyncBaseTransport):
    """A fake platform API's handler as an httpx transport: no socket and no
    thread, so it is safe under ``MockClock(autojump_threshold=0)``.

    ``httpx.AsyncClient(transport=FakeTransport(fake.handle))`` gives the
    adapter under test a client that reaches ``fake`` whatever host its URL
    names. Requests and responses are whole, as on the server.
    """

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        # A request on the wire is a checkpoint; so is this one.
        await trio.lowlevel.checkpoint()
        fake = _fake_request(
            request.method,
            request.url.raw_path.decode("ascii"),
            list(request.headers.multi_items()),
            body,
        )
        response = await _handle(self.handler, fake)
        headers = [*response.headers, ("content-length", str(len(response.body)))]
        return httpx.Response(
            response.status, headers=headers, content=response.body, request=request
        )
