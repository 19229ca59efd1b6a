"""The same answer streamed and not streamed: byte-equal text, the same
tool calls, the same Responses items in the same order, on both endpoints.

Each scripted answer is asked for twice, once with ``stream: true`` (the
model streams too) and once without (the model answers in one piece), so
the comparison also covers the whole-answer path through the agent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from support import api_stack, http_for

from hermes_trio.testing import TextReply, ToolCallReply
from tests.server.responses.test_responses_helpers import parse_sse, payloads

WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}

ANSWERS: dict[str, list[Any]] = {
    "spaces": [TextReply("  Leading and trailing spaces.  ")],
    "newlines": [TextReply("\n\nAfter blank lines\nand before one.\n")],
    "reasoning": [TextReply("\n42.\n", reasoning="Let me think.\nIt is 42.")],
    "think_tags": [TextReply("<think>hmm</think>\n\nThe answer.")],
    "client_call": [
        ToolCallReply(calls=[("get_weather", {"city": "Paris"})], text="Checking the weather. ")
    ],
    "own_tool": [
        ToolCallReply(calls=[("read_file", {"path": "notes.txt"})], text="Let me look.\n"),
        TextReply("  The notes say hello.\n"),
    ],
    "own_and_client_call": [
        ToolCallReply(
            calls=[("read_file", {"path": "notes.txt"}), ("get_weather", {"city": "Oslo"})],
            text="Both.",
        )
    ],
}


def _chat_stream(raw: bytes) -> dict[str, Any]:
    """A streamed chat completion, put together as a client does."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish = None
    for event in parse_sse(raw):
        if event.data == "[DONE]":
            break
        choice = json.loads(event.data)["choices"][0]
        delta = choice["delta"]
        content.append(delta.get("content") or "")
        for piece in delta.get("tool_calls") or []:
            call = calls.setdefault(
                piece["index"], {"type": "function", "function": {"name": "", "arguments": ""}}
            )
            if "id" in piece:
                assert "name" in piece["function"], "the first fragment names the call"
                call["function"]["name"] = piece["function"]["name"]
            else:
                assert "name" not in piece["function"], "only the first fragment names the call"
            call["function"]["arguments"] += piece["function"].get("arguments") or ""
        finish = choice["finish_reason"] or finish
    return {
        "content": "".join(content),
        "tool_calls": [calls[i] for i in sorted(calls)],
        "finish_reason": finish,
    }


def _chat_plain(body: dict[str, Any]) -> dict[str, Any]:
    choice = body["choices"][0]
    calls = choice["message"].get("tool_calls") or []
    return {
        "content": choice["message"]["content"] or "",
        "tool_calls": [{"type": c["type"], "function": c["function"]} for c in calls],
        "finish_reason": choice["finish_reason"],
    }


def _without_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in item.items() if k not in ("id", "call_id")} for item in items]


@pytest.mark.parametrize("case", sorted(ANSWERS))
async def test_streamed_and_plain_answers_are_the_same(case: str, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    steps = ANSWERS[case]
    # Chat streamed, chat plain, Responses streamed, Responses plain.
    script = steps * 4
    agent = {"workdir": str(tmp_path)}
    chat = {
        "model": "m",
        "messages": [{"role": "user", "content": "Go."}],
        "tools": [{"type": "function", "function": WEATHER}],
    }
    responses = {"model": "m", "input": "Go.", "tools": [{"type": "function", **WEATHER}]}
    async with api_stack(script, agent=agent) as (api, _), http_for(api) as http:
        with trio.fail_after(15):
            chat_streamed = await http.post("/chat/completions", json={**chat, "stream": True})
            chat_plain = await http.post("/chat/completions", json=chat)
            resp_streamed = await http.post("/responses", json={**responses, "stream": True})
            resp_plain = await http.post("/responses", json=responses)

    streamed, plain = _chat_stream(chat_streamed.content), _chat_plain(chat_plain.json())
    assert streamed == plain

    events = payloads(parse_sse(resp_streamed.content))
    final = events[-1]["response"]
    body = resp_plain.json()
    assert _without_ids(final["output"]) == _without_ids(body["output"])
    assert final["output_text"] == body["output_text"]
    # Items went out in the order the final object lists them, and their
    # deltas add up to what it says.
    added = [e["item"]["type"] for e in events if e["type"] == "response.output_item.added"]
    assert added == [item["type"] for item in body["output"]]
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == body["output_text"]
    # And the text of both endpoints is the same, whitespace included.
    texts = [part["text"] for item in body["output"] if item["type"] == "message"
             for part in item["content"]]
    assert plain["content"] == "\n\n".join(t for t in texts if t)
