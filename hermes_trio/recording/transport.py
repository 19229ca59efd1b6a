"""The tap under the model client's HTTP client: a recorded turn's
requests and their answers, piece by piece, copied onto its tape."""

from __future__ import annotations

from typing import Any, cast

import httpx
import trio

from .recorder import Exchange, current_tape

__all__ = ["TapTransport"]


class TapTransport(httpx.AsyncBaseTransport):
    """``inner`` with every request of a recorded turn copied onto its tape;
    requests outside a recorded turn pass straight through."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        tape = current_tape()
        if tape is None:
            return await self.inner.handle_async_request(request)
        exchange = tape.exchange(request)
        try:
            response = await self.inner.handle_async_request(request)
        except trio.Cancelled:
            exchange.end("closed")
            raise
        except BaseException as exc:
            exchange.end("error", exc)
            raise
        exchange.head(response)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_TapStream(response.stream, exchange),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _TapStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream | httpx.AsyncByteStream, exchange: Exchange):
        self.inner = cast(httpx.AsyncByteStream, inner)
        self.exchange = exchange
        self.pieces: Any = None

    def __aiter__(self) -> _TapStream:
        self.pieces = self.inner.__aiter__()
        return self

    async def __anext__(self) -> bytes:
        try:
            data: bytes = await self.pieces.__anext__()
        except StopAsyncIteration:
            self.exchange.end("eom")
            raise
        except trio.Cancelled:
            self.exchange.end("closed")
            raise
        except BaseException as exc:
            self.exchange.end("error", exc)
            raise
        self.exchange.piece(data)
        return data

    async def aclose(self) -> None:
        self.exchange.end("closed")
        await self.inner.aclose()
