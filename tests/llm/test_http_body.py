"""Reading an httpx body with ``open_body``: however the reader stops (it
has enough, it fails, it is cancelled between two pieces), no async
generator of httpx or httpcore is left for the garbage collector, and the
body is decoded as httpx would."""

from __future__ import annotations

import gc
import warnings
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import httpx
import pytest
import trio

from hermes_trio.llm.http_body import open_body
from hermes_trio.llm.pool import PooledTransport
from hermes_trio.testing import ModelDouble, TextReply, open_scripted_server

STREAM = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
TOKENS = [f"t{n} " for n in range(50)]


@contextmanager
def no_generator_left() -> Iterator[None]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
        gc.collect()
    left = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert left == []


@asynccontextmanager
async def client_on(kind: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client on the scripted model: over a socket with httpx's own pool or
    with ours, or in process."""
    if kind == "double":
        double = ModelDouble([TextReply(tokens=TOKENS, delay=0.01)])
        async with httpx.AsyncClient(transport=double, base_url=double.base_url) as client:
            yield client
        return
    async with open_scripted_server([TextReply(tokens=TOKENS, delay=0.01)]) as server:
        transport = PooledTransport() if kind == "pooled" else None
        async with httpx.AsyncClient(transport=transport, base_url=server.base_url) as client:
            yield client


@pytest.mark.parametrize("kind", ["httpx", "pooled", "double"])
@pytest.mark.parametrize("decode", [True, False])
async def test_leaving_early_leaves_no_generator(kind: str, decode: bool) -> None:
    with no_generator_left():
        async with client_on(kind) as client:
            async with client.stream("POST", "/chat/completions", json=STREAM) as response:
                async with open_body(response, decode=decode) as pieces:
                    async for piece in pieces:
                        if b"t3 " in piece:
                            break
                assert response.is_closed


@pytest.mark.parametrize("kind", ["httpx", "pooled", "double"])
async def test_a_reader_cancelled_between_pieces_leaves_no_generator(kind: str) -> None:
    with no_generator_left():
        async with client_on(kind) as client:
            with trio.move_on_after(0.05) as scope:
                async with client.stream("POST", "/chat/completions", json=STREAM) as response:
                    async with open_body(response) as pieces:
                        async for _ in pieces:
                            # Cancelled here, not inside httpx's read.
                            await trio.sleep(1)
            assert scope.cancelled_caught


@pytest.mark.parametrize("kind", ["httpx", "pooled", "double"])
async def test_a_reader_that_fails_leaves_no_generator(kind: str) -> None:
    with no_generator_left():
        async with client_on(kind) as client:
            with pytest.raises(ValueError, match="enough"):
                async with client.stream("POST", "/chat/completions", json=STREAM) as response:
                    async with open_body(response) as pieces:
                        async for _ in pieces:
                            raise ValueError("enough")


class _Pieces(httpx.AsyncByteStream):
    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            await trio.lowlevel.checkpoint()
            yield piece


def _served(body: bytes, encoding: str, size: int = 7) -> httpx.AsyncClient:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-encoding": encoding}, stream=_Pieces(pieces))

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


def _deflate(data: bytes, wbits: int) -> bytes:
    compressor = zlib.compressobj(wbits=wbits)
    return compressor.compress(data) + compressor.flush()


TEXT = b"data: " + b"the quick brown fox " * 40 + b"\n\n"


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("identity", TEXT),
        ("gzip", _deflate(TEXT, 16 + zlib.MAX_WBITS)),
        ("deflate", _deflate(TEXT, zlib.MAX_WBITS)),
        ("deflate", _deflate(TEXT, -zlib.MAX_WBITS)),  # raw deflate, as some servers send
        ("gzip, deflate", _deflate(_deflate(TEXT, 16 + zlib.MAX_WBITS), zlib.MAX_WBITS)),
    ],
)
async def test_bodies_are_decoded_as_httpx_decodes_them(encoding: str, body: bytes) -> None:
    async with _served(body, encoding) as client:
        async with client.stream("GET", "http://upstream.test/") as response:
            async with open_body(response) as pieces:
                got = b"".join([piece async for piece in pieces])
        async with client.stream("GET", "http://upstream.test/") as response:
            expected = await response.aread()
    assert got == expected == TEXT


async def test_a_body_that_does_not_decode_is_an_error_and_leaves_no_generator() -> None:
    with no_generator_left(), pytest.raises(httpx.DecodingError):
        async with _served(b"not gzip at all", "gzip") as client:
            async with client.stream("GET", "http://upstream.test/") as response:
                async with open_body(response) as pieces:
                    async for _ in pieces:
                        pass


async def test_a_body_already_read_is_given_whole() -> None:
    answer = httpx.MockTransport(lambda request: httpx.Response(200, content=b"whole"))
    async with httpx.AsyncClient(transport=answer) as client:
        async with client.stream("GET", "http://upstream.test/") as response:
            async with open_body(response) as pieces:
                assert [piece async for piece in pieces] == [b"whole"]
