"""What real clients of ``/v1/responses`` and ``/v1/chat/completions`` rely
on: stored items referenced by id (``item_reference``, as the Vercel AI SDK
sends them), the agent's own tool calls never presented as calls the client
must run, and client tool calls streamed as the model writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import trio
from support import api_stack, client_for, http_for
from test_responses_helpers import parse_sse, payloads

from hermes_trio.llm.http_body import open_body
from hermes_trio.testing import TextReply, ToolCallReply
from hermes_trio.wire.sse import SSEDecoder, SSEEvent

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
CHAT_WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": WEATHER_TOOL["parameters"],
    },
}


def _read_file_then_answer() -> list[Any]:
    return [
        ToolCallReply(calls=[("read_file", {"path": "notes.txt"})], text="Let me look."),
        TextReply("The notes say hello."),
    ]


def _function_items(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [i for i in items if i.get("type") in ("function_call", "function_call_output")]


# -- item_reference --------------------------------------------------------


async def test_item_reference_to_an_earlier_response_is_resolved() -> None:
    """The AI SDK's second turn: the whole history again, the earlier answer
    as an ``item_reference`` and no ``previous_response_id``."""
    script = [TextReply("Nice to meet you, Ada."), TextReply("Your name is Ada.")]
    async with api_stack(script) as (api, model), client_for(api) as client:
        with trio.fail_after(10):
            first = await client.responses.create(model="m", input="I am Ada.")
            answer_id = first.output[0].id
            second = await client.responses.create(
                model="m",
                input=[
                    {"role": "user", "content": [{"type": "input_text", "text": "I am Ada."}]},
                    {"type": "item_reference", "id": answer_id},
                    {"role": "user", "content": [{"type": "input_text", "text": "My name?"}]},
                ],
            )
            listed = await client.responses.input_items.list(second.id, order="asc")
    assert second.output_text == "Your name is Ada."
    sent = model.model_requests[1].json["messages"][1:]
    assert sent == [
        {"role": "user", "content": "I am Ada."},
        {"role": "assistant", "content": "Nice to meet you, Ada."},
        {"role": "user", "content": "My name?"},
    ]
    # The listing shows the item the reference stood for.
    assert [item.type for item in listed.data] == ["message", "message", "message"]
    assert listed.data[1].id == answer_id and listed.data[1].role == "assistant"


async def test_item_reference_to_a_client_function_call() -> None:
    script = [
        ToolCallReply(calls=[("get_weather", {"city": "Paris"})]),
        TextReply("It is sunny in Paris."),
    ]
    async with api_stack(script) as (api, model), client_for(api) as client:
        with trio.fail_after(10):
            first = await client.responses.create(
                model="m", input="Weather in Paris?", tools=[WEATHER_TOOL]
            )
            call = first.output[-1]
            assert call.type == "function_call"
            second = await client.responses.create(
                model="m",
                tools=[WEATHER_TOOL],
                input=[
                    {"role": "user", "content": "Weather in Paris?"},
                    {"type": "item_reference", "id": call.id},
                    {"type": "function_call_output", "call_id": call.call_id, "output": "24C"},
                ],
            )
    assert second.output_text == "It is sunny in Paris."
    sent = model.model_requests[1].json["messages"][1:]
    assert sent[1]["tool_calls"][0]["id"] == call.call_id
    assert sent[1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert sent[2] == {"role": "tool", "tool_call_id": call.call_id, "content": "24C"}


async def test_unknown_item_reference_is_a_400_naming_it() -> None:
    async with api_stack([TextReply("Hi.")]) as (api, _), client_for(api) as client:
        with trio.fail_after(10):
            first = await client.responses.create(model="m", input="hi")
            with pytest.raises(openai.BadRequestError) as unknown:
                await client.responses.create(
                    model="m",
                    input=[
                        {"role": "user", "content": "hi"},
                        {"type": "item_reference", "id": "msg_nope"},
                    ],
                )
            # Another API key's items do not exist for this one.
            async with client_for(api, api_key="someone-else") as other:
                with pytest.raises(openai.BadRequestError) as foreign:
                    await other.responses.create(
                        model="m",
                        input=[{"type": "item_reference", "id": first.output[0].id}],
                    )
            with pytest.raises(openai.BadRequestError) as malformed:
                await client.responses.create(
                    model="m", input=[{"type": "item_reference", "id": 7}]
                )
    assert "msg_nope" in unknown.value.message
    assert unknown.value.body["param"] == "input[1]"
    assert first.output[0].id in foreign.value.message
    assert malformed.value.body["param"] == "input[0].id"


# -- the agent's own tools --------------------------------------------------


async def test_server_side_tool_calls_are_not_function_call_items(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    script = [*_read_file_then_answer(), *_read_file_then_answer(), TextReply("Still hello.")]
    agent = {"workdir": str(tmp_path)}
    async with api_stack(script, agent=agent) as (api, model), client_for(api) as client:
        with trio.fail_after(10):
            plain = await client.responses.create(model="m", input="What do my notes say?")
            async with http_for(api) as http:
                reply = await http.post(
                    "/responses", json={"model": "m", "input": "And now?", "stream": True}
                )
                stored = (await http.get(f"/responses/{plain.id}")).json()
                items = (await http.get(f"/responses/{plain.id}/input_items")).json()
            third = await client.responses.create(
                model="m", input="Again?", previous_response_id=plain.id
            )
    events = payloads(parse_sse(reply.content))
    streamed = events[-1]["response"]
    for output in (plain.model_dump(mode="json")["output"], streamed["output"], stored["output"]):
        assert [item["type"] for item in output] == ["message", "message"]
    assert plain.output_text == "Let me look.The notes say hello."
    assert stored["output_text"] == plain.output_text
    assert not any("function_call" in e["type"] for e in events)
    assert not any(
        e.get("item", {}).get("type", "").startswith("function_call") for e in events
    )
    assert _function_items(items["data"]) == []
    # The conversation the next turn continues from still has the tool's work.
    history = model.model_requests[4].json["messages"]
    assert [m["role"] for m in history[1:]] == ["user", "assistant", "tool", "assistant", "user"]
    assert history[2]["tool_calls"][0]["function"]["name"] == "read_file"
    assert "hello" in history[3]["content"]
    assert third.output_text == "Still hello."


async def test_tool_events_extension_on_responses(tmp_path: Path) -> None:
    """With ``X-Hermes-Stream-Extensions: tools`` the agent's tool runs show
    as named ``hermes.tool.*`` events, which the SDK passes through."""
    (tmp_path / "notes.txt").write_text("hello\n")
    script = [*_read_file_then_answer(), *_read_file_then_answer()]
    headers = {"X-Hermes-Stream-Extensions": "tools"}
    agent = {"workdir": str(tmp_path)}
    async with api_stack(script, agent=agent) as (api, _), client_for(api) as client:
        with trio.fail_after(10):
            async with http_for(api) as http:
                reply = await http.post(
                    "/responses",
                    json={"model": "m", "input": "Notes?", "stream": True},
                    headers=headers,
                )
            stream = await client.responses.create(
                model="m", input="Notes?", stream=True, extra_headers=headers
            )
            seen = [event async for event in stream]
    raw = parse_sse(reply.content)
    data = payloads(raw)
    assert [d["sequence_number"] for d in data] == list(range(len(data)))
    tools = [d for d in data if d["type"].startswith("hermes.tool.")]
    assert [d["type"] for d in tools] == ["hermes.tool.started", "hermes.tool.finished"]
    assert [e.event for e in raw if e.event.startswith("hermes.")] == [d["type"] for d in tools]
    started, finished = tools
    assert started["tool"] == "read_file" and started["preview"] == "notes.txt"
    assert finished["ok"] is True and finished["call_id"] == started["call_id"]
    assert [i["type"] for i in data[-1]["response"]["output"]] == ["message", "message"]
    # The SDK yields them as events of their own type and finishes normally.
    kinds = [event.type for event in seen]
    assert "hermes.tool.started" in kinds and kinds[-1] == "response.completed"


async def test_unknown_stream_extension_on_responses_is_a_400() -> None:
    async with api_stack([]) as (api, _), http_for(api) as http:
        reply = await http.post(
            "/responses",
            json={"model": "m", "input": "x", "stream": True},
            headers={"X-Hermes-Stream-Extensions": "tools, sparkles"},
        )
    assert reply.status_code == 400
    assert "sparkles" in reply.json()["error"]["message"]


# -- client tool calls stream as they arrive ---------------------------------


def _is_paris(arguments: str) -> bool:
    try:
        return bool(json.loads(arguments) == {"city": "Paris"})
    except ValueError:
        return False


async def _until(
    response: httpx.Response, found: Any, decoder: SSEDecoder | None = None
) -> list[SSEEvent]:
    """Read SSE events until ``found(event)`` holds; returns those read."""
    decoder = decoder or SSEDecoder()
    seen: list[SSEEvent] = []
    async with open_body(response, decode=False) as pieces:
        async for piece in pieces:
            for event in decoder.feed(piece):
                if isinstance(event, SSEEvent):
                    seen.append(event)
                    if found(event):
                        return seen
    raise AssertionError("the stream ended first")


async def test_chat_client_tool_arguments_stream_as_they_arrive() -> None:
    """The model holds its finish back for an hour after the last fragment:
    every fragment must reach the client before that."""
    script = [
        ToolCallReply(calls=[("get_weather", {"city": "Paris"})], text="Hm.", finish_delay=3600)
    ]
    body = {
        "model": "m",
        "stream": True,
        "messages": [{"role": "user", "content": "Weather?"}],
        "tools": [CHAT_WEATHER_TOOL],
    }
    args: list[str] = []

    def complete(event: SSEEvent) -> bool:
        delta = json.loads(event.data)["choices"][0]["delta"]
        for call in delta.get("tool_calls") or []:
            args.append(call["function"].get("arguments", ""))
        return _is_paris("".join(args))

    async with api_stack(script) as (api, _), http_for(api) as http:
        with trio.fail_after(5):
            async with http.stream("POST", "/chat/completions", json=body) as response:
                seen = await _until(response, complete)
    deltas = [json.loads(e.data)["choices"][0]["delta"] for e in seen]
    calls = [c for d in deltas for c in d.get("tool_calls") or []]
    assert calls[0]["id"] and calls[0]["function"]["name"] == "get_weather"
    assert all(c["index"] == 0 for c in calls)
    assert all("id" not in c and "name" not in c["function"] for c in calls[1:])
    assert len(calls) > 2
    assert "".join(d.get("content") or "" for d in deltas) == "Hm."


async def test_responses_client_tool_arguments_stream_as_they_arrive() -> None:
    script = [
        ToolCallReply(calls=[("get_weather", {"city": "Paris"})], text="Hm.", finish_delay=3600)
    ]
    body = {"model": "m", "input": "Weather?", "stream": True, "tools": [WEATHER_TOOL]}
    args: list[str] = []

    def complete(event: SSEEvent) -> bool:
        if event.event == "response.function_call_arguments.delta":
            args.append(json.loads(event.data)["delta"])
        return _is_paris("".join(args))

    async with api_stack(script) as (api, _), http_for(api) as http:
        with trio.fail_after(5):
            async with http.stream("POST", "/responses", json=body) as response:
                seen = await _until(response, complete)
    data = payloads(seen)
    added = [d for d in data if d["type"] == "response.output_item.added"]
    assert [a["item"]["type"] for a in added] == ["message", "function_call"]
    assert added[1]["item"]["name"] == "get_weather" and added[1]["item"]["arguments"] == ""
    assert len(args) > 1
