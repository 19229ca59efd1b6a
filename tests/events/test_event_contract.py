"""The event contract of a turn, on trio's MockClock against the in-process
model double: tool-call indexes over the whole turn, and ``min_tokens``
counted in the model's tokens."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
import trio
from support import agent_on_double
from trio.testing import MockClock

from hermes_trio.consumers.editor import EditorSettings, run_editor
from hermes_trio.events import StreamEvent, ToolCallChunk, ToolCallFinished, TurnFinished
from hermes_trio.testing import FakeMessenger, RawReply, TextReply, ToolCallReply
from hermes_trio.tools import ToolContext, ToolRegistry, ToolResult


@dataclass
class Echo:
    """A tool that answers at once, without a process."""

    name: str = "echo"
    description: str = "Say it back."
    parameters: dict[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {"say": {"type": "string"}}}
    )

    def preview(self, args: dict[str, Any]) -> str:
        return str(args.get("say", ""))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(True, str(args.get("say", "")))


async def collect(agent: Any, prompt: str = "q") -> list[StreamEvent]:
    send, receive = trio.open_memory_channel[StreamEvent](64)
    seen: list[StreamEvent] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: agent.run_turn([{"role": "user", "content": prompt}], send)
        )
        async with receive:
            async for event in receive:
                seen.append(event)
    return seen


async def test_tool_call_indexes_grow_over_the_whole_turn(autojump_clock: MockClock) -> None:
    script = [
        ToolCallReply([("echo", {"say": "a"}), ("echo", {"say": "b"})]),
        ToolCallReply([("echo", {"say": "c"}), ("echo", {"say": "d"})]),
        TextReply("done"),
    ]
    async with agent_on_double(script, tools=ToolRegistry([Echo()])) as (agent, double):
        seen = await collect(agent)
    started = [(e.index, e.preview) for e in seen if isinstance(e, ToolCallChunk)]
    assert sorted(started) == [(0, "a"), (1, "b"), (2, "c"), (3, "d")]
    ended = {e.index: e.result for e in seen if isinstance(e, ToolCallFinished)}
    assert ended == {0: "a", 1: "b", 2: "c", 3: "d"}
    assert isinstance(seen[-1], TurnFinished) and seen[-1].text == "done"
    # The model still sees each step's results in its own call order.
    last = double.requests[-1].json["messages"]
    assert [m["content"] for m in last if m["role"] == "tool"] == ["a", "b", "c", "d"]


def _frame(text: str) -> bytes:
    chunk = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


_END = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":0,"model":"m",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)


async def test_min_tokens_counts_the_models_tokens_not_reads(autojump_clock: MockClock) -> None:
    # Three tokens arrive in each read of the stream, one read a second:
    # the 5th token is in the 2nd read, so the first message goes out then,
    # not at the 5th read.
    words = [f"w{n} " for n in range(15)]
    reads = [b"".join(_frame(w) for w in words[i : i + 3]) for i in range(0, 15, 3)]
    reply = RawReply([*reads, _END], delay=1.0)
    chat = FakeMessenger()
    settings = EditorSettings(edit_interval=100.0, min_tokens=5, typing_interval=0)
    async with agent_on_double([reply]) as (agent, _):
        send, receive = trio.open_memory_channel[StreamEvent](64)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.run_turn, [{"role": "user", "content": "q"}], send)
            report = await run_editor(receive, chat, settings)
    assert report.delivered
    first = chat.message_calls()[0]
    assert (first.kind, first.time) == ("send", 1.0)
    assert first.text.startswith("w0 w1 w2 w3 w4 w5")
