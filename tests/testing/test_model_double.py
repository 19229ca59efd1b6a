"""The in-process model double: the same script language as the socket
server, byte for byte, played out on trio's clock with no socket at all.

Timing tests run on ``MockClock(autojump_threshold=0)`` and assert the exact
virtual times; the parity tests compare the double with the real server
over loopback.
"""

from __future__ import annotations

import gzip
import json
import socket
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from hermes_trio.llm.http_body import open_body
from hermes_trio.testing import (
    Drop,
    ErrorFrame,
    ErrorReply,
    JSONInsteadOfStream,
    ModelDouble,
    RawReply,
    RecordedRequest,
    RefuseStream,
    Stall,
    Step,
    TextReply,
    ToolCallReply,
    open_scripted_server,
)

CHAT = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}]}
STREAM = {**CHAT, "stream": True}
USAGE = {**STREAM, "stream_options": {"include_usage": True}}
RESP = {"model": "test-model", "input": "hi"}
RESP_STREAM = {**RESP, "stream": True}


def client_for(double: ModelDouble) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=double.base_url, transport=double)


async def pieces(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], into: list[tuple[float, bytes]]
) -> list[tuple[float, bytes]]:
    """(virtual time, raw piece) for every read of one streamed response,
    collected in ``into`` (which keeps them when the stream fails)."""
    async with client.stream("POST", path, json=body) as response:
        assert response.status_code == 200
        async for piece in response.aiter_raw():
            into.append((trio.current_time(), piece))
    return into


# -- the same bytes as the socket server ------------------------------------------

PARITY: list[tuple[str, Step, str, dict[str, Any]]] = [
    ("text", TextReply("Hello there, world!", reasoning="hm"), "/chat/completions", STREAM),
    ("text-usage", TextReply("a b c"), "/chat/completions", USAGE),
    ("text-plain", TextReply("whole"), "/chat/completions", CHAT),
    ("tools", ToolCallReply([("f", {"x": 1}), ("g", "{}")], text="so"), "/chat/completions", USAGE),
    ("tools-plain", ToolCallReply([("f", {"x": 1})]), "/chat/completions", CHAT),
    (
        "error-reply",
        ErrorReply(429, "slow", headers={"Retry-After": "3"}),
        "/chat/completions",
        CHAT,
    ),
    ("error-frame", ErrorFrame("half", "boom"), "/chat/completions", STREAM),
    ("error-frame-plain", ErrorFrame("half", "boom"), "/chat/completions", CHAT),
    ("refuse", RefuseStream(TextReply("x")), "/chat/completions", STREAM),
    ("refuse-plain", RefuseStream(TextReply("x")), "/chat/completions", CHAT),
    ("json", JSONInsteadOfStream(TextReply("j")), "/chat/completions", STREAM),
    ("raw", RawReply([b"data: x\n\n", b"", b"tail"], status=203), "/chat/completions", STREAM),
    ("responses", TextReply("a b", reasoning="r"), "/responses", RESP_STREAM),
    ("responses-tools", ToolCallReply([("f", {"x": 1})], text="t"), "/responses", RESP_STREAM),
    ("responses-plain", TextReply("a b"), "/responses", RESP),
    ("responses-error", ErrorFrame("x", "bad"), "/responses", RESP_STREAM),
    ("responses-length", TextReply("a", finish_reason="length"), "/responses", RESP_STREAM),
    ("drop-before", Drop(), "/chat/completions", STREAM),
    ("drop-mid", Drop("a b c"), "/chat/completions", STREAM),
    ("drop-plain", Drop("a b c"), "/chat/completions", CHAT),
    ("stall", Stall("a b", seconds=0.01), "/chat/completions", STREAM),
    ("stall-plain", Stall(seconds=0.01), "/chat/completions", CHAT),
    ("hold", TextReply("held", hold=0.01), "/chat/completions", USAGE),
    ("models", TextReply(), "/models", {}),
    ("unknown-path", TextReply(), "/nowhere", CHAT),
]


async def _exchange(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> Any:
    """What a client sees: status, headers, body, and how it ended."""
    method = "GET" if path == "/models" else "POST"
    got: dict[str, Any] = {}
    try:
        async with client.stream(method, path, json=body or None) as response:
            got["status"] = response.status_code
            got["headers"] = sorted(response.headers.multi_items())
            raw = b""
            try:
                async for piece in response.aiter_raw():
                    raw += piece
            finally:
                got["body"] = raw
    except httpx.TransportError as exc:
        got["error"] = (type(exc).__name__, str(exc))
    return got


@pytest.mark.parametrize(
    ("step", "path", "body"), [p[1:] for p in PARITY], ids=[p[0] for p in PARITY]
)
async def test_the_double_sends_what_the_server_sends(
    step: Step, path: str, body: dict[str, Any]
) -> None:
    async with open_scripted_server([step]) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            over_socket = await _exchange(client, path, body)
    double = ModelDouble([step])
    async with client_for(double) as client:
        in_process = await _exchange(client, path, body)
    assert in_process == over_socket
    assert [r.path for r in double.requests] == [r.path for r in server.requests]
    assert double.remaining == server.remaining


# -- timing, on the virtual clock -----------------------------------------------------


async def test_tokens_arrive_at_their_scripted_times(
    autojump_clock: trio.testing.MockClock,
) -> None:
    double = ModelDouble([TextReply(tokens=["a", " b", " c"], first_token_delay=5, delay=2)])
    async with client_for(double) as client:
        arrivals = await pieces(client, "/chat/completions", STREAM, [])
    # The role chunk goes out with the first token, the finish chunk and
    # [DONE] right after the last: one read per frame.
    assert [at for at, _ in arrivals] == [5.0, 5.0, 7.0, 9.0, 9.0]
    assert b'"role":"assistant"' in arrivals[0][1]
    assert [
        b'"content":"%b"' % t in arrivals[n + 1][1] for n, t in enumerate((b"a", b" b", b" c"))
    ] == [True] * 3
    assert arrivals[-1][1].endswith(b"data: [DONE]\n\n")
    assert double.connections[0].closed_at == 9.0


async def test_every_frame_is_one_read_as_over_a_socket(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The server writes frames that are due together at once, but each is an
    # HTTP chunk, and httpx reads chunk by chunk: so does the double.
    step = TextReply(tokens=[f" t{n}" for n in range(50)])
    async with open_scripted_server([step]) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            async with client.stream("POST", "/chat/completions", json=STREAM) as response:
                over_socket = [piece async for piece in response.aiter_raw()]
    double = ModelDouble([step])
    async with client_for(double) as client:
        reads = [p for _, p in await pieces(client, "/chat/completions", STREAM, [])]
    assert reads == over_socket
    assert len(reads) == 1 + 50 + 1  # the role chunk with the first token, finish with [DONE]
    assert trio.current_time() == 0.0


async def test_a_responses_stream_keeps_its_scripted_times(
    autojump_clock: trio.testing.MockClock,
) -> None:
    double = ModelDouble([TextReply(tokens=["a", " b"], first_token_delay=3, delay=2)])
    async with client_for(double) as client:
        reads = await pieces(client, "/responses", RESP_STREAM, [])
    # Created and in progress with the headers; each element when due; the
    # completed event right after the last.
    assert [at for at, _ in reads] == [0.0, 3.0, 5.0, 5.0]
    assert b"response.created" in reads[0][1] and b"response.in_progress" in reads[0][1]
    assert b'"delta":"a"' in reads[1][1] and b'"delta":" b"' in reads[2][1]
    assert b"response.completed" in reads[3][1]


async def test_raw_pieces_and_hold_on_the_clock(autojump_clock: trio.testing.MockClock) -> None:
    double = ModelDouble([RawReply([b"one", b"two", b"three"], delay=1.5, hold=10)])
    seen: list[tuple[float, bytes]] = []
    async with client_for(double) as client:
        with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
            await pieces(client, "/chat/completions", STREAM, seen)
    assert seen == [(0.0, b"one"), (1.5, b"two"), (3.0, b"three")]
    record = double.connections[0]
    assert (record.closed_at, record.closed_by) == (13.0, "server")


async def test_a_stall_ends_when_scripted(autojump_clock: trio.testing.MockClock) -> None:
    double = ModelDouble([Stall("partial", seconds=30), Stall(seconds=45)])
    async with client_for(double) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await pieces(client, "/chat/completions", STREAM, [])
        assert trio.current_time() == 30.0
        # Not streamed: no response at all, then the server hangs up.
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await client.post("/chat/completions", json=CHAT)
    assert trio.current_time() == 75.0
    assert [(c.opened_at, c.closed_at, c.closed_by) for c in double.connections] == [
        (0.0, 30.0, "server"),
        (30.0, 75.0, "server"),
    ]


async def test_a_client_that_gives_up_is_recorded_at_that_instant(
    autojump_clock: trio.testing.MockClock,
) -> None:
    double = ModelDouble([TextReply(tokens=["first", " second"], delay=3600), Stall(seconds=99)])
    async with client_for(double) as client:
        with trio.move_on_after(10):
            await pieces(client, "/chat/completions", STREAM, [])
        # Waiting for a response that never starts, given up on too.
        with trio.move_on_after(4):
            await client.post("/chat/completions", json=CHAT)
    assert [(c.closed_at, c.closed_by) for c in double.connections] == [
        (10.0, "client"),
        (14.0, "client"),
    ]


async def test_wait_connection_closed_wakes_at_the_close(
    autojump_clock: trio.testing.MockClock,
) -> None:
    double = ModelDouble([TextReply(tokens=["a", " b", " c"], delay=7)])
    closed: list[float] = []

    async def watch() -> None:
        record = await double.wait_connection_closed()
        assert record.closed_at is not None
        closed.append(trio.current_time())

    async with trio.open_nursery() as nursery, client_for(double) as client:
        nursery.start_soon(watch)
        async with client.stream("POST", "/chat/completions", json=STREAM) as response:
            async with open_body(response, decode=False) as reads:
                async for piece in reads:
                    if b'" b"' in piece:
                        break
    assert closed == [7.0]


# -- errors where a socket would fail -------------------------------------------------


@pytest.mark.parametrize(
    ("step", "error", "message"),
    [
        (Drop(), httpx.RemoteProtocolError, "Server disconnected without sending a response."),
        (Drop(reset=True), httpx.ReadError, "Connection reset by peer"),
        (Drop("a b", reset=True), httpx.ReadError, "Connection reset by peer"),
        (Drop("a b"), httpx.RemoteProtocolError, "incomplete chunked read"),
    ],
)
async def test_a_dropped_connection_raises_what_httpx_raises(
    step: Step, error: type[Exception], message: str
) -> None:
    double = ModelDouble([step])
    async with client_for(double) as client:
        with pytest.raises(error, match=message):
            async with client.stream("POST", "/chat/completions", json=STREAM) as response:
                await response.aread()
    assert double.connections[0].closed_by == "server"


async def test_a_cut_plain_body_names_its_length() -> None:
    double = ModelDouble([Drop("some text here")])
    async with client_for(double) as client:
        with pytest.raises(httpx.RemoteProtocolError, match=r"received \d+ bytes, expected \d+"):
            await client.post("/chat/completions", json=CHAT)


async def test_a_gzip_body_is_decoded_by_the_client() -> None:
    body = gzip.compress(b'{"ok": true}')
    double = ModelDouble(
        [RawReply(body, content_type="application/json", headers={"Content-Encoding": "gzip"})]
    )
    async with client_for(double) as client:
        answer = await client.post("/chat/completions", json=CHAT)
    assert answer.json() == {"ok": True}


# -- replies computed from the request ----------------------------------------------


async def test_a_reply_function_answers_from_the_request() -> None:
    def echo(request: RecordedRequest) -> Step:
        return TextReply(f"you said {request.json['messages'][-1]['content']}")

    double = ModelDouble(default=echo)
    async with client_for(double) as client:
        for word in ("one", "two"):
            body = {**CHAT, "messages": [{"role": "user", "content": word}]}
            answer = await client.post("/chat/completions", json=body)
            assert answer.json()["choices"][0]["message"]["content"] == f"you said {word}"
    assert [r.step for r in double.requests] == [
        TextReply("you said one"),
        TextReply("you said two"),
    ]
    assert double.remaining == []


async def test_an_async_reply_function_may_take_its_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def slow(request: RecordedRequest) -> Step:
        await trio.sleep(12)
        return ToolCallReply([("lookup", {"q": request.json["input"]})])

    double = ModelDouble([slow, TextReply("done")])
    async with trio.open_nursery() as nursery, client_for(double) as client:
        seen: list[tuple[float, Any]] = []

        async def watch() -> None:
            request = await double.wait_request(1)
            seen.append((trio.current_time(), request.step))

        nursery.start_soon(watch)
        answer = await client.post("/responses", json=RESP)
    # Recorded on arrival, answered when the function returned.
    assert seen == [(0.0, None)]
    assert trio.current_time() == 12.0
    assert answer.json()["output"][0]["arguments"] == '{"q":"hi"}'
    assert double.requests[0].step == ToolCallReply([("lookup", {"q": "hi"})])
    assert double.remaining == [TextReply("done")]


async def test_a_reply_function_that_refuses_streams_stays_at_the_head() -> None:
    calls: list[bool] = []

    def refuse(request: RecordedRequest) -> Step:
        calls.append(request.stream)
        return RefuseStream(TextReply("plain"))

    double = ModelDouble([refuse, TextReply("next")])
    async with client_for(double) as client:
        refused = await client.post("/chat/completions", json=STREAM)
        plain = await client.post("/chat/completions", json=CHAT)
        after = await client.post("/chat/completions", json=CHAT)
    assert refused.status_code == 400
    assert plain.json()["choices"][0]["message"]["content"] == "plain"
    assert after.json()["choices"][0]["message"]["content"] == "next"
    assert calls == [True, False]


async def test_a_reply_function_must_return_a_step() -> None:
    double = ModelDouble([lambda request: "not a step"])  # type: ignore[list-item,return-value]
    async with client_for(double) as client:
        with pytest.raises(TypeError, match="not a script step"):
            await client.post("/chat/completions", json=CHAT)
    # Not consumed: the test sees the mistake, the script is unchanged.
    assert len(double.remaining) == 1


async def test_a_reply_function_may_fail_like_an_unreachable_server() -> None:
    def unreachable(request: RecordedRequest) -> Step:
        raise httpx.ConnectError("connection refused")

    double = ModelDouble(default=unreachable)
    async with client_for(double) as client:
        with pytest.raises(httpx.ConnectError):
            await client.post("/chat/completions", json=CHAT)
    assert double.connections[0].closed_by == "server"


def test_the_script_rejects_what_is_neither_a_step_nor_a_function() -> None:
    with pytest.raises(TypeError, match="not a script step"):
        ModelDouble(["hello"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not a script step"):
        ModelDouble(default=42)  # type: ignore[arg-type]


# -- records ----------------------------------------------------------------------------


async def test_requests_are_recorded_with_their_virtual_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    double = ModelDouble([TextReply("a", delay=1), TextReply("b")])
    async with client_for(double) as client:
        await client.get("/models", headers={"X-Trace": "1"})
        await trio.sleep(2.5)
        await client.post("/chat/completions", json=STREAM, headers={"Authorization": "Bearer k"})
        await trio.sleep(1)
        await client.post("/chat/completions?x=1", json=CHAT)
    first, second, third = double.requests
    assert (first.method, first.path, first.json, first.received_at) == (
        "GET",
        "/v1/models",
        None,
        0.0,
    )
    assert first.headers["x-trace"] == "1"
    assert (second.path, second.received_at, second.stream) == ("/v1/chat/completions", 2.5, True)
    assert second.headers["authorization"] == "Bearer k"
    assert second.json == STREAM and json.loads(second.body) == STREAM
    assert (third.received_at, third.step) == (3.5, TextReply("b"))
    assert double.model_requests == [second, third]
    assert [r.connection_id for r in double.requests] == [1, 2, 3]


async def test_an_exhausted_script_is_a_500_and_record_false_keeps_nothing() -> None:
    double = ModelDouble(record=False)
    async with client_for(double) as client:
        answer = await client.post("/chat/completions", json=CHAT)
    assert answer.status_code == 500
    assert answer.json()["error"]["code"] == "script_exhausted"
    assert double.requests == [] and double.connections == []
    with pytest.raises(RuntimeError, match="record=True"):
        await double.wait_request()


async def test_one_double_serves_several_clients() -> None:
    double = ModelDouble([TextReply("a"), TextReply("b")])
    for expected in ("a", "b"):
        async with client_for(double) as client:
            answer = await client.post("/chat/completions", json=CHAT)
        assert answer.json()["choices"][0]["message"]["content"] == expected


# -- no socket, no thread -----------------------------------------------------------------


async def test_no_socket_and_no_thread_is_ever_used(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the double must not touch the network or a thread")

    monkeypatch.setattr(socket, "socket", forbidden)
    monkeypatch.setattr(socket, "getaddrinfo", forbidden)
    monkeypatch.setattr(trio.socket, "socket", forbidden)
    monkeypatch.setattr(trio.to_thread, "run_sync", forbidden)
    script: list[Step] = [
        TextReply("a b", delay=1),
        ToolCallReply([("f", {})], delay=1),
        Stall("x", seconds=5),
        Drop("y z"),
        ErrorReply(503),
    ]
    double = ModelDouble(script)
    async with client_for(double) as client:
        for _ in script:
            try:
                async with client.stream("POST", "/chat/completions", json=STREAM) as response:
                    await response.aread()
            except httpx.TransportError:
                pass
    assert len(double.requests) == len(script)
    # One gap between the two tokens, one between the call and its
    # arguments, and the stall.
    assert trio.current_time() == 1.0 + 1.0 + 5.0
