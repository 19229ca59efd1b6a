"""The Chat Completions SSE writer as a consumer, on MockClock."""

from __future__ import annotations

import trio
import trio.testing

from hermes_trio.consumers.sse import KEEPALIVE, PreStreamError, SSEOptions, write_chat_sse
from hermes_trio.events import MessageChunk, MessageStop, StreamEvent, TurnFinished, Usage
from hermes_trio.wire.chat_out import ChatStreamFrames


def frames() -> ChatStreamFrames:
    return ChatStreamFrames("chatcmpl-t", 1, "m", include_usage=False)


async def test_waiting_events_go_out_as_one_piece(autojump_clock: trio.testing.MockClock) -> None:
    send, receive = trio.open_memory_channel[StreamEvent](16)
    out_send, out_receive = trio.open_memory_channel[bytes | PreStreamError](16)
    for event in (MessageChunk("a"), MessageChunk("b"), MessageStop(True),
                  TurnFinished("ab", Usage(), "stop")):
        send.send_nowait(event)
    send.close()
    await write_chat_sse(receive, out_send, frames())
    pieces = [p async for p in out_receive]
    assert len(pieces) == 1
    assert b'"content":"ab"' in pieces[0] and pieces[0].endswith(b"data: [DONE]\n\n")


async def test_keep_alive_while_silent(autojump_clock: trio.testing.MockClock) -> None:
    send, receive = trio.open_memory_channel[StreamEvent](16)
    out_send, out_receive = trio.open_memory_channel[bytes | PreStreamError](16)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_chat_sse, receive, out_send, frames(), SSEOptions(keepalive=10))
        start = trio.current_time()
        assert await out_receive.receive() == KEEPALIVE
        assert trio.current_time() - start == 10
        assert await out_receive.receive() == KEEPALIVE
        assert trio.current_time() - start == 20
        await send.send(MessageChunk("x"))
        assert b'"content":"x"' in await out_receive.receive()
        await send.aclose()


async def test_a_model_failure_before_any_output_is_a_pre_stream_error() -> None:
    send, receive = trio.open_memory_channel[StreamEvent](16)
    out_send, out_receive = trio.open_memory_channel[bytes | PreStreamError](16)
    send.send_nowait(TurnFinished("", Usage(), "error", error="down", error_code="model_timeout"))
    send.close()
    await write_chat_sse(receive, out_send, frames())
    assert await out_receive.receive() == PreStreamError(504, "down", "model_timeout")


async def test_a_closed_body_stops_the_writer_quietly() -> None:
    send, receive = trio.open_memory_channel[StreamEvent](16)
    out_send, out_receive = trio.open_memory_channel[bytes | PreStreamError](0)
    out_receive.close()  # the client went away
    send.send_nowait(MessageChunk("late"))
    await write_chat_sse(receive, out_send, frames())  # returns, raises nothing
