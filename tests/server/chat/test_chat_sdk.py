"""The API server driven by the official openai SDK (async and sync)."""

from __future__ import annotations

import json

import openai
import pytest
import trio
from support import api_stack, client_for

from hermes_trio.testing import ErrorReply, Stall, TextReply, ToolCallReply

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


async def test_models_lists_the_configured_name() -> None:
    async with api_stack(api={"model_name": "my-agent"}) as (api, _), client_for(api) as client:
        page = await client.models.list()
    assert [m.id for m in page.data] == ["my-agent"]


async def test_non_streaming_completion() -> None:
    async with (
        api_stack([TextReply("Hello there, friend.")]) as (api, model),
        client_for(api) as client,
    ):
        completion = await client.chat.completions.create(
            model="hermes-agent",
            messages=[{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": "hi"}],
            temperature=0.3,
            max_tokens=50,
        )
    assert completion.choices[0].message.content == "Hello there, friend."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "hermes-agent"
    assert completion.usage is not None and completion.usage.total_tokens > 0
    sent = model.requests[0].json
    assert sent["temperature"] == 0.3 and sent["max_tokens"] == 50
    # The client's system message is layered on the agent's own prompt.
    assert sent["messages"][0]["role"] == "system"
    assert sent["messages"][0]["content"].endswith("Be brief.")
    assert sent["messages"][0]["content"].startswith("You are Hermes")
    # `model` is echoed but does not pick the upstream model by default.
    assert sent["model"] == "scripted-model"


async def test_model_override_when_allowed() -> None:
    async with (
        api_stack([TextReply("x")], api={"allow_model_override": True}) as (api, model),
        client_for(api) as client,
    ):
        await client.chat.completions.create(
            model="other-model", messages=[{"role": "user", "content": "hi"}]
        )
    assert model.requests[0].json["model"] == "other-model"


async def test_streaming_with_usage() -> None:
    tokens = ["One", " two", " three", " four."]
    async with (
        api_stack([TextReply(tokens=tokens, delay=0.01)]) as (api, _),
        client_for(api) as client,
    ):
        stream = await client.chat.completions.create(
            model="hermes-agent",
            messages=[{"role": "user", "content": "count"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "One two three four."
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.choices[0].delta.role is None for c in chunks[1:] if c.choices)
    assert [c.choices[0].finish_reason for c in chunks if c.choices and
            c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    assert len({c.id for c in chunks}) == 1


async def test_sync_client_in_a_worker_thread() -> None:
    async with api_stack([TextReply("sync hello"), TextReply(tokens=["a", "b"])]) as (api, _):

        def talk() -> tuple[str, str]:
            with openai.OpenAI(base_url=api.base_url, api_key="x", max_retries=0) as client:
                plain = client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}]
                )
                streamed = client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}], stream=True
                )
                text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
            return plain.choices[0].message.content or "", text

        plain, streamed = await trio.to_thread.run_sync(talk)
    assert plain == "sync hello" and streamed == "ab"


async def test_client_side_tool_calls_round_trip() -> None:
    script = [
        ToolCallReply(calls=[("get_weather", {"city": "Paris"})], fragment_size=5),
        TextReply("It is sunny in Paris."),
        ToolCallReply(calls=[("get_weather", {"city": "Oslo"})]),
    ]
    async with api_stack(script) as (api, model), client_for(api) as client:
        messages = [{"role": "user", "content": "Weather in Paris?"}]
        first = await client.chat.completions.create(
            model="hermes-agent", messages=messages, tools=[WEATHER_TOOL]
        )
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        call = choice.message.tool_calls[0]
        assert call.function.name == "get_weather"
        assert json.loads(call.function.arguments) == {"city": "Paris"}
        messages.append(choice.message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 24C"})
        second = await client.chat.completions.create(
            model="hermes-agent", messages=messages, tools=[WEATHER_TOOL]
        )
        assert second.choices[0].message.content == "It is sunny in Paris."
        # Streaming: the calls arrive as fragments with finish_reason tool_calls.
        stream = await client.chat.completions.create(
            model="hermes-agent",
            messages=[{"role": "user", "content": "Oslo?"}],
            tools=[WEATHER_TOOL],
            stream=True,
        )
        chunks = [c async for c in stream]
    fragments = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert fragments[0].id and fragments[0].function.name == "get_weather"
    args = "".join(f.function.arguments or "" for f in fragments)
    assert json.loads(args) == {"city": "Oslo"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    # The model saw the client's tool and, on the second request, the result.
    assert any(t["function"]["name"] == "get_weather" for t in model.requests[0].json["tools"])
    assert model.requests[1].json["messages"][-1]["content"] == "sunny, 24C"


async def test_errors_map_to_sdk_exceptions() -> None:
    async with (
        api_stack(
            [ErrorReply(status=500, message="model on fire")],
            model={"max_retries": 0},
            api={"key": "sekrit", "max_concurrent": 1},
        ) as (api, _),
        client_for(api, api_key="wrong") as stranger,
        client_for(api, api_key="sekrit") as client,
    ):
        with pytest.raises(openai.AuthenticationError):
            await stranger.models.list()
        with pytest.raises(openai.BadRequestError) as bad:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], n=2
            )
        assert "'n'" in str(bad.value)
        with pytest.raises(openai.InternalServerError) as upstream:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
        assert upstream.value.status_code == 502
        assert "model on fire" in str(upstream.value)
        with pytest.raises(openai.NotFoundError):
            await client.models.retrieve("nope")


async def test_timeout_maps_to_504() -> None:
    async with (
        api_stack(
            [Stall(seconds=30)], model={"timeouts": {"connect": 2, "first_token": 0.2,
                                                      "idle": 5, "request": 5}}
        ) as (api, _),
        client_for(api) as client,
    ):
        with pytest.raises(openai.InternalServerError) as info:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )
    assert info.value.status_code == 504


async def test_rate_limit_maps_to_sdk_error() -> None:
    async with (
        api_stack([Stall(seconds=30)], api={"max_concurrent": 1}) as (api, model),
        client_for(api) as client,
    ):
        async with trio.open_nursery() as nursery:

            async def hold() -> None:
                stream = await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}], stream=True
                )
                async for _ in stream:
                    pass

            nursery.start_soon(hold)
            await model.wait_request(1)
            with pytest.raises(openai.RateLimitError):
                await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}]
                )
            nursery.cancel_scope.cancel()
