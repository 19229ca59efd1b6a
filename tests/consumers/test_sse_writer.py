"""The Chat Completions SSE writer as a consumer, on MockClock."""

from __future__ import annotations

import json
import time
from typing import Any

import trio
import trio.testing

from hermes_trio.consumers.sse import (
    LastPiece,
    PreStreamError,
    SSEOptions,
    WriterOutput,
    write_chat_sse,
)
from hermes_trio.events import (
    ApprovalRequested,
    ApprovalResolved,
    ContextCompacted,
    MessageChunk,
    MessageStop,
    StreamEvent,
    ToolCallDelta,
    TurnFinished,
    Usage,
)
from hermes_trio.wire.chat_out import ChatStreamFrames
from hermes_trio.wire.sse import KEEPALIVE


def frames() -> ChatStreamFrames:
    return ChatStreamFrames("chatcmpl-t", 1, "m", include_usage=False)


async def test_waiting_events_go_out_as_one_piece(autojump_clock: trio.testing.MockClock) -> None:
    send, receive = trio.open_memory_channel[StreamEvent](16)
    out_send, out_receive = trio.open_memory_channel[WriterOutput](16)
    for event in (MessageChunk("a"), MessageChunk("b"), MessageStop(True),
                  TurnFinished("ab", Usage(), "stop")):
        send.send_nowait(event)
    send.close()
    await write_chat_sse(receive, out_send, frames())
    pieces = [p async for p in out_receive]
    # One piece, marked as the stream's last: the body knows its end arrived.
    assert len(pieces) == 1 and isinstance(pieces[0], LastPiece)
    data = pieces[0].data
    assert b'"content":"ab"' in data and data.endswith(b"data: [DONE]\n\n")


async def test_keep_alive_while_silent(autojump_clock: trio.testing.MockClock) -> None:
    send, receive = trio.open_memory_channel[StreamEvent](16)
    out_send, out_receive = trio.open_memory_channel[WriterOutput](16)
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
    out_send, out_receive = trio.open_memory_channel[WriterOutput](16)
    send.send_nowait(TurnFinished("", Usage(), "error", error="down", error_code="model_timeout"))
    send.close()
    await write_chat_sse(receive, out_send, frames())
    assert await out_receive.receive() == PreStreamError("down", "model_timeout")


async def test_a_closed_body_stops_the_writer_quietly() -> None:
    send, receive = trio.open_memory_channel[StreamEvent](16)
    out_send, out_receive = trio.open_memory_channel[WriterOutput](0)
    out_receive.close()  # the client went away
    send.send_nowait(MessageChunk("late"))
    await write_chat_sse(receive, out_send, frames())  # returns, raises nothing


def _first(name: str) -> dict[str, str]:
    return {"name": name, "arguments": ""}


def _tool_fragments(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for line in raw.decode().splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                out += choice["delta"].get("tool_calls") or []
    return out


async def test_client_tool_calls_go_out_as_written_and_once() -> None:
    send, receive = trio.open_memory_channel[StreamEvent](16)
    out_send, out_receive = trio.open_memory_channel[WriterOutput](16)
    calls = (
        {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}},
        {"id": "call_b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
    )
    for event in (
        MessageChunk("Hm."),
        ToolCallDelta(0, "", "call_a", "f"),
        ToolCallDelta(0, '{"x":'),
        ToolCallDelta(0, "1}"),
        # call_b could not be streamed: the agent announces it whole at the
        # step's end; the finish repeats no call.
        ToolCallDelta(1, "{}", "call_b", "g"),
        MessageStop(False),
        TurnFinished("Hm.", Usage(), "tool_calls", tool_calls=calls),
    ):
        send.send_nowait(event)
    send.close()
    await write_chat_sse(receive, out_send, frames())
    pieces = [p async for p in out_receive]
    assert isinstance(pieces[-1], LastPiece)
    raw = b"".join(
        p.data if isinstance(p, LastPiece) else p
        for p in pieces
        if not isinstance(p, PreStreamError)
    )
    assert _tool_fragments(raw) == [
        {"index": 0, "id": "call_a", "type": "function", "function": _first("f")},
        {"index": 0, "function": {"arguments": '{"x":'}},
        {"index": 0, "function": {"arguments": "1}"}},
        {"index": 1, "id": "call_b", "type": "function", "function": _first("g")},
        {"index": 1, "function": {"arguments": "{}"}},
    ]
    assert b'"finish_reason":"tool_calls"' in raw and raw.index(b'"content":"Hm."') < raw.index(
        b"call_a"
    )


def _asked(deadline: float) -> ApprovalRequested:
    return ApprovalRequested(
        id="mcpr_1",
        tool_name="terminal",
        arguments={"command": "reboot"},
        command="reboot",
        reason="rebooting the machine",
        deadline=deadline,
        timeout=300,
        index=0,
        call_id="call_1",
    )


def _events_of(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for frame in data.split(b"\n\n"):
        lines = frame.decode().split("\n")
        names = [line[7:] for line in lines if line.startswith("event: ")]
        datas = [line[6:] for line in lines if line.startswith("data: ")]
        if names and datas:
            found.append((names[0], json.loads(datas[0])))
    return found


async def test_approval_events_only_with_the_opt_in(
    autojump_clock: trio.testing.MockClock,
) -> None:
    for extensions, expected in (
        (frozenset(), []),
        (frozenset({"approvals"}), ["request", "resolved"]),
    ):
        send, receive = trio.open_memory_channel[StreamEvent](16)
        out_send, out_receive = trio.open_memory_channel[WriterOutput](16)
        send.send_nowait(_asked(trio.current_time() + 300))
        send.send_nowait(ApprovalResolved("mcpr_1", "approved", by="alice", index=0))
        send.send_nowait(TurnFinished("", Usage(), "stop"))
        send.close()
        before = time.time()
        await write_chat_sse(receive, out_send, frames(), SSEOptions(extensions=extensions))
        pieces = [p async for p in out_receive]
        data = b"".join(p.data if isinstance(p, LastPiece) else p for p in pieces)  # type: ignore[misc]
        shown = _events_of(data)
        assert [name.rsplit(".", 1)[1] for name, _ in shown] == expected
        if shown:
            request, resolved = shown[0][1], shown[1][1]
            assert request["id"] == "mcpr_1" and request["arguments"] == {"command": "reboot"}
            assert request["tool"] == "terminal" and request["timeout"] == 300
            # The trio deadline as Unix seconds: 300 s from now.
            assert before + 299 < request["expires_at"] < time.time() + 301
            assert (resolved["outcome"], resolved["by"]) == ("approved", "alice")


async def test_a_cancelled_writer_still_tells_the_question_was_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    send, receive = trio.open_memory_channel[StreamEvent](16)
    out_send, out_receive = trio.open_memory_channel[WriterOutput](16)
    options = SSEOptions(extensions=frozenset({"approvals"}))
    async with trio.open_nursery() as nursery:
        with trio.CancelScope() as scope:
            nursery.start_soon(write_chat_sse, receive, out_send, frames(), options)
            await send.send(_asked(trio.current_time() + 300))
            assert b"hermes.approval.request" in await out_receive.receive()  # type: ignore[operator]
            nursery.cancel_scope.cancel()
            # The turn's shielded cleanup sends how the question ended, then
            # closes its side; the writer drains it on its way out.
            with trio.CancelScope(shield=True):
                await send.send(ApprovalResolved("mcpr_1", "cancelled", reason="interrupted"))
                await send.aclose()
        assert not scope.cancelled_caught
    rest = [p async for p in out_receive]
    assert len(rest) == 1 and isinstance(rest[0], bytes)
    ((name, data),) = _events_of(rest[0])
    assert name == "hermes.approval.resolved" and data["outcome"] == "cancelled"


async def test_a_compaction_is_a_context_event_with_the_opt_in(
    autojump_clock: trio.testing.MockClock,
) -> None:
    compacted = ContextCompacted("summary", 41_000, 9_000, 12, 32_768, summary="secret talk")
    for extensions, expected in ((frozenset(), []), (frozenset({"context"}), [compacted])):
        send, receive = trio.open_memory_channel[StreamEvent](16)
        out_send, out_receive = trio.open_memory_channel[WriterOutput](16)
        send.send_nowait(compacted)
        send.send_nowait(MessageChunk("hi"))
        send.send_nowait(TurnFinished("hi", Usage(), "stop"))
        send.close()
        await write_chat_sse(receive, out_send, frames(), SSEOptions(extensions=extensions))
        pieces = [p async for p in out_receive]
        data = b"".join(p.data if isinstance(p, LastPiece) else p for p in pieces)  # type: ignore[misc]
        shown = _events_of(data)
        assert len(shown) == len(expected)
        if expected:
            name, fields = shown[0]
            assert name == "hermes.context.compacted"
            assert fields == {
                "type": "hermes.context.compacted",
                "how": "summary",
                "tokens_before": 41_000,
                "tokens_after": 9_000,
                "folded": 12,
                "window": 32_768,
            }
            # The summary is what the conversation said: not for a status event.
            assert b"secret talk" not in data
