"""The listener writes what the socket takes at once and waits only for
the rest: a client that reads slowly still gets every byte of a long
streamed answer, in order, and a client gone mid-answer ends the app's
writes without an error."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.config import Config as HypercornConfig
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, Scope

from hermes_trio.listener import listening_socket, serve_hypercorn

PIECE = bytes(range(256)) * 256  # 64 KiB
PIECES = 64  # 4 MiB: far more than the socket buffers hold


async def _app(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    for i in range(PIECES):
        await send({"type": "http.response.body", "body": bytes([i]) + PIECE, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


@asynccontextmanager
async def _serving() -> AsyncIterator[tuple[int, trio.Event]]:
    """The app behind the listener; stopped (and waited for) at the end."""
    stop = trio.Event()
    with listening_socket("127.0.0.1", 0) as sock:
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
        async with trio.open_nursery() as nursery:
            await nursery.start(
                serve_hypercorn, ASGIWrapper(_app), HypercornConfig(), listener, stop
            )
            yield sock.getsockname()[1], stop
            stop.set()


async def test_a_slow_reader_gets_every_byte_in_order() -> None:
    async with _serving() as (port, _):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            got = bytearray()
            with trio.fail_after(30):
                while data := await stream.receive_some(16384):
                    got += data
                    if len(got) < 1 << 20:
                        await trio.sleep(0.001)  # slow at first: the server's writes back up
        head, _, body = bytes(got).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        expected = b"".join(bytes([i]) + PIECE for i in range(PIECES))
        # Chunked framing around the pieces: take it off.
        unframed = bytearray()
        rest = body
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size, 16)
            unframed += rest[:n]
            rest = rest[n + 2 :]
            if n == 0:
                break
        assert hashlib.sha256(unframed).digest() == hashlib.sha256(expected).digest()


async def test_a_client_gone_mid_answer_ends_the_writes() -> None:
    with trio.fail_after(10):  # the server stops without hanging on the dead client
        async with _serving() as (port, _):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            await stream.receive_some(1000)
            # Closed with a reset: the server's next writes fail.
            stream.socket.setsockopt(
                trio.socket.SOL_SOCKET, trio.socket.SO_LINGER, struct.pack("ii", 1, 0)
            )
            await stream.aclose()
            await trio.sleep(0.2)
