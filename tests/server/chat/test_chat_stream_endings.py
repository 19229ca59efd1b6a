"""How a chat stream ends when its writer does not get to say so itself:
it crashed after a keep-alive went out, or it was cancelled while its last
frame was still on the way to the response body."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing
from support import api_stack, http_for

from hermes_trio.consumers.sse import SSEOptions, write_chat_sse
from hermes_trio.events import MessageChunk, StreamEvent, TurnFinished, Usage
from hermes_trio.server.chat import route as chat_route
from hermes_trio.server.chat.stream import ChatStreamBody
from hermes_trio.testing import TextReply
from hermes_trio.turn import Turn, TurnResult
from hermes_trio.wire.chat_out import ChatStreamFrames
from hermes_trio.wire.sse import KEEPALIVE
from tests.server.responses.test_responses_helpers import parse_sse

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


async def test_a_writer_crash_after_a_keep_alive_ends_with_an_error_frame(monkeypatch) -> None:
    async def broken(receive: Any, out: Any, frames: Any, options: Any) -> None:
        with out, receive:
            # A keep-alive went out (a long tool run), so the 200 is sent.
            await out.send(KEEPALIVE)
            await receive.receive()
            raise RuntimeError("bug in the writer")

    monkeypatch.setattr(chat_route, "write_chat_sse", broken)
    async with api_stack([TextReply("Hello there")]) as (api, _), http_for(api) as http:
        with trio.fail_after(10):
            reply = await http.post("/chat/completions", json=CHAT)
    assert reply.status_code == 200
    frames = parse_sse(reply.content)
    assert frames, reply.content
    error = json.loads(frames[-1].data)["error"]
    assert error["code"] == "internal_error"


async def test_a_last_frame_that_never_reached_the_body_is_not_taken_as_said() -> None:
    frames = ChatStreamFrames("chatcmpl-x", 1, "m", include_usage=False)
    events_send, events_receive = trio.open_memory_channel[StreamEvent](8)
    # The body is behind: the writer's last piece waits for room.
    out_send, out_receive = trio.open_memory_channel[Any](0)
    turn = Turn()

    async def writer() -> None:
        with turn.scope:
            await write_chat_sse(events_receive, out_send, frames, SSEOptions(keepalive=100))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer)
        await events_send.send(MessageChunk("partial answer"))
        await events_send.send(TurnFinished("partial answer", Usage(), "stop"))
        await trio.testing.wait_all_tasks_blocked()
        # Shutdown: the turn is cancelled while that piece waits.
        turn.cancel("the server is shutting down")
    turn.result = TurnResult("partial answer", Usage(), "stop")
    turn.done.set()
    body = ChatStreamBody(b"", out_receive, turn, frames)
    pieces = [piece async for piece in body]
    assert pieces, "the stream ended without a word"
    last = parse_sse(b"".join(pieces))[-1]
    assert json.loads(last.data)["error"]["message"] == "the server is shutting down"


async def test_a_body_dropped_unsent_stops_its_turn() -> None:
    # The client went away while the response's head was being written:
    # Quart never enters the body, so close() never runs.
    frames = ChatStreamFrames("chatcmpl-x", 1, "m", include_usage=False)
    out_send, out_receive = trio.open_memory_channel[Any](0)
    turn = Turn()
    body = ChatStreamBody(b"first", out_receive, turn, frames)
    del body
    # The release is queued to run in trio's thread (the body could have been
    # collected in any thread); it runs within a few scheduler passes.
    for _ in range(200):
        if turn.scope.cancel_called:
            break
        await trio.sleep(0.001)
    assert turn.interrupted == "client went away"
    assert turn.scope.cancel_called
    # The writer learns it too: its channel has no reader any more.
    with pytest.raises(trio.BrokenResourceError):
        out_send.send_nowait(b"more")
