"""Responses turns run like chat turns: one slot and shutdown registry for
both, one crash policy, a store writer that recovers from a refusal, and the
call ids a client answers with."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import httpx
import trio
from support import api_stack, http_for
from test_responses_crash import _hold_write_lock
from test_responses_helpers import parse_sse, payloads

from hermes_trio.server.responses import live as responses_live
from hermes_trio.store import SQLiteStore
from hermes_trio.testing import RawReply, TextReply

SLOW = " ".join(["word"] * 30)


async def test_max_concurrent_counts_streamed_responses() -> None:
    script = [TextReply(SLOW, delay=0.05) for _ in range(3)]
    stack = api_stack(script, api={"max_concurrent": 1})
    async with stack as (api, model), http_for(api) as http:
        with trio.fail_after(15):
            body = {"model": "m", "input": "hi", "stream": True}
            async with http.stream("POST", "/responses", json=body) as first:
                assert first.status_code == 200
                await model.wait_request(1)
                second = await http.post("/responses", json=body)
                chat = await http.post(
                    "/chat/completions",
                    json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                )
                health = (await http.get(f"{api.url}/health")).json()
                await first.aread()
            after = (await http.get(f"{api.url}/health")).json()
    assert second.status_code == 429, second.text
    assert second.json()["error"]["code"] == "rate_limit_exceeded"
    assert chat.status_code == 429
    assert health["turns_running"] == 1
    assert after["turns_running"] == 0
    assert len(model.model_requests) == 1


async def test_max_concurrent_counts_background_and_plain_responses() -> None:
    script = [TextReply(SLOW, delay=0.05) for _ in range(6)]
    stack = api_stack(script, api={"max_concurrent": 1})
    async with stack as (api, model), http_for(api) as http:
        with trio.fail_after(15):
            background = {"model": "m", "input": "hi", "background": True}
            replies = [await http.post("/responses", json=background) for _ in range(3)]
            await model.wait_request(1)
            health = (await http.get(f"{api.url}/health")).json()
            plain = await http.post("/responses", json={"model": "m", "input": "hi"})
            first = replies[0].json()["id"]
            # The first one's end gives its slot back.
            await http.get(f"/responses/{first}?stream=true")
            again = await http.post("/responses", json={"model": "m", "input": "hi"})
    assert [r.status_code for r in replies] == [200, 429, 429]
    assert plain.status_code == 429
    assert health["turns_running"] == 1
    assert again.status_code == 200
    assert len(model.model_requests) == 2


async def test_a_crashing_responses_writer_is_a_500_internal_error(monkeypatch) -> None:
    original = responses_live.write_response_events

    async def broken(receive: Any, builder: Any, log: Any, **kwargs: Any) -> None:
        with receive:
            first = await receive.receive()
            events = builder.feed_all([first])
            admit = kwargs.get("admit")
            if admit is not None:
                events = await admit(events)
            log.extend(events)
            raise RuntimeError("bug in the responses writer")

    monkeypatch.setattr(responses_live, "write_response_events", broken)
    script = [TextReply("hello there", delay=0.02) for _ in range(2)]
    async with api_stack(script) as (api, _), http_for(api) as http:
        with trio.fail_after(15):
            streamed = await http.post(
                "/responses", json={"model": "m", "input": "hi", "stream": True}
            )
            plain = await http.post("/responses", json={"model": "m", "input": "hi"})
            rid = payloads(parse_sse(streamed.content))[0]["response"]["id"]
            stored = (await http.get(f"/responses/{rid}")).json()
    monkeypatch.setattr(responses_live, "write_response_events", original)
    events = payloads(parse_sse(streamed.content))
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert events[-2]["code"] == "internal_error"
    assert plain.status_code == 500, plain.text
    assert plain.json()["error"]["code"] == "internal_error"
    assert stored["status"] == "failed"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _call(index: int, call_id: str, city: str) -> list[bytes]:
    start = {"index": index, "id": call_id, "type": "function",
             "function": {"name": "get_weather", "arguments": ""}}
    args = {"index": index, "function": {"arguments": json.dumps({"city": city})}}
    return [_chunk({"tool_calls": [start]}), _chunk({"tool_calls": [args]})]


DUPLICATE_IDS = b"".join(
    [
        _chunk({"role": "assistant", "content": None}),
        *_call(0, "dup", "Paris"),
        *_call(1, "dup", "Rome"),
        _chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]
)
WEATHER = [{"type": "function", "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]


async def test_duplicate_call_ids_are_made_unique_where_the_client_answers_them() -> None:
    script = [RawReply(DUPLICATE_IDS), TextReply("Sunny in both.")]
    async with api_stack(script) as (api, model), http_for(api) as http:
        with trio.fail_after(15):
            raw = await http.post(
                "/responses",
                json={"model": "m", "input": "weather?", "tools": WEATHER, "stream": True},
            )
            final = payloads(parse_sse(raw.content))[-1]["response"]
            calls = [item for item in final["output"] if item["type"] == "function_call"]
            outputs = [
                {"type": "function_call_output", "call_id": c["call_id"], "output": "sunny"}
                for c in calls
            ]
            answer = await http.post(
                "/responses",
                json={"model": "m", "previous_response_id": final["id"], "input": outputs,
                      "tools": WEATHER},
            )
    ids = [c["call_id"] for c in calls]
    assert len(ids) == 2 and len(set(ids)) == 2
    assert answer.status_code == 200, answer.text
    upstream = model.model_requests[-1].json
    assert answer.json()["output_text"] == "Sunny in both."
    # The model sees the same ids in the calls and in their results.
    said = [c["id"] for m in upstream["messages"] for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in upstream["messages"] if m["role"] == "tool"]
    assert said == ids and answered == ids


async def test_duplicate_call_ids_are_unique_on_the_chat_endpoint_too() -> None:
    async with api_stack([RawReply(DUPLICATE_IDS)]) as (api, _), http_for(api) as http:
        with trio.fail_after(15):
            reply = await http.post(
                "/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "weather?"}],
                      "stream": True,
                      "tools": [{"type": "function", "function": {
                          "name": "get_weather", "parameters": WEATHER[0]["parameters"]}}]},
            )
    ids = [
        call["id"]
        for frame in parse_sse(reply.content)
        if frame.data != "[DONE]"
        for choice in json.loads(frame.data)["choices"]
        for call in choice["delta"].get("tool_calls") or []
        if "id" in call
    ]
    assert len(ids) == 2 and len(set(ids)) == 2


async def test_include_with_a_non_string_is_a_400() -> None:
    async with api_stack([TextReply("x")]) as (api, model), http_for(api) as http:
        replies = [
            await http.post("/responses", json={"model": "m", "input": "hi", "include": value})
            for value in ([[]], [{"a": 1}], [1])
        ]
    for reply in replies:
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["param"] == "include[0]"
    assert model.model_requests == []


async def test_continuing_a_response_the_store_refused_is_a_clear_400() -> None:
    script = [TextReply("the answer", first_token_delay=0.3), TextReply("never")]
    async with api_stack(script) as (api, model), http_for(api) as http:
        store = api.state.store
        assert isinstance(store, SQLiteStore)
        with trio.fail_after(15):
            replies: list[httpx.Response] = []
            async with trio.open_nursery() as nursery:

                async def post() -> None:
                    body = {"model": "m", "input": "go"}
                    replies.append(await http.post("/responses", json=body))

                nursery.start_soon(post)
                await model.wait_request(1)
                await store._run(lambda c: c.execute("PRAGMA query_only=1"), write=False)
            await store._run(lambda c: c.execute("PRAGMA query_only=0"), write=False)
            rid = await trio.to_thread.run_sync(_only_response_id, store.path)
            fetched = await http.get(f"/responses/{rid}")
            follow = await http.post(
                "/responses", json={"model": "m", "input": "more", "previous_response_id": rid}
            )
    assert replies[0].status_code == 503
    assert fetched.json()["status"] == "failed"
    assert follow.status_code == 400, follow.text
    error = follow.json()["error"]
    assert error["param"] == "previous_response_id"
    assert error["code"] == "previous_response_failed"
    assert "could not be stored" in error["message"]
    assert "in progress" not in error["message"]
    assert len(model.model_requests) == 1


def _only_response_id(path: Any) -> str:
    with sqlite3.connect(path) as conn:
        ((rid,),) = conn.execute("SELECT id FROM responses").fetchall()
    return str(rid)


async def test_a_stream_whose_client_left_before_it_was_sent_is_cancelled() -> None:
    # The client gives up while the response's first store write waits for
    # another program; the write completes, but nobody will read the stream.
    tokens = [f"w{i} " for i in range(300)]
    async with api_stack([TextReply(tokens=tokens, delay=0.01)]) as (api, model):
        store = api.state.store
        assert isinstance(store, SQLiteStore)
        blocker = await trio.to_thread.run_sync(_hold_write_lock, store.path)
        try:
            body = json.dumps({"model": "m", "input": "go", "stream": True}).encode()
            stream = await trio.open_tcp_stream("127.0.0.1", api.port)
            await stream.send_all(
                f"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1:{api.port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await trio.sleep(0.3)
            await stream.aclose()
            await trio.sleep(0.2)
            await trio.to_thread.run_sync(blocker.rollback)
        finally:
            await trio.to_thread.run_sync(blocker.close)
        # The same owner as the raw request: no key.
        async with httpx.AsyncClient(base_url=api.base_url) as http:
            with trio.fail_after(10):
                # The row's first write goes through once the lock is gone.
                await trio.sleep(0.3)
                rid = await trio.to_thread.run_sync(_only_response_id, store.path)
                # Follows the response to its end.
                await http.get(f"/responses/{rid}?stream=true")
                stored = (await http.get(f"/responses/{rid}")).json()
    # Cancelled when its client was found gone, not answered to the end.
    assert stored["status"] == "incomplete"
    assert len(stored["output_text"]) < len("".join(tokens))
