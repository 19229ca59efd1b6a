"""The scripted model server, driven over real loopback sockets.

Clients are httpx (raw wire checks) and the official openai SDK (does a real
OpenAI client accept what we send?). No test sleeps: waits are on server
events, guarded by trio.fail_after.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import trio
import trio.testing

from hermes_trio.llm.http_body import open_body
from hermes_trio.testing import (
    Drop,
    ErrorFrame,
    ErrorReply,
    JSONInsteadOfStream,
    RawReply,
    RecordedRequest,
    RefuseStream,
    ScriptedModelServer,
    Stall,
    Step,
    TextReply,
    ToolCallReply,
    open_scripted_server,
    split_tokens,
)

CHAT = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}]}
STREAM = {**CHAT, "stream": True}
RESP = {"model": "test-model", "input": "hi", "stream": True}


async def sse_data(response: httpx.Response) -> AsyncIterator[tuple[float, str]]:
    """Yield (arrival time, data payload) for each SSE `data:` line."""
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            yield trio.current_time(), line[6:]


async def chat_chunks(client: httpx.AsyncClient, body: dict[str, Any]) -> list[Any]:
    """Stream one chat request and return decoded chunks ("[DONE]" kept as a string)."""
    out: list[Any] = []
    async with client.stream("POST", "/chat/completions", json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/event-stream"
        async for _, data in sse_data(r):
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


async def responses_events(client: httpx.AsyncClient, body: dict[str, Any]) -> list[dict]:
    """Stream one Responses request; check the `event:` line matches each payload."""
    events: list[dict] = []
    event_name = None
    async with client.stream("POST", "/responses", json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/event-stream"
        async for line in r.aiter_lines():
            if line.startswith("event: "):
                event_name = line[7:]
            elif line.startswith("data: "):
                payload = json.loads(line[6:])
                assert payload["type"] == event_name
                events.append(payload)
                event_name = None
    return events


@pytest.fixture
async def server() -> AsyncIterator[ScriptedModelServer]:
    async with open_scripted_server() as s:
        yield s


@pytest.fixture
async def client(server: ScriptedModelServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=5) as c:
        yield c


def oai(server: ScriptedModelServer) -> openai.AsyncOpenAI:
    # Retries off: a scripted failure must surface, not consume the next step.
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=5)


# -- Chat Completions streaming ----------------------------------------------


async def test_text_streams_token_by_token_with_openai_framing(
    server: ScriptedModelServer, client: httpx.AsyncClient
) -> None:
    server.add(TextReply("Hello there, world!", delay=0.02))
    arrivals: list[float] = []
    chunks: list[Any] = []
    started = trio.current_time()
    async with client.stream("POST", "/chat/completions", json=STREAM) as r:
        assert r.headers["content-type"] == "text/event-stream"
        async for at, data in sse_data(r):
            arrivals.append(at)
            chunks.append(data if data == "[DONE]" else json.loads(data))

    assert chunks[-1] == "[DONE]"
    body = chunks[:-1]
    assert {c["id"] for c in body} == {body[0]["id"]}
    assert {c["created"] for c in body} == {body[0]["created"]}
    assert all(c["object"] == "chat.completion.chunk" for c in body)
    assert body[0]["choices"][0]["delta"]["role"] == "assistant"
    assert not any("role" in c["choices"][0]["delta"] for c in body[1:])
    assert [c["choices"][0]["finish_reason"] for c in body].count("stop") == 1
    assert body[-1]["choices"][0]["finish_reason"] == "stop"
    assert all("usage" not in c for c in body)  # only with include_usage
    tokens = [c["choices"][0]["delta"]["content"] for c in body[1:-1]]
    assert tokens == ["Hello", " there,", " world!"]
    # The third token is scheduled two delays after the first. Measured from
    # before the request (not between arrivals) so a loaded client can't
    # make the bound flaky.
    assert arrivals[3] - started >= 2 * 0.02 - 1e-3


async def test_include_usage_adds_final_usage_chunk(
    server: ScriptedModelServer, client: httpx.AsyncClient
) -> None:
    server.add(TextReply("one two three", usage={"prompt_tokens": 7, "completion_tokens": 3}))
    server.add(TextReply("a b"))
    body = {**STREAM, "stream_options": {"include_usage": True}}
    chunks = await chat_chunks(client, body)
    assert chunks[-1] == "[DONE]"
    usage_chunk = chunks[-2]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {"prompt_tokens": 7, "completion_tokens": 3}
    assert all(c["usage"] is None for c in chunks[:-2])

    chunks = await chat_chunks(client, body)
    usage = chunks[-2]["usage"]
    assert usage["completion_tokens"] == 2
    assert usage["total_tokens"] == usage["prompt_tokens"] + 2 > 2


async def test_explicit_tokens_and_reasoning_first(
    server: ScriptedModelServer, client: httpx.AsyncClient
) -> None:
    server.add(TextReply(tokens=["héllo", " wör", "ld 🙂"], reasoning="Let me think."))
    chunks = await chat_chunks(client, STREAM)
    deltas = [c["choices"][0]["delta"] for c in chunks[:-1]]
    reasoning = [d["reasoning_content"] for d in deltas if "reasoning_content" in d]
    content = [d["content"] for d in deltas[1:] if d.get("content")]
    assert reasoning == ["Let", " me", " think."]
    assert content == ["héllo", " wör", "ld 🙂"]
    first_content = next(i for i, d in enumerate(deltas) if d.get("content"))
    last_reasoning = max(i for i, d in enumerate(deltas) if "reasoning_content" in d)
    assert last_reasoning < first_content


async def test_tool_call_fragments(server: ScriptedModelServer, client: httpx.AsyncClient) -> None:
    args = {"city": "Paris", "unit": "celsius"}
    server.add(
        ToolCallReply([("get_weather", args), ("noop", "{}")], text="Checking.", fragment_size=5)
    )
    chunks = await chat_chunks(client, STREAM)
    assert chunks[-1] == "[DONE]"
    deltas = [c["choices"][0]["delta"] for c in chunks[:-1]]
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]].count("tool_calls") == 1
    assert "".join(d.get("content") or "" for d in deltas) == "Checking."

    fragments = [tc for d in deltas for tc in d.get("tool_calls", [])]
    assert all("index" in f for f in fragments)
    calls: dict[int, dict[str, Any]] = {}
    for f in fragments:
        if f["index"] not in calls:
            # Only the first fragment of a call names it.
            assert f["type"] == "function" and f["id"] and f["function"]["name"]
            calls[f["index"]] = {"id": f["id"], "name": f["function"]["name"], "args": ""}
        else:
            assert "id" not in f and "type" not in f and "name" not in f["function"]
            assert len(f["function"]["arguments"]) <= 5
        calls[f["index"]]["args"] += f["function"]["arguments"]
    assert [c["name"] for c in calls.values()] == ["get_weather", "noop"]
    assert json.loads(calls[0]["args"]) == args
    assert calls[1]["args"] == "{}"
    assert calls[0]["id"] != calls[1]["id"]


async def test_non_streaming_chat_completion(
    server: ScriptedModelServer, client: httpx.AsyncClient
) -> None:
    server.add(TextReply("Plain answer.", reasoning="hmm"), ToolCallReply([("f", {"x": 1})]))
    r = await client.post("/chat/completions", json=CHAT)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    doc = r.json()
    assert doc["object"] == "chat.completion"
    assert doc["model"] == "test-model"
    choice = doc["choices"][0]
    assert choice["message"]["content"] == "Plain answer."
    assert choice["message"]["reasoning_content"] == "hmm"
    assert choice["finish_reason"] == "stop"
    assert doc["usage"]["total_tokens"] > 0

    doc = (await client.post("/chat/completions", json={**CHAT, "stream": False})).json()
    message = doc["choices"][0]["message"]
    assert message["content"] is None
    assert message["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"x":1}'}
    assert doc["choices"][0]["finish_reason"] == "tool_calls"


async def test_openai_sdk_chat_stream_and_non_stream(server: ScriptedModelServer) -> None:
    server.add(
        TextReply("Hi from the SDK test."),
        ToolCallReply([("lookup", {"q": "trio"})]),
        TextReply("whole"),
    )
    client = oai(server)
    stream = await client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text = ""
    usage = None
    async for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        else:
            usage = chunk.usage
    assert text == "Hi from the SDK test."
    assert usage is not None and usage.completion_tokens == len(split_tokens(text))

    stream = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    args = ""
    async for chunk in stream:
        for tc in chunk.choices[0].delta.tool_calls or []:
            args += tc.function.arguments or ""
    assert json.loads(args) == {"q": "trio"}

    done = await client.chat.completions.create(model="m", messages=[])
    assert done.choices[0].message.content == "whole"
    await client.close()
    assert server.requests[0].headers["authorization"] == "Bearer x"
    assert server.requests[0].json["messages"] == [{"role": "user", "content": "hi"}]


# -- Responses API --------------------------------------------------------------


async def test_responses_stream_shape(
    server: ScriptedModelServer, client: httpx.AsyncClient
) -> None:
    server.add(TextReply("Hello Responses"))
    events = await responses_events(client, RESP)
    types = [e["type"] for e in events]
    assert types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[6]["text"] == "Hello Responses"
    done = events[-1]["response"]
    assert done["status"] == "completed"
    assert done["output"][0]["content"][0]["text"] == "Hello Responses"
    usage = done["usage"]
    assert set(usage) == {
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "input_tokens_details",
        "output_tokens_details",
    }
    assert usage["output_tokens"] == 2
    assert usage["input_tokens_details"] == {"cached_tokens": 0}
    assert usage["output_tokens_details"] == {"reasoning_tokens": 0}


async def test_responses_function_calls_and_non_stream(
    server: ScriptedModelServer, client: httpx.AsyncClient
) -> None:
    server.add(ToolCallReply([("search", {"q": "x"})], text="Looking."), TextReply("plain"))
    events = await responses_events(client, RESP)
    types = [e["type"] for e in events]
    assert types[-1] == "response.completed"
    call_added = next(
        e
        for e in events
        if e["type"] == "response.output_item.added" and e["item"]["type"] == "function_call"
    )
    assert call_added["item"]["name"] == "search"
    deltas = [e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"]
    done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert "".join(deltas) == done["arguments"] == '{"q":"x"}'
    # The message item is closed before the call item opens.
    assert types.index("response.output_item.done") < types.index(
        "response.function_call_arguments.delta"
    )
    output = events[-1]["response"]["output"]
    assert [o["type"] for o in output] == ["message", "function_call"]

    r = await client.post("/responses", json={**RESP, "stream": False})
    doc = r.json()
    assert doc["object"] == "response" and doc["status"] == "completed"
    assert doc["output"][0]["content"][0]["text"] == "plain"


async def test_openai_sdk_responses_stream(server: ScriptedModelServer) -> None:
    server.add(TextReply("From responses", reasoning="thinking"), ToolCallReply([("f", {})]))
    client = oai(server)
    async with client.responses.stream(model="m", input="hi") as stream:
        async for _ in stream:
            pass
        final = await stream.get_final_response()
    assert final.output_text == "From responses"
    assert final.usage is not None and final.usage.output_tokens_details.reasoning_tokens == 1
    result = await client.responses.create(model="m", input="hi")
    assert result.output[0].type == "function_call"
    await client.close()


# -- failure steps ----------------------------------------------------------------


async def test_error_reply(server: ScriptedModelServer, client: httpx.AsyncClient) -> None:
    server.add(ErrorReply(429, "slow down", headers={"Retry-After": "1"}), ErrorReply())
    r = await client.post("/chat/completions", json=STREAM)
    assert r.status_code == 429
    assert r.headers["retry-after"] == "1"
    assert r.json()["error"] == {
        "message": "slow down",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    r = await client.post("/responses", json=RESP)
    assert r.status_code == 500
    assert r.json()["error"]["type"] == "server_error"


async def test_error_reply_through_sdk(server: ScriptedModelServer) -> None:
    server.add(ErrorReply(401, "bad key"))
    client = oai(server)
    with pytest.raises(openai.AuthenticationError):
        await client.chat.completions.create(model="m", messages=[], stream=True)
    await client.close()


async def test_error_frame(server: ScriptedModelServer, client: httpx.AsyncClient) -> None:
    server.add(ErrorFrame("partial answer", "boom"), ErrorFrame("so far", "bang"))
    chunks = await chat_chunks(client, STREAM)
    assert "[DONE]" not in chunks
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])
    assert text == "partial answer"
    assert chunks[-1]["error"]["message"] == "boom"
    assert chunks[-1]["error"]["type"] == "server_error"
    assert not any(c.get("choices", [{}])[0].get("finish_reason") for c in chunks[:-1])

    events = await responses_events(client, RESP)
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"]["message"] == "bang"
    assert "".join(e.get("delta", "") for e in events) == "so far"


async def test_drop_before_any_byte(server: ScriptedModelServer, client: httpx.AsyncClient) -> None:
    server.add(Drop())
    with pytest.raises(httpx.RemoteProtocolError):
        await client.post("/chat/completions", json=STREAM)
    with trio.fail_after(2):
        record = await server.wait_connection_closed()
    assert record.closed_by == "server"


async def test_drop_mid_stream(server: ScriptedModelServer, client: httpx.AsyncClient) -> None:
    server.add(Drop("some words then"), Drop("reset now", reset=True))
    got: list[str] = []
    with pytest.raises(httpx.RemoteProtocolError):
        async with client.stream("POST", "/chat/completions", json=STREAM) as r:
            assert r.status_code == 200
            async for _, data in sse_data(r):
                got.append(json.loads(data)["choices"][0]["delta"]["content"])
    assert "".join(got) == "some words then"
    # An RST may land before or after the client read the tokens.
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        async with client.stream("POST", "/chat/completions", json=STREAM) as r:
            async for _ in r.aiter_lines():
                pass
    assert all(c.closed_by == "server" for c in server.connections)


async def test_stall_then_server_closes(
    server: ScriptedModelServer, client: httpx.AsyncClient
) -> None:
    server.add(Stall("partial", seconds=0.05))
    got: list[str] = []
    with pytest.raises(httpx.RemoteProtocolError):
        async with client.stream("POST", "/chat/completions", json=STREAM) as r:
            async for _, data in sse_data(r):
                got.append(json.loads(data)["choices"][0]["delta"]["content"])
    assert got == ["", "partial"]  # role chunk, then the token
    assert server.connections[0].closed_by == "server"


async def test_stall_with_client_timeout_records_client_close(
    server: ScriptedModelServer,
) -> None:
    server.add(Stall())  # headers, then an hour of silence
    async with httpx.AsyncClient(base_url=server.base_url, timeout=httpx.Timeout(5, read=0.1)) as c:
        with pytest.raises(httpx.ReadTimeout):
            async with c.stream("POST", "/chat/completions", json=STREAM) as r:
                assert r.status_code == 200
                async for _ in r.aiter_lines():
                    pass
    with trio.fail_after(2):
        record = await server.wait_connection_closed()
    assert record.closed_by == "client"


async def test_refuse_stream_then_fallback(
    server: ScriptedModelServer, client: httpx.AsyncClient
) -> None:
    server.add(RefuseStream(TextReply("fallback answer")), TextReply("next"))
    r = await client.post("/chat/completions", json=STREAM)
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "streaming is not supported"
    # The refused streaming request did not use up the step.
    r = await client.post("/chat/completions", json=CHAT)
    assert r.json()["choices"][0]["message"]["content"] == "fallback answer"
    assert server.remaining == [TextReply("next")]


async def test_json_instead_of_stream(
    server: ScriptedModelServer, client: httpx.AsyncClient
) -> None:
    server.add(JSONInsteadOfStream(TextReply("not streamed")), JSONInsteadOfStream())
    r = await client.post("/chat/completions", json=STREAM)
    assert r.headers["content-type"] == "application/json"
    assert r.json()["choices"][0]["message"]["content"] == "not streamed"
    r = await client.post("/responses", json=RESP)
    assert r.json()["object"] == "response"


# -- closing and connections ----------------------------------------------------------


async def test_client_closing_during_long_delay_is_recorded_promptly(
    server: ScriptedModelServer, client: httpx.AsyncClient
) -> None:
    server.add(TextReply("first then-much-later", delay=3600))
    async with client.stream("POST", "/chat/completions", json=STREAM) as r:
        # httpx's own line iterators would be left suspended by the break.
        seen = b""
        async with open_body(r) as pieces:
            async for piece in pieces:
                seen += piece
                if b'"content":"first"' in seen:
                    break  # the next token is an hour away
    closed_here = trio.current_time()
    with trio.fail_after(2):
        record = await server.wait_connection_closed()
    assert record.closed_by == "client"
    assert record.closed_at is not None and record.closed_at - closed_here < 1.0
    assert record.id == server.requests[0].connection_id


async def test_first_token_delay_is_silence_after_headers(
    server: ScriptedModelServer, client: httpx.AsyncClient
) -> None:
    server.add(TextReply("late", first_token_delay=0.1))
    started = trio.current_time()
    async with client.stream("POST", "/chat/completions", json=STREAM) as r:
        assert r.status_code == 200
        first_at = None
        async for at, _ in sse_data(r):
            first_at = first_at or at
    # Even the role chunk waits: nothing but headers before the first token.
    assert first_at is not None and first_at - started >= 0.1 - 1e-3


async def test_keep_alive_two_requests_on_one_connection(
    server: ScriptedModelServer, client: httpx.AsyncClient
) -> None:
    server.add(TextReply("one"), TextReply("two"))
    await chat_chunks(client, STREAM)
    r = await client.post("/chat/completions", json=CHAT)
    assert r.json()["choices"][0]["message"]["content"] == "two"
    assert len(server.requests) == 2
    assert len(server.connections) == 1
    assert {q.connection_id for q in server.requests} == {server.connections[0].id}
    assert not server.connections[0].closed
    await client.aclose()
    with trio.fail_after(2):
        record = await server.wait_connection_closed(server.connections[0].id)
    assert record.closed_by == "client"


async def test_http10_client_gets_close_delimited_stream(server: ScriptedModelServer) -> None:
    server.add(TextReply("raw bytes"))
    body = json.dumps(STREAM).encode()
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    async with stream:
        await stream.send_all(
            b"POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
        )
        raw = b""
        with trio.fail_after(2):
            while chunk := await stream.receive_some():
                raw += chunk
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b"transfer-encoding" not in head.lower()
    assert payload.endswith(b"data: [DONE]\n\n")
    assert payload.startswith(b"data: {")


async def test_server_shutdown_closes_open_connections() -> None:
    server = ScriptedModelServer([Stall()])
    server_scope = trio.CancelScope()

    async def run_server(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with server_scope:
            await server.serve(task_status=task_status)

    async def read_stalled_stream(c: httpx.AsyncClient) -> None:
        with pytest.raises(httpx.RemoteProtocolError):
            async with c.stream("POST", server.base_url + "/chat/completions", json=STREAM) as r:
                async for _ in r.aiter_lines():
                    pass

    with trio.fail_after(2):
        async with httpx.AsyncClient() as c, trio.open_nursery() as nursery:
            await nursery.start(run_server)
            nursery.start_soon(read_stalled_stream, c)
            await server.wait_request()
            server_scope.cancel()  # the server goes away under the open stream
    assert server.connections[0].closed_by == "server"


# -- script bookkeeping, other endpoints ---------------------------------------------


async def test_script_exhausted_and_default(client: httpx.AsyncClient) -> None:
    r = await client.post("/chat/completions", json=CHAT)
    assert r.status_code == 500
    assert "script exhausted" in r.json()["error"]["message"]

    async with open_scripted_server(default=TextReply("always")) as s:
        async with httpx.AsyncClient(base_url=s.base_url) as c:
            for _ in range(3):
                r = await c.post("/chat/completions", json=CHAT)
                assert r.json()["choices"][0]["message"]["content"] == "always"


async def test_models_unknown_path_and_bad_body(
    server: ScriptedModelServer, client: httpx.AsyncClient
) -> None:
    r = await client.get("/models")
    assert r.json()["data"][0]["id"] == "scripted-model"
    r = await client.get("/nope")
    assert r.status_code == 404 and "error" in r.json()
    r = await client.get("/chat/completions")
    assert r.status_code == 405
    r = await client.post(
        "/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400
    assert [q.path for q in server.requests] == [
        "/v1/models",
        "/v1/nope",
        "/v1/chat/completions",
        "/v1/chat/completions",
    ]
    assert server.requests[-1].json is None and server.requests[-1].body == b"{not json"


async def test_length_finish_reason_in_both_apis(
    server: ScriptedModelServer, client: httpx.AsyncClient
) -> None:
    server.add(
        TextReply("cut off", finish_reason="length"), TextReply("cut", finish_reason="length")
    )
    chunks = await chat_chunks(client, STREAM)
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    events = await responses_events(client, RESP)
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


async def test_reply_functions_answer_over_the_socket_too(
    server: ScriptedModelServer, client: httpx.AsyncClient
) -> None:
    async def count(request: RecordedRequest) -> Step:
        await trio.lowlevel.checkpoint()
        return TextReply(f"{len(request.json['messages'])} message(s)")

    server.add(count, lambda request: ErrorReply(503, f"busy for {request.json['model']}"))
    first = await client.post("/chat/completions", json=CHAT)
    second = await client.post("/chat/completions", json=CHAT)
    assert first.json()["choices"][0]["message"]["content"] == "1 message(s)"
    assert (second.status_code, second.json()["error"]["message"]) == (503, "busy for test-model")
    assert [r.step for r in server.requests] == [
        TextReply("1 message(s)"),
        ErrorReply(503, "busy for test-model"),
    ]


def test_script_rejects_non_steps() -> None:
    with pytest.raises(TypeError):
        ScriptedModelServer(["hello"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        ScriptedModelServer().add(TextReply, "x")  # type: ignore[arg-type]


async def test_wait_request_blocks_until_nth(
    server: ScriptedModelServer, client: httpx.AsyncClient
) -> None:
    server.add(TextReply("a"), TextReply("b"))
    async with trio.open_nursery() as nursery:
        seen: list[Any] = []

        async def waiter() -> None:
            seen.append(await server.wait_request(2))

        nursery.start_soon(waiter)
        await client.post("/chat/completions", json=CHAT)
        await trio.testing.wait_all_tasks_blocked()
        assert seen == []
        await client.post("/chat/completions", json={**CHAT, "n": 2})
    assert seen[0].json["n"] == 2
    assert seen[0].step == TextReply("b")


async def test_many_concurrent_streams(server: ScriptedModelServer) -> None:
    server.default = TextReply("x " * 50, delay=0.001)
    results: list[str] = []

    async def one(c: httpx.AsyncClient) -> None:
        chunks = await chat_chunks(c, STREAM)
        results.append("".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks[:-1]))

    limits = httpx.Limits(max_connections=50)
    async with httpx.AsyncClient(base_url=server.base_url, limits=limits) as c:
        async with trio.open_nursery() as nursery:
            for _ in range(50):
                nursery.start_soon(one, c)
    assert results == ["x " * 50] * 50


async def test_cli_serves_default_reply() -> None:
    root = str(Path(__file__).parents[2])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    cmd = [sys.executable, "-m", "hermes_trio.testing", "--port", "0", "--tokens", "5"]
    async with trio.open_nursery() as nursery:
        proc = await nursery.start(
            functools.partial(trio.run_process, cmd, stdout=subprocess.PIPE, env=env, check=False)
        )
        try:
            with trio.fail_after(10):
                line = b""
                while not line.endswith(b"\n"):
                    byte = await proc.stdout.receive_some(1)
                    assert byte, "server exited before printing its address"
                    line += byte
            assert line.startswith(b"listening on http://127.0.0.1:")
            base_url = line.decode().split()[-1]
            async with httpx.AsyncClient(base_url=base_url) as c:
                chunks = await chat_chunks(c, STREAM)
            assert len(chunks) == 1 + 5 + 1 + 1  # role, tokens, finish, [DONE]
        finally:
            proc.terminate()


async def test_raw_reply_sends_its_bytes_as_they_are() -> None:
    pieces = [b"data: not json\n\n", b'data: {"half": ', b"1}\n\n"]
    html = RawReply(b"<html>portal</html>", content_type="text/html", headers={"X-Odd": "1"})
    async with open_scripted_server([RawReply(pieces, delay=0.01), html]) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            streamed = await client.post("/chat/completions", json=STREAM)
            plain = await client.post("/chat/completions", json=CHAT)
    assert streamed.status_code == 200
    assert streamed.headers["content-type"] == "text/event-stream"
    assert streamed.content == b"".join(pieces)
    assert (plain.status_code, plain.text) == (200, "<html>portal</html>")
    assert plain.headers["content-type"] == "text/html" and plain.headers["x-odd"] == "1"


async def test_raw_reply_can_hold_the_connection_open() -> None:
    async with open_scripted_server([RawReply(b"data: {}\n\n", hold=0.2)]) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            async with client.stream("POST", "/chat/completions", json=STREAM) as response:
                started = trio.current_time()
                with pytest.raises(httpx.RemoteProtocolError):
                    await response.aread()
            assert trio.current_time() - started >= 0.15  # the hold began before our clock
        record = await server.wait_connection_closed()
    assert record.closed_by == "server"


@pytest.mark.parametrize("body", [STREAM, RESP])
async def test_text_reply_hold_keeps_the_stream_open_after_the_answer(
    body: dict[str, Any],
) -> None:
    path = "/responses" if "input" in body else "/chat/completions"
    stream = {**body, "stream_options": {"include_usage": True}} if "messages" in body else body
    async with open_scripted_server([TextReply("held answer", hold=0.3)]) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            async with client.stream("POST", path, json=stream) as response:
                seen: list[str] = []
                started = trio.current_time()
                with pytest.raises(httpx.RemoteProtocolError):
                    async for _, data in sse_data(response):
                        seen.append(data)
                ended = trio.current_time() - started
    assert "[DONE]" not in seen
    assert ended >= 0.25  # measured from the first byte, a little after the server began
    last = json.loads(seen[-1])
    if path == "/responses":
        assert last["type"] == "response.completed"
    else:
        assert last["choices"] == [] and last["usage"]["total_tokens"] > 0
        assert json.loads(seen[-2])["choices"][0]["finish_reason"] == "stop"
