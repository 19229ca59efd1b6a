"""Connection deadlines: the pure state machine, and the listener's
connection driving hypercorn's protocol on a socket pair under MockClock,
asserting when each close happens."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
import trio.testing
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.utils import wrap_app

from hermes_trio.listener.lifetime import (
    ConnectionLifetime,
    ConnectionLimits,
    Expiry,
    Phase,
    raw_error_response,
)
from hermes_trio.listener.listener import _Connection, _Connections

LIMITS = ConnectionLimits(header_timeout=10.0, idle_timeout=30.0, linger=2.0)


# --- the state machine -------------------------------------------------------

def test_a_fresh_connection_must_finish_its_head_from_the_accept() -> None:
    life = ConnectionLifetime(LIMITS, now=100.0)
    assert (life.phase, life.deadline) == (Phase.WAITING, 110.0)
    life.received(105.0)
    assert (life.phase, life.deadline) == (Phase.HEAD, 110.0)
    assert life.expired(109.9) is None
    assert life.expired(110.0) is Expiry.HEAD


def test_a_silent_fresh_connection_is_dropped_without_a_word() -> None:
    life = ConnectionLifetime(LIMITS, now=0.0)
    assert life.expired(10.0) is Expiry.IDLE


def test_a_request_in_flight_has_no_deadline() -> None:
    life = ConnectionLifetime(LIMITS, now=0.0)
    life.received(1.0)
    life.request_started(2.0)
    assert (life.phase, life.deadline) == (Phase.BUSY, math.inf)
    life.received(50.0)  # body bytes
    assert life.expired(1e9) is None
    assert not life.quiet


def test_keep_alive_waits_idle_then_gives_the_next_head_its_own_time() -> None:
    life = ConnectionLifetime(LIMITS, now=0.0)
    life.request_started(1.0)
    life.response_finished(3.0)
    assert (life.phase, life.deadline) == (Phase.WAITING, 33.0)
    assert life.quiet
    assert life.expired(33.0) is Expiry.IDLE
    life.received(20.0)
    assert (life.phase, life.deadline) == (Phase.HEAD, 30.0)
    life.received(25.0)  # more bytes of the same head do not extend it
    assert life.deadline == 30.0
    assert life.expired(30.0) is Expiry.HEAD


def test_closing_lingers_once_and_ignores_later_events() -> None:
    life = ConnectionLifetime(LIMITS, now=0.0)
    life.request_started(1.0)
    life.closing(5.0)
    assert (life.phase, life.deadline) == (Phase.CLOSING, 7.0)
    life.closing(6.0)
    life.response_finished(6.0)
    life.request_started(6.0)
    life.received(6.0)
    assert (life.phase, life.deadline) == (Phase.CLOSING, 7.0)
    assert life.expired(7.0) is Expiry.LINGER
    assert life.quiet


def test_raw_error_responses_are_complete_openai_errors() -> None:
    raw = raw_error_response(503, "busy", code="too_many_connections",
                             headers={"retry-after": "1"})
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 503 Service Unavailable"
    assert "connection: close" in lines and "retry-after: 1" in lines
    assert f"content-length: {len(body)}" in lines
    assert json.loads(body) == {"error": {"message": "busy", "type": "server_error",
                                          "param": None, "code": "too_many_connections"}}


# --- the connection on a socket pair, in mock time ---------------------------

@dataclass
class App:
    """A bare ASGI app: answers "ok", after ``gate`` is set if one is given."""

    close: bool = False
    gate: trio.Event | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.requests.append(scope)
        if self.gate is not None:
            await self.gate.wait()
        headers = [(b"content-length", b"2")]
        if self.close:
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})


@dataclass
class Served:
    client: trio.SocketStream
    connection: _Connection
    ended: trio.Event = field(default_factory=trio.Event)
    ended_at: float | None = None

    async def wait_ended(self) -> float:
        await self.ended.wait()
        assert self.ended_at is not None
        return self.ended_at


@asynccontextmanager
async def served(app: App) -> AsyncIterator[Served]:
    server_sock, client_sock = trio.socket.socketpair()
    config = HypercornConfig()
    registry = _Connections(8, LIMITS, "api_server")
    connection = _Connection(
        wrap_app(app, 1 << 20, "asgi"), config, WorkerContext(None), {},
        trio.SocketStream(server_sock), LIMITS, registry,
    )
    client = trio.SocketStream(client_sock)
    result = Served(client, connection)

    async def run() -> None:
        await connection.run()
        result.ended_at = trio.current_time()
        result.ended.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        try:
            yield result
        finally:
            await client.aclose()


async def read_until_eof(stream: trio.SocketStream) -> tuple[bytes, float]:
    data = bytearray()
    while chunk := await stream.receive_some(65536):
        data += chunk
    return bytes(data), trio.current_time()


async def read_answer(stream: trio.SocketStream) -> bytes:
    """One whole answer of :class:`App` (it ends with its body, ``ok``)."""
    data = bytearray()
    while not data.endswith(b"\r\n\r\nok"):
        data += await stream.receive_some(65536)
    return bytes(data)


GET = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


async def test_a_slow_head_gets_408_at_the_header_timeout_then_lingers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    start = trio.current_time()
    async with served(App()) as s:
        await trio.sleep(3)
        await s.client.send_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        raw, at = await read_until_eof(s.client)
        assert raw.startswith(b"HTTP/1.1 408")
        assert at - start == pytest.approx(10.0)
        # The client keeps its side open: the server lets go after lingering.
        assert await s.wait_ended() - start == pytest.approx(12.0)


async def test_a_connection_that_never_asks_is_closed_silently(
    autojump_clock: trio.testing.MockClock,
) -> None:
    start = trio.current_time()
    async with served(App()) as s:
        raw, at = await read_until_eof(s.client)
        assert raw == b""
        assert at - start == pytest.approx(10.0)


async def test_keep_alive_idles_then_closes_and_the_next_head_gets_its_own_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    start = trio.current_time()
    async with served(App()) as s:
        await s.client.send_all(GET)
        assert (await read_answer(s.client)).startswith(b"HTTP/1.1 200")
        await trio.sleep(29)
        await s.client.send_all(GET)  # a second request just inside the idle time
        assert (await read_answer(s.client)).startswith(b"HTTP/1.1 200")
        second = trio.current_time()
        await trio.sleep(5)
        await s.client.send_all(b"GET / HTTP/1.1\r\n")  # a third head that stalls
        raw, at = await read_until_eof(s.client)
        assert raw.startswith(b"HTTP/1.1 408")
        assert at - second == pytest.approx(15.0)
    assert second - start == pytest.approx(29.0)


async def test_an_idle_keep_alive_connection_closes_at_the_idle_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with served(App()) as s:
        await s.client.send_all(GET)
        assert (await read_answer(s.client)).startswith(b"HTTP/1.1 200")
        answered = trio.current_time()
        raw, at = await read_until_eof(s.client)
        assert raw == b""
        assert at - answered == pytest.approx(30.0)
        assert await s.wait_ended() - answered == pytest.approx(30.0)


async def test_a_request_being_answered_is_never_timed_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = trio.Event()
    async with served(App(gate=gate)) as s:
        await s.client.send_all(GET)
        await trio.sleep(10_000)
        assert s.ended_at is None
        gate.set()
        assert (await read_answer(s.client)).startswith(b"HTTP/1.1 200")


async def test_connection_close_sends_eof_at_once_and_frees_the_socket_after_linger(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with served(App(close=True)) as s:
        sent = trio.current_time()
        await s.client.send_all(GET)
        raw, at = await read_until_eof(s.client)
        assert raw.endswith(b"ok")
        assert at == sent
        assert await s.wait_ended() - sent == pytest.approx(2.0)


async def test_a_client_that_closes_after_the_answer_frees_the_socket_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with served(App(close=True)) as s:
        sent = trio.current_time()
        await s.client.send_all(GET)
        await read_until_eof(s.client)
        await trio.sleep(0.5)
        await s.client.send_eof()
        assert await s.wait_ended() - sent == pytest.approx(0.5)
