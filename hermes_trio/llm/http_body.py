"""Reading an httpx response body under trio without leaving async
generators behind.

httpx and httpcore hand a body up through a chain of nested async
generators (``Response.aiter_raw`` → the bound stream → the transport's
stream → httpcore's byte stream → its body reader; ``aiter_bytes`` adds one
more on top to decode). ``aclose()`` on the outer one stops only that one:
the inner ones stay suspended until the garbage collector finalises them,
which trio reports as a ``ResourceWarning`` each. That happens whenever a
reader stops between two pieces: it has what it wanted, it failed, or it
was cancelled while handing a piece on.

:func:`open_body` ends the chain instead: it closes the response, which
closes the connection under the generators, then reads on. The next read
fails (or ends) at the bottom, and that ends every generator on its way up.
It decodes gzip and deflate itself (what httpx decodes without extras), so
that a decoding error cannot strand ``aiter_raw`` inside ``aiter_bytes``.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
import trio

__all__ = ["end_body", "open_body"]

# Ending a closed body reads nothing from the network; this only bounds a
# transport that keeps producing after it was closed.
_END_DEADLINE = 1.0


@asynccontextmanager
async def open_body(
    response: httpx.Response, *, decode: bool = True
) -> AsyncIterator[AsyncIterator[bytes]]:
    """The body's pieces: decoded, or as they came (``decode=False``: no
    content decoding). However the block ends, the response is closed and
    nothing of its body is left running."""
    if response.is_stream_consumed:
        # Already read (a transport that answered with whole content).
        yield _Pieces([response.content] if response.content else [])
        return
    raw = response.aiter_raw()
    pieces: AsyncIterator[bytes] = raw
    if decode:
        decoders = _decoders(response)
        if decoders is None:
            # An encoding httpx decodes with an extra package (br, zstd).
            raw = pieces = response.aiter_bytes()
        elif decoders:
            pieces = _Decoded(raw, decoders, response.request)
    try:
        yield pieces
    finally:
        await end_body(response, raw)


async def end_body(response: httpx.Response, pieces: AsyncIterator[bytes]) -> None:
    """Close ``response`` and run ``pieces`` (its ``aiter_raw`` or
    ``aiter_bytes``) to its end. Shielded: a cancelled reader still leaves
    nothing behind."""
    with trio.move_on_after(_END_DEADLINE, shield=True):
        await response.aclose()
        try:
            async for _ in pieces:
                pass
        except Exception:
            # The read after the close fails by design; that failure is
            # what ends the generators.
            pass
        # Already ended, unless the deadline cut the reading short.
        aclose = getattr(pieces, "aclose", None)
        if aclose is not None:
            await aclose()


class _Pieces:
    """A body already in memory, as an iterator (not a generator)."""

    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = pieces

    def __aiter__(self) -> _Pieces:
        return self

    async def __anext__(self) -> bytes:
        await trio.lowlevel.checkpoint()
        if not self._pieces:
            raise StopAsyncIteration
        return self._pieces.pop(0)


_Decode = Callable[[bytes, bool], bytes]


class _Decoded:
    """``raw`` decoded; an iterator class, so a decoding error leaves
    ``raw`` to :func:`end_body` instead of stranding it."""

    def __init__(
        self, raw: AsyncIterator[bytes], decoders: list[_Decode], request: httpx.Request
    ) -> None:
        self._raw = raw
        self._decoders = decoders
        self._request = request
        self._ended = False

    def __aiter__(self) -> _Decoded:
        return self

    async def __anext__(self) -> bytes:
        while not self._ended:
            try:
                piece = await anext(self._raw)
                last = False
            except StopAsyncIteration:
                piece, last = b"", True
                self._ended = True
            try:
                for decode in self._decoders:
                    piece = decode(piece, last)
            except zlib.error as exc:
                raise httpx.DecodingError(str(exc), request=self._request) from exc
            if piece:
                return piece
        raise StopAsyncIteration


def _decoders(response: httpx.Response) -> list[_Decode] | None:
    """The decoders for the body's ``Content-Encoding``, in the order to
    apply them (the reverse of the header's); None if one is not gzip or
    deflate."""
    out: list[_Decode] = []
    for value in response.headers.get_list("content-encoding", split_commas=True):
        encoding = value.strip().lower()
        if encoding in ("", "identity"):
            continue
        if encoding == "gzip":
            out.append(_zlib_decoder(zlib.MAX_WBITS | 16))
        elif encoding == "deflate":
            out.append(_deflate_decoder())
        else:
            return None
    out.reverse()
    return out


def _zlib_decoder(wbits: int) -> _Decode:
    decompressor = zlib.decompressobj(wbits)

    def decode(data: bytes, last: bool) -> bytes:
        out = decompressor.decompress(data)
        return out + decompressor.flush() if last else out

    return decode


def _deflate_decoder() -> _Decode:
    # "deflate" should be zlib-wrapped, but servers also send it raw; the
    # first piece tells which (as httpx decides it).
    inner: _Decode | None = None

    def decode(data: bytes, last: bool) -> bytes:
        nonlocal inner
        if inner is not None:
            return inner(data, last)
        if not data and not last:
            return b""
        inner = _zlib_decoder(zlib.MAX_WBITS)
        try:
            return inner(data, last)
        except zlib.error:
            inner = _zlib_decoder(-zlib.MAX_WBITS)
            return inner(data, last)

    return decode
