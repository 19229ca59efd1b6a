"""Resumable Responses streams, background turns, cancel, and a restart
between chained turns."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
import trio
from support import api_stack, client_for, http_for, make_config
from test_responses_helpers import parse_sse, payloads, text_of

from hermes_trio.config import StoreConfig
from hermes_trio.llm.http_body import open_body
from hermes_trio.server.run import open_api_server
from hermes_trio.store import open_store, owner_scope
from hermes_trio.testing import Stall, TextReply, open_scripted_server
from hermes_trio.wire.sse import SSEDecoder, SSEEvent

TOKENS = [f"tok{i} " for i in range(40)]
FULL_TEXT = "".join(TOKENS)


async def read_some(
    http: httpx.AsyncClient, method: str, url: str, *, deltas: int, **kwargs: Any
) -> list[dict[str, Any]]:
    """Read a stream until ``deltas`` text deltas arrived, then hang up."""
    decoder = SSEDecoder()
    seen: list[dict[str, Any]] = []
    async with http.stream(method, url, **kwargs) as reply:
        assert reply.status_code == 200
        async with open_body(reply) as pieces:
            async for piece in pieces:
                for event in decoder.feed(piece):
                    if isinstance(event, SSEEvent):
                        data = json.loads(event.data)
                        assert event.id == str(data["sequence_number"])
                        seen.append(data)
                if sum(e["type"] == "response.output_text.delta" for e in seen) >= deltas:
                    break
    return seen


async def wait_status(client: openai.AsyncOpenAI, rid: str, statuses: set[str]) -> Any:
    while True:
        response = await client.responses.retrieve(rid)
        if response.status in statuses:
            return response
        await trio.sleep(0.02)


async def test_dropped_background_stream_resumes_without_gaps() -> None:
    script = [TextReply(tokens=TOKENS, delay=0.005), TextReply(tokens=TOKENS, delay=0.01)]
    async with api_stack(script) as (api, model), client_for(api) as client:
        async with http_for(api) as http:
            with trio.fail_after(15):
                whole = await client.responses.create(model="m", input="go", stream=True)
                uninterrupted = "".join(
                    [e.delta async for e in whole if e.type == "response.output_text.delta"]
                )
                first = await read_some(
                    http,
                    "POST",
                    "/responses",
                    deltas=5,
                    json={"model": "m", "input": "go", "stream": True, "background": True},
                )
                rid = first[0]["response"]["id"]
                last = first[-1]["sequence_number"]
                # The turn goes on without its client.
                assert model.connections[-1].closed_at is None
                reply = await http.get(f"/responses/{rid}?stream=true&starting_after={last}")
                rest = payloads(parse_sse(reply.content))
                # The SDK's own resume helpers see the same stream.
                raw = await client.responses.retrieve(rid, stream=True, starting_after=last)
                sdk_rest = [event async for event in raw]
                async with client.responses.stream(response_id=rid, starting_after=last) as again:
                    helper = [event async for event in again]
                    final = await again.get_final_response()
    numbers = [e["sequence_number"] for e in first + rest]
    assert numbers == list(range(len(numbers)))
    assert uninterrupted == FULL_TEXT
    assert text_of(first) + text_of(rest) == uninterrupted
    assert rest[-1]["type"] == "response.completed"
    assert [e.sequence_number for e in sdk_rest] == [e["sequence_number"] for e in rest]
    assert [e.sequence_number for e in helper] == [e["sequence_number"] for e in rest]
    assert final.output_text == FULL_TEXT


async def test_follower_joins_a_live_stream() -> None:
    script = [TextReply(tokens=TOKENS, delay=0.01)]
    async with api_stack(script) as (api, _), client_for(api) as client:
        with trio.fail_after(15):
            stream = await client.responses.create(model="m", input="go", stream=True)
            events = []
            joined: list[Any] = []
            async with trio.open_nursery() as nursery:
                async for event in stream:
                    events.append(event)
                    if sum(e.type == "response.output_text.delta" for e in events) == 3:
                        rid, after = events[0].response.id, event.sequence_number

                        async def follow(rid: str = rid, after: int = after) -> None:
                            raw = await client.responses.retrieve(
                                rid, stream=True, starting_after=after
                            )
                            joined.extend([e async for e in raw])

                        nursery.start_soon(follow)
    assert [e.model_dump() for e in joined] == [
        e.model_dump() for e in events if e.sequence_number > after
    ]
    assert joined[-1].type == "response.completed"


async def test_replay_from_the_store_after_the_end() -> None:
    async with api_stack([TextReply(tokens=TOKENS[:6])]) as (api, _):
        async with http_for(api) as http:
            with trio.fail_after(10):
                original = (
                    await http.post("/responses", json={"model": "m", "input": "x", "stream": True})
                ).content
                events = payloads(parse_sse(original))
                rid = events[0]["response"]["id"]
                whole = await http.get(f"/responses/{rid}?stream=true")
                tail = await http.get(f"/responses/{rid}?stream=true&starting_after=3")
                past_end = await http.get(f"/responses/{rid}?stream=true&starting_after=999")
    assert payloads(parse_sse(whole.content)) == events
    assert payloads(parse_sse(tail.content)) == events[4:]
    assert past_end.status_code == 200 and parse_sse(past_end.content) == []


async def test_disconnect_without_background_cancels_the_turn() -> None:
    script = [Stall(text="partial answer here", seconds=30)]
    async with api_stack(script) as (api, model), client_for(api) as client:
        async with http_for(api) as http:
            with trio.fail_after(10):
                seen = await read_some(
                    http,
                    "POST",
                    "/responses",
                    deltas=1,
                    json={"model": "m", "input": "go", "stream": True},
                )
                rid = seen[0]["response"]["id"]
                conn = await model.wait_connection_closed()
                response = await wait_status(client, rid, {"incomplete"})
                replay = payloads(
                    parse_sse((await http.get(f"/responses/{rid}?stream=true")).content)
                )
    assert conn.closed_by == "client"
    assert response.output_text.startswith("partial")
    assert response.output[0].status == "incomplete"
    assert replay[-1]["type"] == "response.incomplete"
    assert [e["sequence_number"] for e in replay] == list(range(len(replay)))


async def test_background_turn_can_be_cancelled() -> None:
    script = [Stall(text="thinking about it", seconds=30), TextReply("done")]
    async with api_stack(script) as (api, model), client_for(api) as client:
        with trio.fail_after(10):
            started = await client.responses.create(model="m", input="go", background=True)
            assert started.status == "in_progress" and started.background is True
            await model.wait_request(1)
            cancelled = await client.responses.cancel(started.id)
            conn = await model.wait_connection_closed()
            again = await client.responses.cancel(started.id)
            fetched = await client.responses.retrieve(started.id)
            async with http_for(api) as http:
                replay = payloads(
                    parse_sse((await http.get(f"/responses/{started.id}?stream=true")).content)
                )
            plain = await client.responses.create(model="m", input="x")
            with pytest.raises(openai.BadRequestError):
                await client.responses.cancel(plain.id)
    assert cancelled.status == "cancelled"
    assert again.status == "cancelled" and fetched.status == "cancelled"
    assert conn.closed_by == "client"
    assert replay[-1]["type"] == "response.incomplete"
    assert replay[-1]["response"]["status"] == "cancelled"


async def test_background_turn_finishes_without_a_client() -> None:
    script = [TextReply(tokens=TOKENS[:10], delay=0.01)]
    async with api_stack(script) as (api, _), client_for(api) as client:
        with trio.fail_after(10):
            started = await client.responses.create(model="m", input="go", background=True)
            done = await wait_status(client, started.id, {"completed"})
    assert done.output_text == "".join(TOKENS[:10])


async def test_chain_survives_a_server_restart(tmp_path) -> None:
    async with open_scripted_server([TextReply("Hi Ada."), TextReply("You are Ada.")]) as model:
        config = make_config(model.base_url, store=StoreConfig(data_dir=str(tmp_path / "data")))
        with trio.fail_after(15):
            async with open_api_server(config, port=0) as api, client_for(api) as client:
                first = await client.responses.create(model="m", input="I am Ada.")
            async with open_api_server(config, port=0) as api, client_for(api) as client:
                fetched = await client.responses.retrieve(first.id)
                second = await client.responses.create(
                    model="m", input="Who am I?", previous_response_id=first.id
                )
    assert fetched.output_text == "Hi Ada."
    assert second.output_text == "You are Ada."
    assert model.requests[1].json["messages"][1:] == [
        {"role": "user", "content": "I am Ada."},
        {"role": "assistant", "content": "Hi Ada."},
        {"role": "user", "content": "Who am I?"},
    ]


@pytest.mark.usefixtures("short_shutdown")
async def test_shutdown_marks_a_running_response_incomplete(tmp_path) -> None:
    async with open_scripted_server([Stall(text="half", seconds=30)]) as model:
        config = make_config(model.base_url, store=StoreConfig(data_dir=str(tmp_path / "data")))
        with trio.fail_after(15):
            async with open_api_server(config, port=0) as api, client_for(api) as client:
                started = await client.responses.create(model="m", input="go", background=True)
                await model.wait_request(1)
            # Recorded by the shutdown itself, before any restart.
            async with open_store(config) as store:
                row = await store.get(started.id, owner_scope("test-client-key"))
            async with open_api_server(config, port=0) as api, client_for(api) as client:
                after = await client.responses.retrieve(started.id)
    assert row is not None and row.status == "incomplete"
    assert row.response["output_text"] == "half"
    assert after.status == "incomplete"
