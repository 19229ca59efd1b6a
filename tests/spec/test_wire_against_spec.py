"""Every object the API server sends today, checked against OpenAI's
published OpenAPI schemas (tests/spec/openai_schemas.json): a non-streamed
and a streamed Response with a tool call in it, a chat completion and its
chunks, the model list and an error."""

from __future__ import annotations

import json
from typing import Any

from openai_spec import assert_valid
from support import api_stack, http_for

from hermes_trio.testing import TextReply, ToolCallReply

SCRIPT = [
    ToolCallReply(calls=[("read_file", {"path": "missing.txt"})], text="Looking."),
    TextReply("It is not there."),
    ToolCallReply(calls=[("get_weather", {"city": "Paris"})], text="Asking."),
    TextReply("Hello there."),
    TextReply("Hello again."),
]
# A client-side tool: its call is a function_call item the client runs.
WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}


def _sse_data(body: str) -> list[dict[str, Any]]:
    frames = []
    for line in body.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            frames.append(json.loads(line[len("data: ") :]))
    return frames


async def test_responses_chat_models_and_errors_match_the_spec() -> None:
    async with api_stack(SCRIPT) as (api, _), http_for(api) as http:
        plain = await http.post("/responses", json={"model": "hermes-agent", "input": "where?"})
        assert plain.status_code == 200
        assert_valid(plain.json(), "Response")

        streamed = await http.post(
            "/responses",
            json={"model": "hermes-agent", "input": "weather?", "stream": True, "tools": [WEATHER]},
        )
        events = _sse_data(streamed.text)
        assert events and events[-1]["type"] == "response.completed"
        assert {e["item"]["type"] for e in events if e["type"] == "response.output_item.done"} == {
            "function_call",
            "message",
        }
        for event in events:
            assert_valid(event, "ResponseStreamEvent")

        chat = await http.post(
            "/chat/completions",
            json={"model": "hermes-agent", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert_valid(chat.json(), "CreateChatCompletionResponse")
        chunks = await http.post(
            "/chat/completions",
            json={
                "model": "hermes-agent",
                "messages": [{"role": "user", "content": "hi"}],
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        )
        frames = _sse_data(chunks.text)
        assert frames
        for frame in frames:
            assert_valid(frame, "CreateChatCompletionStreamResponse")

        assert_valid((await http.get("/models")).json(), "ListModelsResponse")
        missing = await http.post("/responses", json={"model": "hermes-agent"})
        assert missing.status_code == 400
        assert_valid(missing.json(), "ErrorResponse")
