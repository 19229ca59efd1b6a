"""The HTTP client a streamable-HTTP MCP server is reached with, which
stops reading an answer once it passes the server's ``max_result_bytes``.

The SDK reads a JSON answer whole (``response.aread()``), however large:
a tool that returns 50 MB would be held in memory, several times over as it
is parsed, before anyone could look at its size. :class:`CappedTransport`
counts each answer's bytes as they arrive and fails the read past the cap,
which closes the connection: the server is read no further. The error is
both an ``httpx2.StreamError`` and an ``httpx2.SSEError``, the two the
SDK turns into an error answer for the pending request (a JSON answer and
an SSE stream respectively), so the call ends at once with our message in
it. The long-lived ``GET`` stream of server notifications is not counted
as one answer; the SDK bounds each of its events (``max_sse_event_size``,
set to the same cap).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2

from .naming import too_large

__all__ = ["CappedTransport", "ResultTooLarge", "capped_client"]

# The SDK's own defaults: 30 s to connect and write, 5 min between reads
# (a server may hold a stream open while a tool runs).
_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


class ResultTooLarge(httpx2.StreamError, httpx2.SSEError):
    """An answer passed the cap; its text is what the model is told."""

    def __init__(self, size: int | None, limit: int) -> None:
        httpx2.StreamError.__init__(self, too_large(size, limit))


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, declared: int | None) -> None:
        self._inner = inner
        self._limit = limit
        self._declared = declared

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._declared is not None and self._declared > self._limit:
            raise ResultTooLarge(self._declared, self._limit)
        seen = 0
        chunks = self._inner.__aiter__()
        try:
            async for chunk in chunks:
                seen += len(chunk)
                if seen > self._limit:
                    raise ResultTooLarge(None, self._limit)
                yield chunk
        finally:
            # Left early, the inner generator is closed now, not when collected.
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()

    async def aclose(self) -> None:
        await self._inner.aclose()


class CappedTransport(httpx2.AsyncBaseTransport):
    """``inner``, with every answer to a ``POST`` (one JSON-RPC request's
    answer) cut off past ``limit`` bytes of body."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if request.method != "POST":
            return response
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        length = response.headers.get("content-length", "")
        declared = int(length) if length.isdigit() else None
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_CappedStream(response.stream, self._limit, declared),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def capped_client(headers: dict[str, str], limit: int) -> httpx2.AsyncClient:
    """A client like the SDK's own (``create_mcp_http_client``: its
    timeouts, no redirects followed by httpx) whose answers stop at ``limit``."""
    transport = CappedTransport(httpx2.AsyncHTTPTransport(), limit)
    return httpx2.AsyncClient(headers=headers, timeout=_TIMEOUT, transport=transport)
