"""Calls to client-side tools leave the agent as ``ToolCallDelta`` events
while the model writes them; calls to the agent's own tools never do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import make_config, run_turn

from hermes_trio.agent import open_agent
from hermes_trio.events import (
    MessageChunk,
    MessageStop,
    ReasoningChunk,
    StreamEvent,
    ToolCallChunk,
    ToolCallDelta,
    TurnFinished,
)
from hermes_trio.testing import RefuseStream, TextReply, ToolCallReply, open_scripted_server

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _kinds(events: list[StreamEvent]) -> list[str]:
    return [type(e).__name__ for e in events]


async def _turn(tmp_path: Path, script: list[Any], **kwargs: Any) -> list[StreamEvent]:
    (tmp_path / "notes.txt").write_text("hello\n")
    async with open_scripted_server(script) as server:
        config = make_config(server.base_url, agent={"workdir": str(tmp_path)})
        async with open_agent(config) as agent:
            events, _ = await run_turn(agent, "Go.", client_tools=[WEATHER], **kwargs)
    return events


async def test_a_step_mixing_own_and_client_calls(tmp_path: Path) -> None:
    script = [
        ToolCallReply(
            calls=[("read_file", {"path": "notes.txt"}), ("get_weather", {"city": "Oslo"})],
            text="Both.",
            fragment_size=3,
        )
    ]
    events = await _turn(tmp_path, script)
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(d.index, d.call_id, d.name) for d in deltas if d.starts] == [
        (0, deltas[0].call_id, "get_weather")
    ]
    assert json.loads("".join(d.arguments for d in deltas)) == {"city": "Oslo"}
    assert len(deltas) > 2, "arguments go out as they arrive"
    kinds = _kinds(events)
    # Text, then the client's call as written, then the step ends and the
    # agent runs its own tool; the turn then waits for the client.
    first_delta = kinds.index("ToolCallDelta")
    assert kinds.index("MessageChunk") < first_delta
    assert first_delta < kinds.index("MessageStop") < kinds.index("ToolCallChunk")
    assert [e.tool_name for e in events if isinstance(e, ToolCallChunk)] == ["read_file"]
    end = events[-1]
    assert isinstance(end, TurnFinished) and end.finish_reason == "tool_calls"
    assert [c["function"]["name"] for c in end.tool_calls] == ["get_weather"]
    assert end.tool_calls[0]["id"] == deltas[0].call_id


@pytest.mark.parametrize("how", ["plain", "refused_stream"])
async def test_a_whole_answer_announces_each_client_call_once(tmp_path: Path, how: str) -> None:
    reply = ToolCallReply(calls=[("get_weather", {"city": "Oslo"})], text="Checking.")
    if how == "plain":
        events = await _turn(tmp_path, [reply], stream=False)
    else:
        events = await _turn(tmp_path, [RefuseStream(reply)])
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(deltas) == 1 and deltas[0].starts
    assert json.loads(deltas[0].arguments) == {"city": "Oslo"}
    kinds = _kinds(events)
    assert kinds.index("MessageChunk") < kinds.index("ToolCallDelta")


async def test_text_held_by_the_think_filter_comes_before_the_call(tmp_path: Path) -> None:
    # "<" could start a think tag, so the filter holds it until it knows.
    script = [ToolCallReply(calls=[("get_weather", {"city": "Oslo"})], text="1 <")]
    events = await _turn(tmp_path, script)
    kinds = _kinds(events)
    shown = "".join(e.text for e in events if isinstance(e, MessageChunk))
    assert shown == "1 <"
    last_text = len(kinds) - 1 - kinds[::-1].index("MessageChunk")
    assert last_text < kinds.index("ToolCallDelta")


async def test_a_whole_answer_gives_reasoning_before_text(tmp_path: Path) -> None:
    events = await _turn(tmp_path, [TextReply("42.", reasoning="Think.")], stream=False)
    kinds = [k for k in _kinds(events) if k in ("ReasoningChunk", "MessageChunk")]
    assert kinds == ["ReasoningChunk", "MessageChunk"]
    assert [e.text for e in events if isinstance(e, ReasoningChunk)] == ["Think."]
    assert isinstance(events[-2], MessageStop)
