"""SIGTERM to a real ``hermes-trio serve`` with streams open: turns that end
within the grace period end normally; the others, chat and Responses alike,
end with the shutdown's last words and a properly ended HTTP body."""

from __future__ import annotations

import json
import signal
from typing import Any

import h11
import trio
from support import clean_env, make_config, start_serve

from hermes_trio.server.run import open_api_server
from hermes_trio.testing import TextReply, open_scripted_server
from tests.server.responses.test_responses_helpers import parse_sse, payloads

SHORT = [f"s{i} " for i in range(10)]
LONG = [f"l{i} " for i in range(400)]


async def open_stream(host: str, port: int, path: str, body: dict[str, Any]) -> trio.SocketStream:
    stream = await trio.open_tcp_stream(host, port)
    data = json.dumps(body).encode()
    await stream.send_all(
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n".encode() + data
    )
    return stream


async def read_response(stream: trio.SocketStream) -> tuple[int, bytes, bool]:
    """Status, body and whether the body ended as HTTP says it must (the
    chunked terminator), reading until the server closes."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="POST", target="/", headers=[("Host", "x"),
                                                              ("Content-Length", "0")]))
    conn.send(h11.EndOfMessage())
    status, body, ended = 0, bytearray(), False
    while True:
        try:
            data = await stream.receive_some(65536)
        except trio.BrokenResourceError:
            data = b""
        conn.receive_data(data)
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError:
                return status, bytes(body), False
            if event is h11.NEED_DATA or event is h11.PAUSED:
                break
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                ended = True
            elif isinstance(event, h11.ConnectionClosed):
                return status, bytes(body), ended
        if not data:
            return status, bytes(body), ended


async def test_sigterm_ends_chat_and_responses_streams_with_their_last_words(tmp_path) -> None:
    script = [
        TextReply(tokens=SHORT, delay=0.05),
        TextReply(tokens=LONG, delay=0.05),
        TextReply(tokens=LONG, delay=0.05),
    ]
    async with open_scripted_server(script) as model:
        env = clean_env(HERMES_MODEL_BASE_URL=model.base_url, HERMES_DATA_DIR=str(tmp_path / "d"))
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path)
            host, port = served.base_url.split("//")[1].split("/")[0].rsplit(":", 1)
            short = await open_stream(host, int(port), "/v1/responses",
                                      {"input": "short", "stream": True})
            await model.wait_request(1)
            long = await open_stream(host, int(port), "/v1/responses",
                                     {"input": "long", "stream": True})
            await model.wait_request(2)
            chat = await open_stream(
                host, int(port), "/v1/chat/completions",
                {"messages": [{"role": "user", "content": "long"}], "stream": True},
            )
            await model.wait_request(3)
            results: dict[str, tuple[int, bytes, bool]] = {}
            with trio.fail_after(15):
                async with trio.open_nursery() as readers:
                    for name, stream in (("short", short), ("long", long), ("chat", chat)):

                        async def read(name: str = name, s: trio.SocketStream = stream) -> None:
                            async with s:
                                results[name] = await read_response(s)

                        readers.start_soon(read)
                    # The short answer is under way (0.5 s of the 2 s grace).
                    served.process.send_signal(signal.SIGTERM)
                code = await served.process.wait()
            nursery.cancel_scope.cancel()
    assert code == 0
    for name in ("short", "long", "chat"):
        status, _, ended = results[name]
        assert status == 200, name
        assert ended, f"the {name} stream's body was cut off"
    short_events = payloads(parse_sse(results["short"][1]))
    assert short_events[-1]["type"] == "response.completed"
    long_events = payloads(parse_sse(results["long"][1]))
    assert long_events[-1]["type"] == "response.incomplete"
    chat_frames = [e.data for e in parse_sse(results["chat"][1])]
    assert "the server is shutting down" in chat_frames[-1]


async def test_the_grace_period_waits_for_a_responses_turn() -> None:
    # In process (the same shutdown path): a Responses stream alone keeps
    # the server in its grace period (2 s) until it has ended normally; it
    # takes longer than the last words' half second.
    tokens = [f"g{i} " for i in range(24)]
    async with open_scripted_server([TextReply(tokens=tokens, delay=0.05)]) as model:
        config = make_config(model.base_url)
        results: dict[str, tuple[int, bytes, bool]] = {}
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                async with open_api_server(config, port=0) as api:
                    stream = await open_stream(
                        "127.0.0.1", api.port, "/v1/responses", {"input": "hi", "stream": True}
                    )
                    await model.wait_request(1)

                    async def read() -> None:
                        async with stream:
                            results["short"] = await read_response(stream)

                    nursery.start_soon(read)
                # Leaving the block shut the server down.
    status, body, ended = results["short"]
    assert status == 200 and ended
    assert payloads(parse_sse(body))[-1]["type"] == "response.completed"
