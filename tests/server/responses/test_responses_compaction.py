"""Conversations that outlive the model's window on ``/v1/responses``, as
OpenAI documents it: ``context_management`` compaction (a ``compaction``
item), ``truncation: "auto"`` and ``"disabled"``, and
``POST /v1/responses/compact``; driven with the official openai SDK against
the real server and the scripted model server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import openai
import pytest
import trio
from openai_spec import assert_valid
from support import client_for, http_for, make_config
from test_responses_helpers import parse_sse, payloads

from hermes_trio.config import ApiServerConfig, CompactionConfig
from hermes_trio.server.run import ApiServer, open_api_server
from hermes_trio.testing import (
    RecordedRequest,
    ScriptedModelServer,
    TextReply,
    open_scripted_server,
)
from hermes_trio.wire.context import SUMMARY_MARK

# Small enough that a 30-turn chain passes it several times over.
WINDOW = 4000
COMPACTION = CompactionConfig(summary_max_tokens=100, keep_recent=200)
FILLER = "The quick brown fox jumps over the lazy dog again and again. " * 4


def _reply(request: RecordedRequest) -> TextReply:
    """Summary requests (the system message that starts "You write the
    memory") get a summary; every other request a longish answer."""
    messages = request.json.get("messages") or []
    first = messages[0].get("content") if messages else ""
    if isinstance(first, str) and first.startswith("You write the memory"):
        return TextReply("SUMMARY: the user counted turns and liked foxes.")
    return TextReply("Noted. " + FILLER)


@asynccontextmanager
async def _stack() -> AsyncIterator[tuple[ApiServer, ScriptedModelServer]]:
    async with open_scripted_server(default=_reply) as model_server:
        config = make_config(
            model_server.base_url,
            model={"context_window": WINDOW},
            agent={"tools": []},
            api_server=ApiServerConfig(),
            compaction=COMPACTION,
        )
        async with open_api_server(config, port=0) as api_server:
            yield api_server, model_server


def _model_calls(model: ScriptedModelServer) -> list[RecordedRequest]:
    return [r for r in model.model_requests if not _is_summary_request(r)]


def _is_summary_request(r: RecordedRequest) -> bool:
    messages = r.json.get("messages") or []
    first = messages[0].get("content") if messages else ""
    return isinstance(first, str) and first.startswith("You write the memory")


async def test_a_30_turn_chain_with_context_management_compacts() -> None:
    async with _stack() as (api, model), client_for(api) as client:
        previous: str | None = None
        compactions: list[Any] = []
        with trio.fail_after(120):
            for turn in range(30):
                response = await client.responses.create(
                    model="hermes-agent",
                    input=f"Turn {turn}: {FILLER}",
                    previous_response_id=previous,
                    context_management=[{"type": "compaction", "compact_threshold": 1000}],
                )
                assert response.status == "completed", response.error
                raw = response.model_dump(mode="json", exclude_unset=True)
                assert_valid(raw, "Response")
                compactions += [i for i in raw["output"] if i["type"] == "compaction"]
                previous = response.id
    assert compactions, "no compaction item in 30 turns"
    # A compacted response is stored as the new base of the chain: the next
    # turn continues from the summary, not from the whole chain again (which
    # would need a summary at every turn).
    summaries = [r for r in model.model_requests if _is_summary_request(r)]
    assert len(compactions) == len(summaries) <= 10
    for item in compactions:
        assert item["id"].startswith("cmp_") and item["encrypted_content"]
        assert_valid(item, "CompactionBody")
        assert "SUMMARY" not in item["encrypted_content"]
    # Each request after the first compaction starts from the summary, and
    # none of them carries the whole chain.
    last = _model_calls(model)[-1].json["messages"]
    assert any(str(m.get("content", "")).startswith(SUMMARY_MARK) for m in last)
    assert not any("Turn 0:" in str(m.get("content", "")) for m in last)
    assert any("Turn 29:" in str(m.get("content", "")) for m in last)


async def test_a_compaction_streams_its_item_with_added_and_done_events() -> None:
    async with _stack() as (api, _model), http_for(api) as http:
        body = {
            "model": "hermes-agent",
            "input": [{"role": "user", "content": f"Turn {n}: {FILLER}"} for n in range(20)],
            "context_management": [{"type": "compaction", "compact_threshold": 1000}],
            "stream": True,
        }
        with trio.fail_after(30):
            raw = (await http.post("/responses", json=body)).content
    events = payloads(parse_sse(raw))
    for event in events:
        assert_valid(event, "ResponseStreamEvent")
    added = [
        e
        for e in events
        if e["type"] == "response.output_item.added" and e["item"]["type"] == "compaction"
    ]
    done = [
        e
        for e in events
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "compaction"
    ]
    assert len(added) == 1 and len(done) == 1
    assert done[0]["item"]["id"] == added[0]["item"]["id"]
    final = events[-1]["response"]
    assert final["status"] == "completed"
    assert final["output"][0]["type"] == "compaction"


async def test_a_30_turn_chain_with_truncation_auto_completes() -> None:
    async with _stack() as (api, model), client_for(api) as client:
        previous: str | None = None
        with trio.fail_after(120):
            for turn in range(30):
                response = await client.responses.create(
                    model="hermes-agent",
                    input=f"Turn {turn}: {FILLER}",
                    previous_response_id=previous,
                    truncation="auto",
                )
                assert response.status == "completed", response.error
                assert response.truncation == "auto"
                assert not [i for i in response.output if i.type == "compaction"]
                previous = response.id
    assert not any(_is_summary_request(r) for r in model.model_requests)
    last = model.model_requests[-1].json["messages"]
    assert not any("Turn 0:" in str(m.get("content", "")) for m in last)
    assert any("Turn 29:" in str(m.get("content", "")) for m in last)


async def test_truncation_disabled_refuses_a_conversation_too_long() -> None:
    async with _stack() as (api, model), client_for(api) as client:
        with trio.fail_after(30), pytest.raises(openai.BadRequestError) as caught:
            await client.responses.create(
                model="hermes-agent", input="tell me about " + FILLER * 60, truncation="disabled"
            )
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["code"] == "context_length_exceeded"
    assert "context window" in error["message"] and "truncation" in error["message"]
    assert model.model_requests == []


async def test_compact_returns_a_compaction_that_a_stateless_request_continues() -> None:
    async with _stack() as (api, model), client_for(api) as client:
        assert hasattr(client.responses, "compact")
        with trio.fail_after(60):
            first = await client.responses.create(
                model="hermes-agent", input="My name is Ada. " + FILLER
            )
            compacted = await client.responses.compact(
                model="hermes-agent", previous_response_id=first.id
            )
            raw = compacted.model_dump(mode="json", exclude_unset=True)
            assert_valid(raw, "CompactResource")
            assert raw["object"] == "response.compaction"
            assert raw["output"][-1]["type"] == "compaction"
            assert raw["usage"]["total_tokens"] > 0
            before = len(model.model_requests)
            follow = await client.responses.create(
                model="hermes-agent",
                input=[*raw["output"], {"role": "user", "content": "What is my name?"}],
                store=False,
            )
    assert follow.status == "completed"
    sent = model.model_requests[before].json["messages"]
    summary = [m for m in sent if str(m.get("content", "")).startswith(SUMMARY_MARK)]
    assert summary and "SUMMARY: the user counted turns" in summary[0]["content"]
    assert sent[-1] == {"role": "user", "content": "What is my name?"}


async def test_compact_of_input_items() -> None:
    async with _stack() as (api, _model), http_for(api) as http:
        body = {
            "model": "hermes-agent",
            "input": [{"role": "user", "content": "hello"}],
            "instructions": "Be brief.",
        }
        with trio.fail_after(30):
            got = await http.post("/responses/compact", json=body)
    assert got.status_code == 200, got.text
    assert_valid(got.json(), "CompactResource")


async def _compacted_output(http: httpx.AsyncClient) -> list[dict[str, Any]]:
    got = await http.post(
        "/responses/compact", json={"model": "hermes-agent", "input": "remember 42"}
    )
    assert got.status_code == 200, got.text
    output: list[dict[str, Any]] = got.json()["output"]
    return output


@pytest.mark.parametrize("how", ["altered", "other_id", "garbage"])
async def test_an_altered_compaction_item_is_a_400_naming_it(how: str) -> None:
    async with _stack() as (api, model), http_for(api) as http:
        with trio.fail_after(30):
            output = await _compacted_output(http)
            item = dict(output[-1])
            content = item["encrypted_content"]
            if how == "altered":
                flipped = "A" if content[20] != "A" else "B"
                item["encrypted_content"] = content[:20] + flipped + content[21:]
            elif how == "other_id":
                item["id"] = "cmp_someoneelse"
            else:
                item["encrypted_content"] = "not sealed at all"
            before = len(model.model_requests)
            got = await http.post(
                "/responses",
                json={
                    "model": "hermes-agent",
                    "input": [
                        {"role": "user", "content": "hi"},
                        item,
                        {"role": "user", "content": "go"},
                    ],
                    "store": False,
                },
            )
    assert got.status_code == 400, got.text
    error = got.json()["error"]
    assert error["param"] == "input[1].encrypted_content"
    assert "could not be opened" in error["message"]
    assert_valid(got.json(), "ErrorResponse")
    assert len(model.model_requests) == before


async def test_a_compaction_item_from_another_install_is_refused() -> None:
    async with _stack() as (api, _model), http_for(api) as http:
        with trio.fail_after(30):
            output = await _compacted_output(http)
    # Another server, another store: another key.
    async with _stack() as (other, _model2), http_for(other) as http:
        with trio.fail_after(30):
            got = await http.post(
                "/responses",
                json={
                    "model": "hermes-agent",
                    "input": [*output, {"role": "user", "content": "go"}],
                },
            )
    assert got.status_code == 400
    assert got.json()["error"]["param"] == "input[0].encrypted_content"


async def test_context_management_is_checked() -> None:
    async with _stack() as (api, _model), http_for(api) as http:
        for value, param in [
            ({"type": "compaction"}, "context_management"),
            ([{"type": "other"}], "context_management[0].type"),
            (
                [{"type": "compaction", "compact_threshold": 10}],
                "context_management[0].compact_threshold",
            ),
            ([{"type": "compaction", "x": 1}], "context_management[0].x"),
        ]:
            got = await http.post(
                "/responses",
                json={"model": "hermes-agent", "input": "hi", "context_management": value},
            )
            assert got.status_code == 400, got.text
            assert got.json()["error"]["param"] == param, json.dumps(got.json())
