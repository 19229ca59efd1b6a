"""Connection lifetime on real sockets: the server closes what it should
(HTTP/1.0, ``Connection: close``, answers sent before the body, slow or idle
clients), keeps what it should (keep-alive), and bounds how many it holds."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import h11
import httpx
import trio
from support import api_stack, clean_env, start_serve

from hermes_trio.testing import TextReply

CHAT = {"model": "hermes-agent", "messages": [{"role": "user", "content": "hi"}]}


async def connect(api: Any) -> trio.SocketStream:
    return await trio.open_tcp_stream(api.host, api.port)


def request_bytes(
    method: str,
    path: str,
    host: str,
    *,
    body: bytes | None = None,
    version: str = "1.1",
    headers: dict[str, str] | None = None,
    content_length: int | None = None,
) -> bytes:
    lines = [f"{method} {path} HTTP/{version}", f"Host: {host}"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body is not None or content_length is not None:
        lines.append("Content-Type: application/json")
        length = len(body or b"") if content_length is None else content_length
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


class Reader:
    """Reads HTTP responses off a raw client socket with h11."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.conn = h11.Connection(h11.CLIENT)

    async def response(self, method: str = "GET") -> tuple[h11.Response, bytes]:
        # h11 must know what we asked to parse the answer.
        self.conn.send(h11.Request(method=method, target="/", headers=[("Host", "x")]))
        self.conn.send(h11.EndOfMessage())
        head: h11.Response | None = None
        body = bytearray()
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                self.conn.receive_data(await self.stream.receive_some(65536))
            elif isinstance(event, h11.Response):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
                    self.conn.start_next_cycle()
                return head, bytes(body)
            else:
                raise AssertionError(f"unexpected {event!r}")


async def eof(stream: trio.SocketStream) -> bytes:
    """Everything the server still sends, until it closes its side."""
    received = bytearray()
    while chunk := await stream.receive_some(65536):
        received += chunk
    return bytes(received)


async def answer_to_a_head_alone(api: Any, *, content_length: int) -> bytes:
    """What the server sends to a chat request whose announced body never
    comes, until it closes the connection."""
    stream = await connect(api)
    async with stream:
        await stream.send_all(
            request_bytes(
                "POST", "/v1/chat/completions", f"127.0.0.1:{api.port}",
                content_length=content_length,
            )
        )
        with trio.fail_after(5):
            return await eof(stream)


async def test_an_http10_stream_ends_after_done() -> None:
    async with api_stack([TextReply("Hello there")]) as (api, _):
        body = json.dumps({**CHAT, "stream": True}).encode()
        stream = await connect(api)
        async with stream:
            await stream.send_all(
                request_bytes("POST", "/v1/chat/completions", f"127.0.0.1:{api.port}",
                              body=body, version="1.0")
            )
            with trio.fail_after(5):
                raw = await eof(stream)
    head, _, content = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b"transfer-encoding" not in head.lower()
    assert content.endswith(b"data: [DONE]\n\n")


async def test_connection_close_is_honoured() -> None:
    async with api_stack() as (api, _):
        stream = await connect(api)
        async with stream:
            await stream.send_all(
                request_bytes("GET", "/v1/models", f"127.0.0.1:{api.port}",
                              headers={"Connection": "close"})
            )
            with trio.fail_after(5):
                raw = await eof(stream)
    assert raw.startswith(b"HTTP/1.1 200")
    assert b"hermes-agent" in raw


async def test_a_401_before_the_body_closes_the_connection() -> None:
    async with api_stack(api={"key": "sekrit"}) as (api, _):
        raw = await answer_to_a_head_alone(api, content_length=5000)
    assert raw.startswith(b"HTTP/1.1 401")
    assert b"invalid_api_key" in raw


async def test_a_413_before_the_body_closes_the_connection() -> None:
    async with api_stack(api={"max_body_bytes": 100}) as (api, _):
        raw = await answer_to_a_head_alone(api, content_length=5000)
    assert raw.startswith(b"HTTP/1.1 413")


async def test_keep_alive_serves_two_requests_on_one_connection() -> None:
    async with api_stack([TextReply("one"), TextReply("two")]) as (api, _):
        stream = await connect(api)
        async with stream:
            reader = Reader(stream)
            host = f"127.0.0.1:{api.port}"
            body = json.dumps(CHAT).encode()
            with trio.fail_after(5):
                await stream.send_all(request_bytes("POST", "/v1/chat/completions", host,
                                                    body=body))
                first, first_body = await reader.response("POST")
                await stream.send_all(request_bytes("GET", "/v1/models", host))
                second, _ = await reader.response()
                await stream.send_all(request_bytes("POST", "/v1/chat/completions", host,
                                                    body=body))
                third, third_body = await reader.response("POST")
    assert (first.status_code, second.status_code, third.status_code) == (200, 200, 200)
    assert json.loads(first_body)["choices"][0]["message"]["content"] == "one"
    assert json.loads(third_body)["choices"][0]["message"]["content"] == "two"


async def test_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() -> None:
    async with api_stack(api={"idle_timeout": 0.3}) as (api, _):
        stream = await connect(api)
        async with stream:
            reader = Reader(stream)
            await stream.send_all(request_bytes("GET", "/v1/models", f"127.0.0.1:{api.port}"))
            with trio.fail_after(5):
                head, _ = await reader.response()
            start = trio.current_time()
            with trio.fail_after(5):
                rest = await eof(stream)
            waited = trio.current_time() - start
    assert head.status_code == 200
    assert rest == b""
    assert 0.2 < waited < 3


async def test_a_slow_head_gets_408_and_is_closed() -> None:
    async with api_stack(api={"header_timeout": 0.3}) as (api, _):
        stream = await connect(api)
        async with stream:
            await stream.send_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            with trio.fail_after(5):
                raw = await eof(stream)
    assert raw.startswith(b"HTTP/1.1 408")
    error = json.loads(raw.partition(b"\r\n\r\n")[2])["error"]
    assert error["code"] == "request_timeout"
    assert "api_server.header_timeout" in error["message"]


async def test_a_missing_body_gets_408_and_is_closed() -> None:
    async with api_stack(api={"body_timeout": 0.3}) as (api, _):
        raw = await answer_to_a_head_alone(api, content_length=50)
    assert raw.startswith(b"HTTP/1.1 408")
    assert b"api_server.body_timeout" in raw


async def test_beyond_max_connections_the_answer_is_503() -> None:
    # Both from this one address: it may hold both.
    async with api_stack(api={"max_connections": 2, "max_connections_per_client": 2}) as (api, _):
        host = f"127.0.0.1:{api.port}"
        held = [await connect(api), await connect(api)]
        # The listener has counted both before the third arrives.
        await trio.sleep(0.05)
        extra = await connect(api)
        async with extra:
            await extra.send_all(request_bytes("GET", "/v1/models", host))
            with trio.fail_after(5):
                raw = await eof(extra)
        assert raw.startswith(b"HTTP/1.1 503")
        assert b"retry-after: 1" in raw.lower()
        error = json.loads(raw.partition(b"\r\n\r\n")[2])["error"]
        assert error["code"] == "too_many_connections"
        assert "api_server.max_connections" in error["message"]
        # An ordinary client sees the same answer, not a connection error.
        async with httpx.AsyncClient() as client:
            refused = await client.get(f"{api.base_url}/models")
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "too_many_connections"
        await held.pop().aclose()
        with trio.fail_after(5):
            while True:
                async with httpx.AsyncClient() as client:
                    response = await client.get(f"{api.base_url}/models")
                if response.status_code == 200:
                    break
                await trio.sleep(0.02)
        for stream in held:
            await stream.aclose()


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def test_header_only_connections_are_closed_by_the_server(tmp_path: Path) -> None:
    # A real `serve` process: 300 clients that send a head (or part of one)
    # and then nothing, next to one legitimate client.
    (tmp_path / "config.yaml").write_text(
        "api_server:\n"
        "  header_timeout: 0.5\n"
        "  body_timeout: 0.5\n"
        "  max_connections: 400\n"
        "  max_connections_per_client: 400\n"
    )
    async with open_scripted_server_with_answer() as model:
        env = clean_env(HERMES_DATA_DIR=str(tmp_path / "data"),
                        HERMES_MODEL_BASE_URL=model.base_url)
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path)
            pid = served.process.pid
            host_port = served.base_url.split("//")[1].split("/")[0]
            host, port = host_port.rsplit(":", 1)
            before = open_fds(pid)
            partial = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            whole = request_bytes("POST", "/v1/chat/completions", host_port, content_length=80)
            streams = []
            for i in range(300):
                stream = await trio.open_tcp_stream(host, int(port))
                await stream.send_all(partial if i % 2 else whole)
                streams.append(stream)
            async with httpx.AsyncClient() as client:
                legit = await client.post(f"{served.base_url}/chat/completions", json=CHAT)
            assert legit.status_code == 200
            closed: list[bytes] = []

            async def wait_closed(stream: trio.SocketStream) -> None:
                closed.append(await eof(stream))

            with trio.fail_after(5):
                async with trio.open_nursery() as waiters:
                    for stream in streams:
                        waiters.start_soon(wait_closed, stream)
            assert len(closed) == 300
            assert all(raw.startswith(b"HTTP/1.1 408") for raw in closed)
            # The server lets go of every descriptor by itself (after its
            # lingering close), though these clients never close theirs.
            with trio.fail_after(5):
                while open_fds(pid) > before + 2:  # noqa: ASYNC110 - another process's state
                    await trio.sleep(0.05)
            for stream in streams:
                await stream.aclose()
            nursery.cancel_scope.cancel()


def open_scripted_server_with_answer() -> Any:
    from hermes_trio.testing import open_scripted_server

    return open_scripted_server(default=TextReply("fine"))


async def test_an_answer_before_the_body_arrived_says_the_connection_closes() -> None:
    """A 401 sent before the request's body arrived ends the connection: it
    must say so (``Connection: close``), or a client reuses the connection
    and its next request fails with "Server disconnected without sending a
    response" (seen on a loaded machine after a key's 429)."""
    async with api_stack([TextReply("ok")], api={"key": "right"}) as (api, _):
        stream = await trio.open_tcp_stream("127.0.0.1", api.port)
        async with stream:
            await stream.send_all(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Authorization: Bearer wrong\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000\r\n\r\n{"
            )
            head = b""
            with trio.fail_after(5):
                while b"\r\n\r\n" not in head:
                    head += await stream.receive_some(4096)
    lines = head.split(b"\r\n\r\n")[0].lower().split(b"\r\n")
    assert lines[0].startswith(b"http/1.1 401")
    assert b"connection: close" in lines
