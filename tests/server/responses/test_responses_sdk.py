"""``/v1/responses`` driven by the official openai SDK against the real server
and the scripted model server."""

from __future__ import annotations

import json

import openai
import pytest
import trio
from openai.types.responses import Response
from support import api_stack, client_for, http_for
from test_responses_helpers import parse_sse, payloads, text_of

from hermes_trio.testing import ErrorReply, TextReply, ToolCallReply

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

EXPECTED_ORDER = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


def _collapse(types: list[str]) -> list[str]:
    out: list[str] = []
    for kind in types:
        if not out or out[-1] != kind:
            out.append(kind)
    return out


async def test_non_streaming_response_object() -> None:
    async with (
        api_stack([TextReply("Hello there, friend.")]) as (api, model),
        client_for(api) as client,
    ):
        with trio.fail_after(10):
            response = await client.responses.create(
                model="hermes-agent",
                input="hi",
                instructions="Be brief.",
                temperature=0.3,
                max_output_tokens=50,
                metadata={"ticket": "42"},
            )
            async with http_for(api) as http:
                raw = (await http.get(f"/responses/{response.id}")).json()
    assert response.output_text == "Hello there, friend."
    assert response.status == "completed"
    assert response.object == "response"
    assert response.model == "hermes-agent"
    assert response.id.startswith("resp_")
    assert response.usage is not None and response.usage.total_tokens > 0
    assert response.usage.input_tokens_details.cached_tokens == 0
    assert response.usage.output_tokens_details.reasoning_tokens == 0
    assert response.instructions == "Be brief."
    assert response.metadata == {"ticket": "42"}
    assert response.temperature == 0.3 and response.max_output_tokens == 50
    assert response.parallel_tool_calls is True and response.tool_choice == "auto"
    assert response.tools == [] and response.previous_response_id is None
    # Strict validation of the stored object against the SDK's model.
    stored = Response.model_validate(raw)
    assert stored.output_text == "Hello there, friend."
    assert raw["output"] == response.model_dump(mode="json")["output"]
    sent = model.requests[0].json
    # Instructions are layered on the agent's own system prompt.
    assert sent["messages"][0]["role"] == "system"
    assert sent["messages"][0]["content"].startswith("You are Hermes")
    assert sent["messages"][0]["content"].endswith("Be brief.")
    assert sent["messages"][1:] == [{"role": "user", "content": "hi"}]
    assert sent["temperature"] == 0.3 and sent["max_tokens"] == 50


async def test_streaming_events_in_order_with_ids() -> None:
    tokens = ["One", " two", " three", " four."]
    async with api_stack([TextReply(tokens=tokens, delay=0.01)]) as (api, _):
        async with http_for(api) as http:
            with trio.fail_after(10):
                reply = await http.post(
                    "/responses", json={"model": "m", "input": "count", "stream": True}
                )
    assert reply.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(reply.content)
    data = payloads(events)
    assert _collapse([e.event for e in events]) == EXPECTED_ORDER
    assert [d["type"] for d in data] == [e.event for e in events]
    assert [d["sequence_number"] for d in data] == list(range(len(data)))
    assert [e.id for e in events] == [str(n) for n in range(len(data))]
    assert text_of(data) == "One two three four."
    final = Response.model_validate(data[-1]["response"])
    assert final.status == "completed" and final.output_text == "One two three four."


async def test_sdk_streaming_and_stream_helper() -> None:
    script = [TextReply(tokens=["a", "b", "c"], delay=0.005), TextReply("Helper says hi.")]
    async with api_stack(script) as (api, _), client_for(api) as client:
        with trio.fail_after(10):
            stream = await client.responses.create(model="m", input="abc", stream=True)
            events = [event async for event in stream]
            async with client.responses.stream(model="m", input="hello") as helper:
                deltas = [e.delta async for e in helper if e.type == "response.output_text.delta"]
                final = await helper.get_final_response()
    assert _collapse([e.type for e in events]) == EXPECTED_ORDER
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "abc"
    assert "".join(deltas) == "Helper says hi."
    assert final.output_text == "Helper says hi." and final.status == "completed"


async def test_three_chained_turns_with_a_server_side_tool() -> None:
    script = [
        TextReply("Nice to meet you, Ada."),
        ToolCallReply(calls=[("terminal", {"command": "echo hermes-tool-ran"})], text="Checking."),
        TextReply("The command printed hermes-tool-ran."),
        TextReply("Your name is Ada."),
    ]
    async with api_stack(script, agent={"yolo": True}) as (api, model), client_for(api) as client:
        with trio.fail_after(15):
            first = await client.responses.create(model="m", input="I am Ada.")
            async with client.responses.stream(
                model="m", input="Run echo.", previous_response_id=first.id
            ) as stream:
                kinds = [event.type async for event in stream]
                second = await stream.get_final_response()
            third = await client.responses.create(
                model="m", input="What is my name?", previous_response_id=second.id
            )
    # The server ran the tool: no client is asked to run it.
    assert not any("function_call" in kind for kind in kinds)
    types = [item.type for item in second.output]
    assert types == ["message", "message"]
    assert [item.phase for item in second.output] == ["commentary", "final_answer"]
    assert second.output_text == "Checking.The command printed hermes-tool-ran."
    assert second.previous_response_id == first.id
    assert third.output_text == "Your name is Ada."
    # The third request carried the whole history, tool call and result included.
    history = model.requests[3].json["messages"][1:]
    assert [m["role"] for m in history] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert history[3]["tool_calls"][0]["function"]["name"] == "terminal"
    assert "hermes-tool-ran" in history[4]["content"]
    assert history[4]["tool_call_id"] == history[3]["tool_calls"][0]["id"]
    assert history[-1] == {"role": "user", "content": "What is my name?"}


async def test_client_side_function_tools_round_trip() -> None:
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
            assert call.type == "function_call" and call.name == "get_weather"
            assert json.loads(call.arguments) == {"city": "Paris"}
            assert first.tools[0].name == "get_weather"
            second = await client.responses.create(
                model="m",
                previous_response_id=first.id,
                tools=[WEATHER_TOOL],
                input=[{"type": "function_call_output", "call_id": call.call_id, "output": "24C"}],
            )
            with pytest.raises(openai.BadRequestError) as unknown_call:
                await client.responses.create(
                    model="m",
                    previous_response_id=second.id,
                    input=[{"type": "function_call_output", "call_id": "nope", "output": "x"}],
                )
    assert second.output_text == "It is sunny in Paris."
    sent = model.requests[1].json
    assert sent["messages"][-1] == {
        "role": "tool",
        "tool_call_id": call.call_id,
        "content": "24C",
    }
    assert any(t["function"]["name"] == "get_weather" for t in sent["tools"])
    assert "nope" in str(unknown_call.value)


async def test_reasoning_item() -> None:
    script = [TextReply("42.", reasoning="Let me think about this.")]
    async with api_stack(script) as (api, _), client_for(api) as client:
        with trio.fail_after(10):
            stream = await client.responses.create(model="m", input="?", stream=True)
            events = [e async for e in stream]
    final = events[-1].response
    assert [item.type for item in final.output] == ["reasoning", "message"]
    assert final.output[0].content[0].text == "Let me think about this."
    assert any(e.type == "response.reasoning_text.delta" for e in events)
    assert final.output_text == "42."


async def test_retrieve_delete_and_input_items() -> None:
    async with api_stack([TextReply("Stored.")]) as (api, _), client_for(api) as client:
        with trio.fail_after(10):
            created = await client.responses.create(
                model="m",
                input=[
                    {"role": "developer", "content": "Answer in one word."},
                    {"role": "user", "content": "first"},
                    {"role": "assistant", "content": "ok"},
                    {"role": "user", "content": [{"type": "input_text", "text": "second"}]},
                ],
            )
            fetched = await client.responses.retrieve(created.id)
            page = await client.responses.input_items.list(created.id, limit=3)
            every = [item async for item in client.responses.input_items.list(created.id, limit=1)]
            ascending = await client.responses.input_items.list(created.id, order="asc")
            await client.responses.delete(created.id)
            with pytest.raises(openai.NotFoundError):
                await client.responses.retrieve(created.id)
            with pytest.raises(openai.NotFoundError):
                await client.responses.delete(created.id)
    assert fetched.model_dump() == created.model_dump()
    # Newest first by default, with has_more for the rest.
    assert len(page.data) == 3 and page.has_more is True
    assert page.data[0].content[0].text == "second"
    assert len(every) == 4 and every == list(reversed(ascending.data))
    assert [item.role for item in ascending.data] == ["developer", "user", "assistant", "user"]
    assert ascending.has_more is False
    assert ascending.first_id == ascending.data[0].id


async def test_unknown_ids() -> None:
    async with api_stack([TextReply("x")]) as (api, model), client_for(api) as client:
        with trio.fail_after(10):
            for call in (
                client.responses.retrieve("resp_missing"),
                client.responses.delete("resp_missing"),
                client.responses.cancel("resp_missing"),
                client.responses.input_items.list("resp_missing"),
            ):
                with pytest.raises(openai.NotFoundError):
                    await call
            with pytest.raises(openai.BadRequestError) as bad:
                await client.responses.create(
                    model="m", input="hi", previous_response_id="resp_missing"
                )
    assert bad.value.code == "previous_response_not_found"
    assert bad.value.param == "previous_response_id"
    assert model.requests == []


async def test_store_false_keeps_nothing() -> None:
    async with (
        api_stack([TextReply("Ephemeral."), TextReply("y")]) as (api, _),
        client_for(api) as client,
    ):
        with trio.fail_after(10):
            response = await client.responses.create(model="m", input="hi", store=False)
            streamed = await client.responses.create(
                model="m", input="hi", store=False, stream=True
            )
            events = [e async for e in streamed]
            for rid in (response.id, events[-1].response.id):
                with pytest.raises(openai.NotFoundError):
                    await client.responses.retrieve(rid)
            with pytest.raises(openai.BadRequestError) as bad:
                await client.responses.create(
                    model="m", input="again", previous_response_id=response.id
                )
            with pytest.raises(openai.BadRequestError):
                await client.responses.create(model="m", input="x", store=False, background=True)
    assert response.output_text == "Ephemeral." and response.store is False
    assert events[-1].type == "response.completed"
    assert bad.value.code == "previous_response_not_found"


async def test_responses_are_scoped_to_the_api_key() -> None:
    async with (
        api_stack([TextReply("mine")]) as (api, _),
        client_for(api, api_key="key-one") as mine,
        client_for(api, api_key="key-two") as theirs,
    ):
        with trio.fail_after(10):
            response = await mine.responses.create(model="m", input="hi")
            with pytest.raises(openai.NotFoundError):
                await theirs.responses.retrieve(response.id)
            with pytest.raises(openai.NotFoundError):
                await theirs.responses.delete(response.id)
            with pytest.raises(openai.BadRequestError):
                await theirs.responses.create(
                    model="m", input="x", previous_response_id=response.id
                )
            assert (await mine.responses.retrieve(response.id)).output_text == "mine"


async def test_model_failure_streams_error_then_failed() -> None:
    script = [
        ErrorReply(status=500, message="model on fire"),
        ErrorReply(status=500, message="model on fire"),
    ]
    async with api_stack(script, model={"max_retries": 0}) as (api, _), client_for(api) as client:
        with trio.fail_after(10):
            stream = await client.responses.create(model="m", input="hi", stream=True)
            events = [e async for e in stream]
            with pytest.raises(openai.InternalServerError) as info:
                await client.responses.create(model="m", input="hi")
            failed = await client.responses.retrieve(events[-1].response.id)
    assert [e.type for e in events[-2:]] == ["error", "response.failed"]
    assert "model on fire" in events[-2].message
    assert events[-1].response.status == "failed"
    assert events[-1].response.error.code == "server_error"
    assert failed.status == "failed" and "model on fire" in failed.error.message
    assert info.value.status_code == 502 and "model on fire" in str(info.value)


async def test_length_limit_is_incomplete() -> None:
    async with (
        api_stack([TextReply("cut sho", finish_reason="length")]) as (api, _),
        client_for(api) as client,
    ):
        with trio.fail_after(10):
            response = await client.responses.create(model="m", input="hi", max_output_tokens=2)
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == "cut sho"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m"}, "input"),
        ({"model": "m", "input": ""}, "input"),
        ({"model": "m", "input": "x", "user": 7}, "user"),
        ({"model": "m", "input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"model": "m", "input": "x", "include": ["no.such.thing"]}, "include[0]"),
        ({"model": "m", "input": "x", "truncation": "sometimes"}, "truncation"),
        ({"model": "m", "input": "x", "temperature": 5}, "temperature"),
        ({"model": "m", "input": "x", "stream": "yes"}, "stream"),
        ({"model": "m", "input": "x", "conversation": "conv_1"}, "conversation"),
        ({"model": "m", "input": "x", "prompt": {"id": "p"}}, "prompt"),
        ({"model": "m", "input": [{"type": "item_reference", "id": "x"}]}, "input[0]"),
        ({"model": "m", "input": [{"type": "computer_call_output", "id": "x"}]}, "input[0].type"),
        ({"model": "m", "input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
        (
            {"model": "m", "input": [{"role": "user", "content": [{"type": "input_audio"}]}]},
            "input[0].content[0].type",
        ),
        (
            {"model": "m", "input": "x", "stream_options": {"include_obfuscation": False}},
            "stream_options",
        ),
        ({"model": "m", "input": "x", "text": {"format": {"type": "xml"}}}, "text.format.type"),
    ],
)
async def test_request_validation_names_the_field(body, param) -> None:
    async with api_stack() as (api, model):
        async with http_for(api) as http:
            with trio.fail_after(10):
                reply = await http.post("/responses", json=body)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"
    assert model.requests == []


async def test_invalid_json_and_query_parameters() -> None:
    async with api_stack([TextReply("x")]) as (api, _):
        async with http_for(api) as http:
            with trio.fail_after(10):
                bad_json = await http.post(
                    "/responses", content=b"{", headers={"Content-Type": "application/json"}
                )
                created = (await http.post("/responses", json={"model": "m", "input": "x"})).json()
                rid = created["id"]
                bad_after = await http.get(f"/responses/{rid}?stream=true&starting_after=x")
                after_without_stream = await http.get(f"/responses/{rid}?starting_after=1")
                bad_limit = await http.get(f"/responses/{rid}/input_items?limit=0")
                bad_order = await http.get(f"/responses/{rid}/input_items?order=up")
                unknown = await http.get(f"/responses/{rid}?fields=all")
    assert bad_json.status_code == 400 and bad_json.json()["error"]["code"] == "invalid_json"
    for reply, param in (
        (bad_after, "starting_after"),
        (after_without_stream, "starting_after"),
        (bad_limit, "limit"),
        (bad_order, "order"),
        (unknown, "fields"),
    ):
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["param"] == param


async def test_echoed_settings_pass_strict_validation() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    body = {
        "model": "m",
        "input": [{"type": "message", "role": "user", "content": "json please"}],
        "text": {
            "format": {"type": "json_schema", "name": "thing", "schema": schema, "strict": True},
            "verbosity": "low",
        },
        "reasoning": {"effort": "low", "summary": "auto"},
        "tools": [WEATHER_TOOL],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "parallel_tool_calls": False,
        "top_p": 0.5,
        "user": "someone",
        "service_tier": "auto",
        "prompt_cache_key": "k",
        "truncation": "disabled",
        "include": [],
        "top_logprobs": 0,
    }
    async with api_stack([TextReply('{"a": "b"}')]) as (api, model):
        async with http_for(api) as http:
            with trio.fail_after(10):
                reply = await http.post("/responses", json=body)
    assert reply.status_code == 200, reply.text
    response = Response.model_validate(reply.json())
    assert response.output_text == '{"a": "b"}'
    assert response.text.format.type == "json_schema" and response.text.verbosity == "low"
    assert response.tool_choice.name == "get_weather"
    assert response.parallel_tool_calls is False and response.top_p == 0.5
    sent = model.requests[0].json
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "thing", "schema": schema, "strict": True},
    }
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent["reasoning_effort"] == "low" and sent["verbosity"] == "low"
    assert sent["parallel_tool_calls"] is False and sent["top_p"] == 0.5


async def test_image_and_file_parts_reach_the_model() -> None:
    image = "data:image/png;base64,iVBORw0KGgo="
    async with api_stack([TextReply("A picture.")]) as (api, model), client_for(api) as client:
        with trio.fail_after(10):
            response = await client.responses.create(
                model="m",
                input=[
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_text", "text": "What is this?"},
                            {"type": "input_image", "image_url": image, "detail": "low"},
                            {"type": "input_file", "file_data": "aGk=", "filename": "a.txt"},
                        ],
                    }
                ],
            )
            items = await client.responses.input_items.list(response.id)
    assert model.requests[0].json["messages"][1]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": image, "detail": "low"}},
        {"type": "file", "file": {"file_data": "aGk=", "filename": "a.txt"}},
    ]
    parts = items.data[0].content
    assert [p.type for p in parts] == ["input_text", "input_image", "input_file"]


async def test_manual_history_with_function_call_items() -> None:
    async with (
        api_stack([TextReply("Sunny, as the tool said.")]) as (api, model),
        client_for(api) as client,
    ):
        with trio.fail_after(10):
            response = await client.responses.create(
                model="m",
                tools=[WEATHER_TOOL],
                input=[
                    {"role": "user", "content": "Weather in Paris?"},
                    {"type": "reasoning", "id": "rs_1", "summary": []},
                    {"role": "assistant", "content": "Let me look."},
                    {
                        "type": "function_call",
                        "call_id": "call_1",
                        "name": "get_weather",
                        "arguments": '{"city":"Paris"}',
                    },
                    {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
                    {"role": "user", "content": "So?"},
                ],
            )
            items = await client.responses.input_items.list(response.id, order="asc")
    assert response.output_text == "Sunny, as the tool said."
    assert model.requests[0].json["messages"][1:] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "user", "content": "So?"},
    ]
    assert [i.type for i in items.data] == [
        "message",
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert items.data[1].id == "rs_1"
