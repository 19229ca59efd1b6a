"""The model client's keep-alive pool: one connection serves turn after turn,
a stream cut short never goes back to the pool, and a connection the server
dropped while idle is replaced without the caller seeing an error."""

from __future__ import annotations

import json
import socket
import struct

import h11
import httpx
import pytest
import trio
import trio.testing
from support import make_config, run_turn

from hermes_trio.agent import open_agent
from hermes_trio.events import MessageChunk, StreamEvent
from hermes_trio.llm.client import make_http_client
from hermes_trio.llm.pool import PooledTransport
from hermes_trio.testing import ModelDouble, Stall, TextReply, open_scripted_server


async def test_sequential_turns_share_one_connection() -> None:
    async with open_scripted_server([TextReply("one"), TextReply("two")], record=True) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            _, first = await run_turn(agent, "first")
            _, second = await run_turn(agent, "second")
    assert (first.text, second.text) == ("one", "two")
    chats = server.model_requests
    assert len(chats) == 2
    assert chats[0].connection_id == chats[1].connection_id
    assert len(server.connections) == 1


async def test_a_stream_cut_short_closes_its_connection() -> None:
    async with open_scripted_server([Stall("thinking"), TextReply("fresh")], record=True) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            send, receive = trio.open_memory_channel[StreamEvent](16)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent.run_turn, [{"role": "user", "content": "stall"}], send)
                async with receive:
                    async for event in receive:
                        if isinstance(event, MessageChunk):
                            nursery.cancel_scope.cancel()  # the stream is cut short here
            with trio.fail_after(5):
                record = await server.wait_connection_closed()
            assert record.closed_by == "client"
            _, result = await run_turn(agent, "again")
    assert result.text == "fresh"
    chats = server.model_requests
    assert chats[0].connection_id != chats[1].connection_id


async def _one_shot_server(
    listeners: list[trio.SocketListener], accepted: list[int], *, drop_second: bool
) -> None:
    """Answers the first request on each connection with keep-alive; then
    either waits for more or (``drop_second``) closes when the next arrives."""

    async def handle(stream: trio.SocketStream) -> None:
        accepted.append(1)
        conn = h11.Connection(h11.SERVER)
        answered = 0
        async with stream:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    conn.receive_data(data)
                    if not data:
                        return
                    continue
                if isinstance(event, h11.Request):
                    if answered and drop_second:
                        return  # close without a word, as a keep-alive timeout would
                    continue
                if isinstance(event, h11.EndOfMessage):
                    body = b"ok"
                    await stream.send_all(
                        conn.send(h11.Response(status_code=200, headers=[("content-length", "2")]))
                        + conn.send(h11.Data(data=body))
                        + conn.send(h11.EndOfMessage())
                    )
                    answered += 1
                    conn.start_next_cycle()
                    if not drop_second:
                        return  # close while the client holds it idle
                    continue
                if isinstance(event, h11.ConnectionClosed):
                    return

    await trio.serve_listeners(handle, listeners)


async def _get_twice(*, drop_second: bool) -> tuple[int, str]:
    accepted: list[int] = []
    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        nursery.start_soon(lambda: _one_shot_server(listeners, accepted, drop_second=drop_second))
        async with httpx.AsyncClient(transport=PooledTransport()) as client:
            first = await client.get(f"http://127.0.0.1:{port}/a")
            assert first.text == "ok"
            await trio.testing.wait_all_tasks_blocked()
            try:
                second = (await client.get(f"http://127.0.0.1:{port}/b")).text
            except httpx.TransportError as exc:
                second = type(exc).__name__
        nursery.cancel_scope.cancel()
    return len(accepted), second


async def test_an_idle_connection_the_server_closed_is_not_reused() -> None:
    assert await _get_twice(drop_second=False) == (2, "ok")


async def test_a_request_the_server_may_have_received_is_not_sent_again() -> None:
    """The second request reached the server before it hung up: sending it
    again could run a paid generation twice, so the caller sees the error
    (the model client's own retries decide what happens next)."""
    assert await _get_twice(drop_second=True) == (1, "RemoteProtocolError")


async def test_proxy_settings_in_the_environment_still_apply(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = make_config("http://127.0.0.1:9/v1").model
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    async with make_http_client(config) as proxied:
        pattern = next(iter(proxied._mounts))  # httpx keeps env proxies as mounts
        assert pattern.pattern == "https://"
    monkeypatch.delenv("HTTPS_PROXY")
    for name in ("HTTP_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    async with make_http_client(config) as direct:
        # Under the tap that copies recorded turns (--record).
        assert isinstance(direct._transport.inner, PooledTransport)


@pytest.mark.parametrize("after_done", ["silence", "close", "reset"])
async def test_what_follows_done_neither_delays_nor_spoils_the_answer(
    autojump_clock: trio.testing.MockClock, after_done: str
) -> None:
    """[DONE] then silence, an unterminated close or a reset: the answer ends
    at once (give or take the short drain) and whole, and that connection is
    dropped rather than pooled."""
    frames = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    body = b"".join(b"data: " + json.dumps(f).encode() + b"\n\n" for f in frames)
    closed = trio.Event()

    async def handle(stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        async with stream:
            while not isinstance(event := conn.next_event(), h11.EndOfMessage):
                if event is h11.NEED_DATA:
                    conn.receive_data(await stream.receive_some(65536))
            await stream.send_all(
                conn.send(
                    h11.Response(status_code=200, headers=[("content-type", "text/event-stream")])
                )
                + conn.send(h11.Data(data=body + b"data: [DONE]\n\n"))
            )
            if after_done == "reset":
                stream.socket.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
            if after_done == "silence":
                await stream.receive_some(65536)  # the client's close, not a terminator
            closed.set()

    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        nursery.start_soon(trio.serve_listeners, handle, listeners)
        async with open_agent(make_config(f"http://127.0.0.1:{port}/v1")) as agent:
            started = trio.current_time()
            _, result = await run_turn(agent, "hello")
            took = trio.current_time() - started
            with trio.fail_after(1):
                await closed.wait()
        nursery.cancel_scope.cancel()
    assert (result.text, result.finish_reason) == ("hi", "stop")
    assert took <= 0.1


async def test_integers_beyond_64_bits_still_reach_the_model_server() -> None:
    async with open_scripted_server([TextReply("ok")], record=True) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            _, result = await run_turn(agent, "hello", params={"seed": 2**64})
    assert result.text == "ok"
    assert server.requests[-1].json["seed"] == 2**64


async def test_a_transport_gets_every_request_whatever_the_proxy_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    double = ModelDouble([TextReply("straight to the double")])
    async with open_agent(make_config("http://model.test/v1"), transport=double) as agent:
        _, result = await run_turn(agent, "hello")
    assert result.text == "straight to the double"
    assert len(double.requests) == 1


async def test_open_agent_uses_a_client_it_is_given_and_leaves_it_open() -> None:
    double = ModelDouble([TextReply("one"), TextReply("two")])
    config = make_config(double.base_url)
    async with httpx.AsyncClient(transport=double) as http:
        for expected in ("one", "two"):
            async with open_agent(config, http_client=http) as agent:
                _, result = await run_turn(agent, "hello")
            assert result.text == expected
            assert not http.is_closed


async def test_open_agent_takes_a_transport_or_a_client_not_both() -> None:
    double = ModelDouble()
    async with httpx.AsyncClient(transport=double) as http:
        with pytest.raises(TypeError, match="transport= or http_client="):
            async with open_agent(make_config(double.base_url), transport=double, http_client=http):
                pass  # pragma: no cover
