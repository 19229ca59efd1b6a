"""Capacity: how many connections a `serve` process takes, and how many one
client may hold. The arithmetic alone, then a real `serve` process started
with a small open-files limit, and one whose single client hits its cap
while another address still gets in."""

from __future__ import annotations

import json
import re
import resource
from pathlib import Path

import httpx
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from support import clean_env, start_serve
from test_connections import eof, request_bytes

from hermes_trio.config import ConfigError, load_config
from hermes_trio.listener.capacity import (
    FILES_PER_CONNECTION,
    FILES_PER_TURN,
    FILES_RESERVED,
    connection_room,
    per_client_limit,
)
from hermes_trio.testing import TextReply, open_scripted_server

CHAT = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}]}


@given(
    open_files=st.integers(min_value=1, max_value=2_000_000),
    wanted=st.integers(min_value=1, max_value=100_000),
    turns=st.integers(min_value=1, max_value=1000),
)
def test_the_connections_served_fit_in_the_open_files(
    open_files: int, wanted: int, turns: int
) -> None:
    room = connection_room(open_files, wanted=wanted, turns=turns)
    fixed = FILES_RESERVED + FILES_PER_TURN * turns
    assert 1 <= room.max_connections <= wanted
    assert room.reduced == (room.max_connections < wanted)
    assert room.needed == fixed + FILES_PER_CONNECTION * wanted
    if room.fits > 1:
        # As many as fit, and not one more.
        assert fixed + FILES_PER_CONNECTION * room.fits <= open_files
        assert fixed + FILES_PER_CONNECTION * (room.fits + 1) > open_files


def test_one_client_gets_half_the_connections_unless_told() -> None:
    assert per_client_limit(256, None) == 128
    assert per_client_limit(1, None) == 1
    assert per_client_limit(256, 300) == 300
    assert per_client_limit(256, 5) == 5


def test_the_per_client_cap_is_read_and_checked(tmp_path: Path) -> None:
    config = load_config(env={"API_SERVER_MAX_CONNECTIONS_PER_CLIENT": "12"})
    assert config.api_server.max_connections_per_client == 12
    assert load_config(env={}).api_server.max_connections_per_client is None
    path = tmp_path / "config.yaml"
    path.write_text("api_server:\n  max_connections_per_client: 0\n")
    with pytest.raises(ConfigError) as refused:
        load_config(path, env={})
    assert "api_server.max_connections_per_client: expected an integer of at least 1" in str(
        refused.value
    )


# The server's own limit on open files in the test below, as its parent
# sets it: a small soft limit (which serve raises), a hard one that holds
# about 40 connections beside 50 turns.
SOFT_FILES = 64
HARD_FILES = FILES_RESERVED + FILES_PER_TURN * 50 + FILES_PER_CONNECTION * 40 + 1


def small_open_files_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT_FILES, HARD_FILES))


async def read_stream(http: httpx.AsyncClient) -> str:
    """The streamed text; the stream must end with [DONE], no error before."""
    text = []
    done = False
    async with http.stream("POST", "/chat/completions", json=CHAT) as reply:
        assert reply.status_code == 200, await reply.aread()
        async for line in reply.aiter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                assert "error" not in chunk, chunk
                for choice in chunk["choices"]:
                    text.append(choice["delta"].get("content") or "")
            done = done or line == "data: [DONE]"
    assert done, "the stream ended without [DONE]"
    return "".join(text)


async def test_serve_raises_its_open_files_limit_and_serves_what_it_holds(
    tmp_path: Path,
) -> None:
    words = [f"w{i} " for i in range(40)]
    (tmp_path / "config.yaml").write_text(
        "api_server: {max_concurrent: 50, max_connections_per_client: 1000}\n"
    )
    async with open_scripted_server(default=TextReply(tokens=words, delay=0.05)) as model:
        env = clean_env(
            HERMES_MODEL_BASE_URL=model.base_url, HERMES_DATA_DIR=str(tmp_path / "data")
        )
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path, preexec_fn=small_open_files_limit)
            logged = "\n".join(served.output)
            assert f"open-files limit raised from {SOFT_FILES} to {HARD_FILES}" in logged
            sized = re.search(r"at most (\d+) connections are served", logged)
            assert sized, logged
            room = connection_room(HARD_FILES, wanted=256, turns=50)
            assert int(sized.group(1)) == room.max_connections == 40
            host_port = served.base_url.split("//")[1].split("/")[0]
            host, port = host_port.rsplit(":", 1)

            texts: list[str] = []
            all_open = trio.Event()

            async def one() -> None:
                async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as http:
                    texts.append(await read_stream(http))

            with trio.fail_after(60):
                async with trio.open_nursery() as clients:
                    for _ in range(room.max_connections):
                        clients.start_soon(one)
                    # Every stream is open once the model server has been
                    # asked as many times.
                    while len(model.requests) < room.max_connections:  # noqa: ASYNC110 (another process)
                        await trio.sleep(0.02)
                    all_open.set()
                    extra = await trio.open_tcp_stream(host, int(port))
                    async with extra:
                        await extra.send_all(request_bytes("GET", "/v1/models", host_port))
                        raw = await eof(extra)
            nursery.cancel_scope.cancel()
    assert raw.startswith(b"HTTP/1.1 503"), raw[:200]
    assert json.loads(raw.partition(b"\r\n\r\n")[2])["error"]["code"] == "too_many_connections"
    # Every stream accepted before it finished whole.
    assert texts == ["".join(words)] * room.max_connections


async def connect_from(address: str, host: str, port: int) -> trio.SocketStream:
    sock = trio.socket.socket()
    await sock.bind((address, 0))
    await sock.connect((host, port))
    return trio.SocketStream(sock)


async def test_one_client_address_cannot_hold_every_connection(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "api_server: {max_connections: 10, max_connections_per_client: 3}\n"
    )
    async with open_scripted_server(default=TextReply("fine")) as model:
        env = clean_env(
            HERMES_MODEL_BASE_URL=model.base_url, HERMES_DATA_DIR=str(tmp_path / "data")
        )
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path)
            host_port = served.base_url.split("//")[1].split("/")[0]
            host, port = host_port[: host_port.rindex(":")], int(host_port.rsplit(":", 1)[1])
            health = request_bytes("GET", "/health", host_port, headers={"Connection": "close"})

            async def answer_from(address: str) -> bytes:
                stream = await connect_from(address, host, port)
                async with stream:
                    await stream.send_all(health)
                    with trio.fail_after(5):
                        return await eof(stream)

            held = [await connect_from("127.0.0.1", host, port) for _ in range(3)]
            # Until the listener has counted the three (it answers 200 before).
            with trio.fail_after(5):
                while (raw := await answer_from("127.0.0.1")).startswith(b"HTTP/1.1 200"):  # noqa: ASYNC110
                    await trio.sleep(0.02)
            assert raw.startswith(b"HTTP/1.1 429"), raw[:200]
            assert b"retry-after: 1" in raw.lower()
            error = json.loads(raw.partition(b"\r\n\r\n")[2])["error"]
            assert error["code"] == "too_many_client_connections"
            assert error["type"] == "rate_limit_error"
            assert "api_server.max_connections_per_client (3)" in error["message"]
            # Another address (loopback too) still gets in...
            assert (await answer_from("127.0.0.2")).startswith(b"HTTP/1.1 200")
            # ...and so does the first again, once it holds fewer.
            await held.pop().aclose()
            with trio.fail_after(5):
                while not (await answer_from("127.0.0.1")).startswith(b"HTTP/1.1 200"):  # noqa: ASYNC110
                    await trio.sleep(0.02)
            for stream in held:
                await stream.aclose()
            logged = "\n".join(served.output)
            assert "api_server.max_connections_per_client (3) reached by 127.0.0.1" in logged
            nursery.cancel_scope.cancel()


def test_clients_already_gone_are_not_counted_as_one_client() -> None:
    """A connection whose peer reset before it was served has no address:
    many such ones must not make the cap refuse anybody else's."""
    from hermes_trio.listener.lifetime import ConnectionLimits
    from hermes_trio.listener.listener import _Connections

    connections = _Connections(100, ConnectionLimits(), None, per_client=2)
    connections.by_address[""] += 5
    connections.by_address["127.0.0.1"] += 2
    assert not connections.full_for("")
    assert connections.full_for("127.0.0.1")
    assert not connections.full_for("127.0.0.2")
