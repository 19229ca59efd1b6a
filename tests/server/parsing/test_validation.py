"""Request validation on the real server: text that is not Unicode, bodies
nested too deep, out-of-range query numbers and fields of the wrong type are
400s that name the field, on both endpoints, and nothing reaches the model
or a session."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from support import api_stack, http_for

from hermes_trio.testing import TextReply

LONE = b'"\\ud800 hi"'


def _chat(content: bytes) -> bytes:
    return b'{"model": "m", "messages": [{"role": "user", "content": ' + content + b"}]}"


async def _post_raw(api: Any, path: str, body: bytes, **headers: str) -> Any:
    async with http_for(api) as http:
        with trio.fail_after(10):
            return await http.post(
                path, content=body, headers={"Content-Type": "application/json", **headers}
            )


def _assert_400(reply: Any, param: str | None) -> dict[str, Any]:
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param, error
    return error


async def test_lone_surrogate_in_a_chat_message_is_a_400_and_the_session_survives() -> None:
    async with api_stack([TextReply("Hello.")]) as (api, model):
        bad = await _post_raw(api, "/chat/completions", _chat(LONE), **{"X-Session-ID": "s1"})
        good = await _post_raw(api, "/chat/completions", _chat(b'"hi"'), **{"X-Session-ID": "s1"})
    error = _assert_400(bad, "messages[0].content")
    assert "surrogate" in error["message"]
    assert good.status_code == 200, good.text
    # The refused message never joined the session's history.
    assert [m["content"] for m in model.model_requests[0].json["messages"][1:]] == ["hi"]


async def test_lone_surrogate_on_responses_is_a_400() -> None:
    body = b'{"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", '
    body += b'"text": "\\udc00"}]}]}'
    async with api_stack() as (api, model):
        reply = await _post_raw(api, "/responses", body)
        in_key = await _post_raw(api, "/responses", b'{"model": "m", "input": "x", "\\ud800": 1}')
    _assert_400(reply, "input[0].content[0].text")
    _assert_400(in_key, None)
    assert model.model_requests == []


@pytest.mark.parametrize("depth", [100, 1000, 100_000])
async def test_deeply_nested_body_is_a_400_naming_the_field(depth: int) -> None:
    nested = b"[" * depth + b"]" * depth
    chat = _chat(b'"x"')[:-1] + b', "tools": [{"type": "function", "function": {"name": "f", '
    chat += b'"parameters": {"type": "object", "properties": {"a": ' + nested + b"}}}}]}"
    async with api_stack() as (api, model):
        reply = await _post_raw(api, "/chat/completions", chat)
        responses = await _post_raw(
            api,
            "/responses",
            b'{"model": "m", "input": [{"role": "user", "content": ' + nested + b"}]}",
        )
    error = _assert_400(reply, "tools[0].function.parameters")
    assert "deep" in error["message"]
    _assert_400(responses, "input[0].content[0]")
    assert model.model_requests == []


async def test_starting_after_beyond_a_64_bit_integer_is_a_400() -> None:
    async with api_stack([TextReply("x")]) as (api, _):
        async with http_for(api) as http:
            with trio.fail_after(10):
                created = (await http.post("/responses", json={"model": "m", "input": "x"})).json()
                url = f"/responses/{created['id']}"
                replies = [
                    await http.get(url, params={"stream": "true", "starting_after": n})
                    for n in (str(2**63), str(2**64 + 5), "9" * 5000)
                ]
                fine = await http.get(
                    f"/responses/{created['id']}",
                    params={"stream": "true", "starting_after": str(2**63 - 1)},
                )
    for reply in replies:
        _assert_400(reply, "starting_after")
    assert fine.status_code == 200


# ---------------------------------------------------------------------------
# Fields the server does not use: api_server.extra_params

EXTRAS: dict[str, Any] = {
    # Documented by OpenAI, not used by this server.
    "verbosity": "low",
    "prompt_cache_key": "conversation-7",
    "safety_identifier": "user-hash",
    "prompt_cache_retention": "24h",
    "user": "someone",
    "metadata": {"app": "webui"},
    "store": False,
    "service_tier": "auto",
    # Sampler extensions of vLLM, llama.cpp and Open WebUI.
    "min_p": 0.05,
    "top_k": 40,
    "repetition_penalty": 1.1,
    "typical_p": 0.9,
    "mirostat": 2,
    "mirostat_tau": 5.0,
    "chat_template_kwargs": {"enable_thinking": False},
}
# Responses-only fields that are extras there too.
RESPONSES_EXTRAS = {
    k: EXTRAS[k]
    for k in (
        "prompt_cache_key",
        "safety_identifier",
        "prompt_cache_retention",
        "user",
        "service_tier",
        "min_p",
        "top_k",
        "repetition_penalty",
        "chat_template_kwargs",
    )
}
CHAT: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
RESPONSES: dict[str, Any] = {"model": "m", "input": "hi"}


async def test_extra_fields_reach_the_model_unchanged_by_default() -> None:
    async with api_stack([TextReply("a"), TextReply("b")]) as (api, model):
        async with http_for(api) as http:
            with trio.fail_after(10):
                chat = await http.post("/chat/completions", json={**CHAT, **EXTRAS})
                responses = await http.post("/responses", json={**RESPONSES, **RESPONSES_EXTRAS})
    assert chat.status_code == 200, chat.text
    assert responses.status_code == 200, responses.text
    sent_chat, sent_responses = (r.json for r in model.model_requests)
    assert {k: sent_chat.get(k) for k in EXTRAS} == EXTRAS
    assert {k: sent_responses.get(k) for k in RESPONSES_EXTRAS} == RESPONSES_EXTRAS
    # What the response object repeats is still repeated.
    echoed = responses.json()
    assert echoed["user"] == "someone" and echoed["prompt_cache_key"] == "conversation-7"


async def test_extra_fields_are_dropped_when_configured() -> None:
    api_config = {"extra_params": "drop"}
    async with api_stack([TextReply("a"), TextReply("b")], api=api_config) as (api, model):
        async with http_for(api) as http:
            with trio.fail_after(10):
                chat = await http.post(
                    "/chat/completions", json={**CHAT, **EXTRAS, "temperature": 0.5}
                )
                responses = await http.post("/responses", json={**RESPONSES, **RESPONSES_EXTRAS})
    assert chat.status_code == 200 and responses.status_code == 200
    sent_chat, sent_responses = (r.json for r in model.model_requests)
    assert not set(EXTRAS) & set(sent_chat) and not set(EXTRAS) & set(sent_responses)
    # The settings the server forwards itself are not extras.
    assert sent_chat["temperature"] == 0.5


async def test_extra_fields_are_refused_when_configured() -> None:
    api_config = {"extra_params": "reject"}
    async with api_stack([TextReply("ok")], api=api_config) as (api, model):
        async with http_for(api) as http:
            with trio.fail_after(20):
                chat = {
                    k: await http.post("/chat/completions", json={**CHAT, k: v})
                    for k, v in EXTRAS.items()
                }
                responses = {
                    k: await http.post("/responses", json={**RESPONSES, k: v})
                    for k, v in RESPONSES_EXTRAS.items()
                }
                forwarded = await http.post(
                    "/chat/completions", json={**CHAT, "seed": 1, "temperature": 0.2}
                )
    for key, reply in [*chat.items(), *responses.items()]:
        error = _assert_400(reply, key)
        assert "extra_params" in error["message"]
    # Only the one request without extras ran a turn.
    assert forwarded.status_code == 200
    assert len(model.model_requests) == 1


async def test_truncation_auto_is_accepted_on_responses() -> None:
    async with api_stack([TextReply("ok")]) as (api, model):
        async with http_for(api) as http:
            with trio.fail_after(10):
                reply = await http.post("/responses", json={**RESPONSES, "truncation": "auto"})
    assert reply.status_code == 200, reply.text
    assert reply.json()["truncation"] == "auto"
    assert "truncation" not in model.model_requests[0].json


UNHONOURABLE = [
    ("/chat/completions", {**CHAT, "n": 2}, "n"),
    ("/chat/completions", {**CHAT, "logprobs": True}, "logprobs"),
    ("/chat/completions", {**CHAT, "top_logprobs": 3}, "top_logprobs"),
    ("/chat/completions", {**CHAT, "modalities": ["text", "audio"]}, "modalities"),
    ("/chat/completions", {**CHAT, "functions": [{"name": "f"}]}, "functions"),
    ("/chat/completions", {**CHAT, "input": "x"}, "input"),
    ("/responses", {**RESPONSES, "n": 3}, "n"),
    ("/responses", {**RESPONSES, "messages": []}, "messages"),
    ("/responses", {**RESPONSES, "conversation": "conv_1"}, "conversation"),
]


async def test_what_the_server_cannot_honour_is_refused_whatever_the_policy() -> None:
    async with api_stack() as (api, model):
        async with http_for(api) as http:
            with trio.fail_after(20):
                replies = [await http.post(path, json=body) for path, body, _ in UNHONOURABLE]
    for reply, (_, _, param) in zip(replies, UNHONOURABLE, strict=True):
        _assert_400(reply, param)
    assert model.model_requests == []


# ---------------------------------------------------------------------------
# Types of the fields the server reads or forwards

TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
R_TOOL = {"type": "function", "name": "f", "parameters": {"type": "object"}}


CHAT_TYPES: list[tuple[dict[str, Any], str, str]] = [
    ({"seed": "42"}, "seed", "integer"),
    ({"seed": 1.5}, "seed", "integer"),
    ({"response_format": "json"}, "response_format", "object"),
    ({"response_format": {"type": 1}}, "response_format.type", "string"),
    (
        {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": 1}}},
        "response_format.json_schema.schema",
        "object",
    ),
    ({"parallel_tool_calls": "yes"}, "parallel_tool_calls", "true or false"),
    ({"reasoning_effort": 3}, "reasoning_effort", "string"),
    ({"logit_bias": [1]}, "logit_bias", "object"),
    ({"logit_bias": {"50256": "x"}}, "logit_bias.50256", "number"),
    ({"user": 5}, "user", "string"),
    ({"metadata": "x"}, "metadata", "object"),
    ({"metadata": {"a": 1}}, "metadata.a", "string"),
    ({"store": "yes"}, "store", "true or false"),
    ({"service_tier": 1}, "service_tier", "string"),
    ({"verbosity": ["low"]}, "verbosity", "string"),
    ({"tool_choice": 5, "tools": [TOOL]}, "tool_choice", "object"),
    (
        {"tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]},
        "tools[0].function.parameters",
        "object",
    ),
    (
        {"tools": [{"type": "function", "function": {"name": "f", "strict": "no"}}]},
        "tools[0].function.strict",
        "true or false",
    ),
    (
        {"messages": [{"role": "assistant", "content": None, "tool_calls": [{"id": 1}]}]},
        "messages[0].tool_calls[0].id",
        "string",
    ),
    (
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "u"}]}]},
        "messages[0].content[0].image_url",
        "object",
    ),
]


RESPONSES_TYPES: list[tuple[dict[str, Any], str, str]] = [
    ({"parallel_tool_calls": "yes"}, "parallel_tool_calls", "true or false"),
    ({"user": 5}, "user", "string"),
    ({"metadata": "x"}, "metadata", "object"),
    ({"store": "yes"}, "store", "true or false"),
    ({"service_tier": 1}, "service_tier", "string"),
    ({"prompt_cache_key": 1}, "prompt_cache_key", "string"),
    ({"safety_identifier": []}, "safety_identifier", "string"),
    ({"tools": [{**R_TOOL, "parameters": "x"}]}, "tools[0].parameters", "object"),
    ({"tools": [{**R_TOOL, "strict": "no"}]}, "tools[0].strict", "true or false"),
    ({"tools": [{**R_TOOL, "description": 3}]}, "tools[0].description", "string"),
    # Chat Completions fields sent here reach the model as such.
    ({"seed": "42"}, "seed", "integer"),
    ({"logit_bias": [1]}, "logit_bias", "object"),
]


async def test_fields_of_the_wrong_type_are_400s_naming_field_and_type() -> None:
    cases = [("/chat/completions", CHAT, *case) for case in CHAT_TYPES]
    cases += [("/responses", RESPONSES, *case) for case in RESPONSES_TYPES]
    async with api_stack() as (api, model):
        async with http_for(api) as http:
            with trio.fail_after(30):
                replies = [
                    await http.post(path, json={**base, **body}) for path, base, body, _, _ in cases
                ]
    for reply, (path, _, body, param, expected) in zip(replies, cases, strict=True):
        assert reply.status_code == 400, (path, body, reply.text)
        error = reply.json()["error"]
        assert error["param"] == param, (path, body, error)
        assert expected in error["message"], (path, body, error)
    assert model.model_requests == []


async def test_big_bodies_are_parsed_off_the_event_loop(monkeypatch) -> None:
    """Parsing and checking a big body would hold up every other stream
    (timing on a shared machine is no reliable test: bench/big_body.py
    measures the stall)."""
    import threading

    from hermes_trio.server.edge import bodies

    where: list[bool] = []
    parse = bodies.parse_request_json

    def recording_parse(raw: bytes) -> Any:
        where.append(threading.current_thread() is threading.main_thread())
        return parse(raw)

    monkeypatch.setattr(bodies, "parse_request_json", recording_parse)
    big = "x" * bodies.THREAD_PARSE_BYTES
    async with api_stack([TextReply("a"), TextReply("b")]) as (api, _):
        async with http_for(api) as http:
            with trio.fail_after(10):
                small = await http.post("/chat/completions", json=CHAT)
                large = await http.post(
                    "/chat/completions",
                    json={**CHAT, "messages": [{"role": "user", "content": big}]},
                )
    assert small.status_code == large.status_code == 200
    assert where == [True, False]


def test_extra_params_setting_from_the_environment() -> None:
    from hermes_trio.config import ConfigError, load_config

    assert load_config(env={"API_SERVER_EXTRA_PARAMS": "drop"}).api_server.extra_params == "drop"
    with pytest.raises(ConfigError, match="API_SERVER_EXTRA_PARAMS"):
        load_config(env={"API_SERVER_EXTRA_PARAMS": "keep"})
    with pytest.raises(ConfigError, match=r"api_server\.session_max_bytes"):
        load_config(overrides={"api_server.session_max_bytes": 10}, env={})


async def test_responses_include_is_accepted_and_checked() -> None:
    """llm, pydantic-ai and the AI SDK send ``include`` for reasoning models
    (``reasoning.encrypted_content``); the server has nothing more to add,
    but a value OpenAI does not know is still a 400 naming it."""
    ok = {"model": "m", "input": "hi", "include": ["reasoning.encrypted_content"]}
    async with api_stack([TextReply("Hello.")]) as (api, model):
        async with http_for(api) as http:
            with trio.fail_after(10):
                accepted = await http.post("/responses", json=ok)
                unknown = await http.post(
                    "/responses", json={**ok, "include": ["reasoning.encrypted_content", "x.y"]}
                )
                not_a_list = await http.post("/responses", json={**ok, "include": "x"})
                items = await http.get(
                    f"/responses/{accepted.json()['id']}/input_items",
                    params={"include[]": "message.input_image.image_url"},
                )
    assert accepted.status_code == 200, accepted.text
    assert "include" not in model.model_requests[0].json
    _assert_400(unknown, "include[1]")
    _assert_400(not_a_list, "include")
    assert items.status_code == 200, items.text
