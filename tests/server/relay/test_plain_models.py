"""Plain model routes: the model server's own models, listed and passed
straight through (no agent, no system prompt, no server-side tools)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import trio
from support import api_stack, client_for

from hermes_trio.llm.http_body import open_body
from hermes_trio.testing import ErrorReply, TextReply

UPSTREAM = "scripted-model"
TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
ON = {"upstream_models": True}


async def test_models_lists_the_model_servers_own_only_when_asked() -> None:
    async with api_stack([], api=ON) as (api, _), httpx.AsyncClient() as http:
        listed = (await http.get(f"{api.base_url}/models")).json()["data"]
        one = await http.get(f"{api.base_url}/models/{UPSTREAM}")
    assert [card["id"] for card in listed] == ["hermes-agent", UPSTREAM]
    assert one.status_code == 200 and one.json()["id"] == UPSTREAM
    async with api_stack([]) as (api, _), httpx.AsyncClient() as http:
        listed = (await http.get(f"{api.base_url}/models")).json()["data"]
        missing = await http.get(f"{api.base_url}/models/{UPSTREAM}")
    assert [card["id"] for card in listed] == ["hermes-agent"]
    assert missing.status_code == 404


async def test_a_plain_request_reaches_the_model_server_as_the_client_sent_it() -> None:
    messages = [
        {"role": "system", "content": "You write titles."},
        {"role": "user", "content": "Title for: trio nurseries"},
    ]
    async with api_stack([TextReply("Trio Nurseries")], api=ON) as (api, model):
        async with client_for(api) as client:
            reply = await client.chat.completions.create(
                model=UPSTREAM,
                messages=messages,
                tools=[TOOL],
                temperature=0.2,  # type: ignore[list-item,arg-type]
            )
    assert reply.choices[0].message.content == "Trio Nurseries"
    (sent,) = model.model_requests
    assert sent.json["messages"] == messages
    assert sent.json["tools"] == [TOOL] and sent.json["temperature"] == 0.2
    assert sent.json["model"] == UPSTREAM


async def test_the_agent_still_answers_its_own_name() -> None:
    async with api_stack([TextReply("agent here")], api=ON) as (api, model):
        async with client_for(api) as client:
            reply = await client.chat.completions.create(
                model="hermes-agent", messages=[{"role": "user", "content": "hi"}]
            )
    assert reply.choices[0].message.content == "agent here"
    (sent,) = model.model_requests
    assert sent.json["messages"][0]["role"] == "system"
    assert any(t["function"]["name"] == "terminal" for t in sent.json.get("tools", []))


async def test_a_plain_stream_is_relayed_and_a_closed_client_closes_upstream() -> None:
    slow = TextReply(tokens=["a", "b", "c"], delay=30)
    async with api_stack([TextReply(tokens=["one ", "two"]), slow], api=ON) as (api, model):
        async with client_for(api) as client:
            stream = await client.chat.completions.create(
                model=UPSTREAM, messages=[{"role": "user", "content": "go"}], stream=True
            )
            text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        body = {"model": UPSTREAM, "stream": True, "messages": [{"role": "user", "content": "x"}]}
        async with httpx.AsyncClient() as http:
            async with http.stream("POST", f"{api.base_url}/chat/completions", json=body) as r:
                assert r.headers["content-type"].startswith("text/event-stream")
                async with open_body(r, decode=False) as pieces:
                    async for piece in pieces:
                        if b'"content":"a"' in piece:
                            break
        with trio.fail_after(3):
            record = await model.wait_connection_closed(model.model_requests[-1].connection_id)
        assert record.closed_by == "client"
        with trio.fail_after(3):
            await api.state.slots.wait_idle()
    assert text == "one two"


async def test_the_model_servers_refusal_comes_back_as_it_was() -> None:
    refusal = ErrorReply(400, "context too long", code="context_length_exceeded")
    async with api_stack([refusal], api=ON) as (api, _):
        async with client_for(api) as client:
            try:
                await client.chat.completions.create(
                    model=UPSTREAM, messages=[{"role": "user", "content": "x"}], stream=True
                )
            except openai.BadRequestError as exc:
                error: Any = exc.body
            else:
                raise AssertionError("no error")
    assert error["code"] == "context_length_exceeded"
    assert json.dumps(error)
