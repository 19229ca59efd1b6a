"""The kit's scripted model with a context window: its card says the window
(``max_model_len``, as vLLM's), a prompt longer than it is refused with
OpenAI's 400 ``context_length_exceeded`` before any script entry is taken,
and the usage counts the prompt as the refusal does (``prompt_tokens``)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from hermes_trio.config import ModelConfig
from hermes_trio.llm import ModelClient, ModelError, ModelRequest, make_http_client
from hermes_trio.testing import (
    ModelDouble,
    ScriptedModelServer,
    TextReply,
    ToolCallReply,
    open_scripted_server,
    prompt_tokens,
)
from hermes_trio.wire.chat_chunks import ChunkDelta


def chat(*texts: str, stream: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "scripted-model",
        "messages": [{"role": "user", "content": text} for text in texts],
    }
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def test_the_count_is_documented_pieces_plus_four_per_message() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "Be brief."},  # 4 + 2
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},  # 3
                    {"type": "image_url", "image_url": {"url": "data:,"}},  # 85
                ],
            },  # 4
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        # name: 1; arguments '{"path": "a b"}': 3
                        "function": {"name": "read_file", "arguments": '{"path": "a b"}'},
                    }
                ],
            },  # 4
            {"role": "tool", "tool_call_id": "c1", "content": "one two three"},  # 4 + 3
        ],
        "tools": [{"type": "function", "function": {"name": "read_file"}}],  # not counted
        "max_tokens": 100,  # not counted
    }
    assert prompt_tokens(body) == (4 + 2) + (4 + 3 + 85) + (4 + 1 + 3) + (4 + 3)
    responses = {
        "instructions": "Be brief.",  # 4 + 2
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "What is this?"}]},
            {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "a b"},
        ],
    }
    assert prompt_tokens(responses) == (4 + 2) + (4 + 3) + (4 + 2) + (4 + 2)
    assert prompt_tokens({"input": "hello there"}) == 4 + 2
    assert prompt_tokens({}) == 0


async def test_the_card_states_the_window_and_a_long_prompt_is_refused() -> None:
    fits = chat("one two three")  # 4 + 3 tokens
    too_long = chat("one two three", "four five six seven")  # 7 + 4 + 4
    script = [TextReply("first"), TextReply("second")]
    async with (
        open_scripted_server(script, context_window=10) as server,
        httpx.AsyncClient(base_url=server.base_url) as http,
    ):
        models = (await http.get("/models")).json()
        refused = await http.post("/chat/completions", json=too_long)
        remaining = server.remaining
        answered = await http.post("/chat/completions", json=fits)
    assert models["data"][0]["max_model_len"] == 10
    assert refused.status_code == 400
    assert refused.json() == {
        "error": {
            "message": "This model's maximum context length is 10 tokens. However, your "
            "messages resulted in 15 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    # Refused before the script was touched; still recorded.
    assert remaining == script
    assert server.model_requests[0].step is None
    assert answered.json()["choices"][0]["message"]["content"] == "first"
    assert answered.json()["usage"]["prompt_tokens"] == 7 == prompt_tokens(fits)


async def test_a_streamed_answers_usage_is_the_count_that_judged_it() -> None:
    body = chat("a long enough question", stream=True)
    async with (
        open_scripted_server([TextReply("yes")], context_window=1000) as server,
        httpx.AsyncClient(base_url=server.base_url) as http,
        http.stream("POST", "/chat/completions", json=body) as reply,
    ):
        lines = [line async for line in reply.aiter_lines() if line.startswith("data: {")]
    usage = json.loads(lines[-1][6:])["usage"]
    assert usage["prompt_tokens"] == prompt_tokens(body) == 4 + 4


async def test_a_responses_request_is_refused_on_its_input() -> None:
    body = {"model": "scripted-model", "input": "one two three four five six seven"}
    async with (
        open_scripted_server([TextReply("never")], context_window=8) as server,
        httpx.AsyncClient(base_url=server.base_url) as http,
    ):
        refused = await http.post("/responses", json=body)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (error["code"], error["param"]) == ("context_length_exceeded", "input")
    assert "maximum context length is 8 tokens" in error["message"]
    assert "resulted in 11 tokens" in error["message"]


async def test_without_a_window_nothing_changes() -> None:
    async with (
        open_scripted_server([TextReply("ok")]) as server,
        httpx.AsyncClient(base_url=server.base_url) as http,
    ):
        card = (await http.get("/models")).json()["data"][0]
        answered = await http.post("/chat/completions", json=chat("word " * 5000))
    assert "max_model_len" not in card
    assert answered.status_code == 200


def test_a_window_below_one_token_is_refused() -> None:
    with pytest.raises(ValueError, match="context_window"):
        ScriptedModelServer(context_window=0)


async def test_the_model_client_reads_the_refusal_as_context_length_exceeded() -> None:
    double = ModelDouble([ToolCallReply([("ls", {})])], context_window=10)
    config = ModelConfig(base_url=double.base_url, name="scripted-model", max_retries=0)

    async def ignore(delta: ChunkDelta) -> None:
        pass

    request = ModelRequest(
        # 4 + 8 tokens
        messages=[{"role": "user", "content": "please list every file in this folder now"}]
    )
    async with make_http_client(config, transport=double) as http:
        client = ModelClient(config, http)
        assert (await client.context_window()).tokens == 10
        with pytest.raises(ModelError) as refused:
            await client.complete(request, stream=True, on_delta=ignore)
    assert refused.value.code == "context_length_exceeded"
    assert refused.value.status == 400
    assert "maximum context length is 10 tokens" in refused.value.message
    assert len(double.remaining) == 1
