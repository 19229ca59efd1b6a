"""An httpx transport whose keep-alive pool costs O(1) per request.

httpcore's ``AsyncConnectionPool`` rescans every connection it holds on each
request start and end (and probes each idle socket while doing so): with
fifty streams open that scan cost more CPU than the tokens themselves. Here
each origin keeps a stack of idle HTTP/1.1 connections; a request takes the
most recently used one (one expiry probe) or opens a new one, and its
response hands the connection back when it is closed having been read to its
end. The connections are httpcore's own, so the wire behaviour and timeouts
are httpx's; :class:`PooledTransport` is an httpx transport of our own (its
public ``AsyncBaseTransport``) that maps httpcore's exceptions to httpx's as
httpx's own transport does.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import cast

import httpcore
import httpx
import trio
from httpcore._backends.trio import TrioStream

__all__ = ["SOCKET_READS", "PooledTransport", "SocketReads"]



class SocketReads:
    """How many reads the pool's connections have made from their sockets,
    all together. Trio makes every stream read a checkpoint, and a task
    runs only while every other one is suspended: a reader that sees the
    count changed since it last looked has passed a checkpoint since. The
    model client uses it to skip a checkpoint of its own per paced token."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


SOCKET_READS = SocketReads()


_Key = tuple[bytes, bytes, int]


def _key(origin: httpcore.Origin) -> _Key:
    # httpcore.Origin compares by value but is not hashable.
    return (origin.scheme, origin.host, origin.port)


class PooledTransport(httpx.AsyncBaseTransport):
    """An httpx transport (its public ``AsyncBaseTransport`` interface) over
    :class:`IdlePool`: the request and response conversion, and the
    mapping of httpcore's exceptions to httpx's, are those of httpx's own
    ``AsyncHTTPTransport``, done here with public names only."""

    def __init__(self, *, max_idle: int = 64, keepalive_expiry: float = 5.0) -> None:
        self._idle_pool = IdlePool(
            ssl_context=httpx.create_ssl_context(),
            max_idle=max_idle,
            keepalive_expiry=keepalive_expiry,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        url = request.url
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            answer = await self._idle_pool.handle_async_request(core)
        assert isinstance(answer.stream, _PooledBody)
        return httpx.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=answer.stream,
            extensions=answer.extensions,
        )

    async def aclose(self) -> None:
        await self._idle_pool.aclose()


# httpcore's exceptions and the httpx ones a client expects in their place,
# most specific first (as httpx's own transport maps them).
_HTTPX_ERRORS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


_HTTPCORE_ERRORS = tuple(core for core, _ in _HTTPX_ERRORS)


@contextmanager
def _as_httpx_errors() -> Iterator[None]:
    """httpcore's exceptions raised as httpx's; any other one as it is."""
    try:
        yield
    except _HTTPCORE_ERRORS as exc:
        ours = next(ours for core, ours in _HTTPX_ERRORS if isinstance(exc, core))
        raise ours(str(exc)) from exc


class IdlePool:
    """Per-origin stacks of idle connections; no limit on open ones."""

    def __init__(
        self, *, ssl_context: ssl.SSLContext, max_idle: int, keepalive_expiry: float
    ) -> None:
        self._ssl_context = ssl_context
        self._max_idle = max_idle
        self._keepalive_expiry = keepalive_expiry
        self._idle: dict[_Key, list[httpcore.AsyncHTTPConnection]] = {}
        self._busy: set[httpcore.AsyncHTTPConnection] = set()

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        origin = request.url.origin
        reused = await self._take_idle(origin)
        connection = reused or self._new(origin)
        try:
            response = await self._send(connection, request)
        except httpcore.ConnectionNotAvailable:
            if reused is None:
                raise
            # Refused before a byte was written (it stopped being idle), so
            # a fresh connection may send it. Any later failure may follow a
            # request the server already acted on: that is the caller's call.
            response = await self._send(connection := self._new(origin), request)
        assert isinstance(response.stream, AsyncIterable)
        return httpcore.Response(
            status=response.status,
            headers=response.headers,
            content=_PooledBody(response.stream, connection, origin, self),
            extensions=response.extensions,
        )

    async def _send(
        self, connection: httpcore.AsyncHTTPConnection, request: httpcore.Request
    ) -> httpcore.Response:
        self._busy.add(connection)
        try:
            return await connection.handle_async_request(request)
        except BaseException:
            self._busy.discard(connection)
            with trio.CancelScope(shield=True):
                await connection.aclose()
            raise

    def _new(self, origin: httpcore.Origin) -> httpcore.AsyncHTTPConnection:
        return httpcore.AsyncHTTPConnection(
            origin=origin,
            ssl_context=self._ssl_context,
            keepalive_expiry=self._keepalive_expiry,
            http1=True,
            http2=False,
            network_backend=_BACKEND,
        )

    async def _take_idle(self, origin: httpcore.Origin) -> httpcore.AsyncHTTPConnection | None:
        stack = self._idle.get(_key(origin))
        while stack:
            connection = stack.pop()
            # has_expired also notices a server that closed the socket.
            if connection.is_idle() and not connection.has_expired():
                return connection
            await connection.aclose()
        return None

    async def release(
        self, connection: httpcore.AsyncHTTPConnection, origin: httpcore.Origin
    ) -> None:
        """A response on ``connection`` was closed: keep it if it can serve again."""
        self._busy.discard(connection)
        stack = self._idle.setdefault(_key(origin), [])
        if connection.is_idle() and len(stack) < self._max_idle:
            stack.append(connection)
        elif not connection.is_closed():
            await connection.aclose()

    async def aclose(self) -> None:
        connections = [*self._busy, *(c for stack in self._idle.values() for c in stack)]
        self._busy.clear()
        self._idle.clear()
        for connection in connections:
            await connection.aclose()

    async def __aenter__(self) -> IdlePool:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        await self.aclose()


class _PooledBody(httpx.AsyncByteStream):
    """The response body (httpcore's errors as httpx's, read by read: an
    iterator, not a generator, so nothing of it is left suspended); closing
    it returns the connection to the pool."""

    def __init__(
        self,
        stream: AsyncIterable[bytes],
        connection: httpcore.AsyncHTTPConnection,
        origin: httpcore.Origin,
        pool: IdlePool,
    ) -> None:
        self._pieces = stream
        self._reading: AsyncIterator[bytes] | None = None
        self._connection = connection
        self._origin = origin
        self._owner = pool

    def __aiter__(self) -> AsyncIterator[bytes]:
        self._reading = self._pieces.__aiter__()
        return self

    async def __anext__(self) -> bytes:
        assert self._reading is not None
        with _as_httpx_errors():
            return await self._reading.__anext__()

    async def aclose(self) -> None:
        try:
            aclose = getattr(self._pieces, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            with trio.CancelScope(shield=True):
                await self._owner.release(self._connection, self._origin)


class _UnboundedReads(TrioStream):
    """httpcore's trio stream, less the cancel scope (and two context
    managers) each read opens for its timeout when it has none: the model
    client's reads have none (the watchdog bounds a stream's silence), and
    a paced stream reads about twice per token."""

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        SOCKET_READS.count += 1
        if timeout is not None:
            return await super().read(max_bytes, timeout)
        try:
            # As httpcore's own read: trio's streams give bytes here.
            return cast(bytes, await self._stream.receive_some(max_bytes))
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise httpcore.ReadError(exc) from exc  # as httpcore maps them

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109  (httpcore's interface)
    ) -> httpcore.AsyncNetworkStream:
        return _unbounded(await super().start_tls(ssl_context, server_hostname, timeout))


def _unbounded(stream: httpcore.AsyncNetworkStream) -> httpcore.AsyncNetworkStream:
    assert isinstance(stream, TrioStream)
    return _UnboundedReads(stream._stream)


class _Backend(httpcore.TrioBackend):
    """httpcore's trio backend whose streams are :class:`_UnboundedReads`."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109  (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return _unbounded(
            await super().connect_tcp(host, port, timeout, local_address, socket_options)
        )


_BACKEND = _Backend()
