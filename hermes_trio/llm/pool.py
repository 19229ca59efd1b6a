"""An httpx transport whose keep-alive pool costs O(1) per request.

httpcore's ``AsyncConnectionPool`` rescans every connection it holds on each
request start and end (and probes each idle socket while doing so): with
fifty streams open that scan cost more CPU than the tokens themselves. Here
each origin keeps a stack of idle HTTP/1.1 connections; a request takes the
most recently used one (one expiry probe) or opens a new one, and its
response hands the connection back when it is closed having been read to its
end. The connections are httpcore's own, so the wire behaviour, timeouts
and exception mapping are httpx's.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterable, AsyncIterator
from types import TracebackType

import httpcore
import httpx
import trio

__all__ = ["PooledTransport"]


_Key = tuple[bytes, bytes, int]


def _key(origin: httpcore.Origin) -> _Key:
    # httpcore.Origin compares by value but is not hashable.
    return (origin.scheme, origin.host, origin.port)


class PooledTransport(httpx.AsyncHTTPTransport):
    """``httpx.AsyncHTTPTransport`` with :class:`IdlePool` as its pool."""

    def __init__(self, *, max_idle: int = 64, keepalive_expiry: float = 5.0) -> None:
        ssl_context = httpx.create_ssl_context()
        super().__init__(verify=ssl_context, limits=httpx.Limits(max_keepalive_connections=0))
        self._pool = IdlePool(  # type: ignore[assignment]
            ssl_context=ssl_context,
            max_idle=max_idle,
            keepalive_expiry=keepalive_expiry,
        )


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


class _PooledBody:
    """The response body; closing it returns the connection to the pool."""

    def __init__(
        self,
        stream: AsyncIterable[bytes],
        connection: httpcore.AsyncHTTPConnection,
        origin: httpcore.Origin,
        pool: IdlePool,
    ) -> None:
        self._stream = stream
        self._connection = connection
        self._origin = origin
        self._pool = pool

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._stream.__aiter__()

    async def aclose(self) -> None:
        try:
            aclose = getattr(self._stream, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            with trio.CancelScope(shield=True):
                await self._pool.release(self._connection, self._origin)
