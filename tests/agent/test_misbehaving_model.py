"""A model server that sends garbage, too much, or the wrong thing: every
turn still ends with an answer or a clear error, never a crash or a hang."""

from __future__ import annotations

import gzip
import json
from typing import Any

import httpx
import pytest
import trio
from support import api_stack, http_for, make_config, run_turn
from timed_upstream import TimedUpstream

from hermes_trio.agent import open_agent
from hermes_trio.events import TurnFinished
from hermes_trio.llm import ModelRequest
from hermes_trio.llm import client as model_client
from hermes_trio.testing import RawReply, Step, TextReply, ToolCallReply, open_scripted_server

DEEP = "[" * 1000 + "]" * 1000


def chunk(delta: dict[str, Any] | str, finish: str | None = None) -> bytes:
    """One chat chunk; a str delta is spliced in as raw JSON text."""
    raw = delta if isinstance(delta, str) else json.dumps(delta)
    return (
        b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
        + raw.encode()
        + b',"finish_reason":'
        + json.dumps(finish).encode()
        + b"}]}\n\n"
    )


ROLE = chunk({"role": "assistant", "content": ""})
END = chunk({}, "stop") + b"data: [DONE]\n\n"


async def turn(script: list[Step], **model: Any) -> tuple[list[Any], Any, list[bool]]:
    """One agent turn; (events, result, which model requests were streamed)."""
    async with open_scripted_server(script) as server:
        async with open_agent(make_config(server.base_url, model=model)) as agent:
            with trio.fail_after(10):
                events, result = await run_turn(agent, "go")
        return events, result, [r.stream for r in server.model_requests]


# -- malformed chunks (the accumulator never crashes) ---------------------------


@pytest.mark.parametrize(
    "bad",
    [
        # Arguments sent as a JSON value nested 1,000 deep.
        '{"tool_calls":[{"index":0,"id":"c1","type":"function",'
        '"function":{"name":"terminal","arguments":' + DEEP + "}}]}",
        # Deeper than any JSON parser goes.
        '{"content":' + "[" * 5000 + "]" * 5000 + "}",
        # The wrong type where an object belongs, nested.
        DEEP,
    ],
    ids=["arguments-value", "content-too-deep", "delta-is-a-deep-list"],
)
async def test_deep_nesting_in_a_chunk_is_a_malformed_chunk(bad: str) -> None:
    script: list[Step] = [RawReply([ROLE, chunk(bad), END])]
    events, result, _ = await turn(script)
    assert isinstance(events[-1], TurnFinished)
    assert result.finish_reason == "error"
    assert "malformed chunk" in (result.error or "")


async def test_deeply_nested_arguments_text_is_an_error_for_the_model_not_a_crash() -> None:
    call = {
        "tool_calls": [
            {
                "index": 0,
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": DEEP},
            }
        ]
    }
    script: list[Step] = [
        RawReply([ROLE, chunk(call), chunk({}, "tool_calls") + b"data: [DONE]\n\n"]),
        TextReply("recovered"),
    ]
    events, result, _ = await turn(script)
    assert result.finish_reason == "stop" and result.text == "recovered"


async def test_a_lone_surrogate_becomes_a_replacement_character_for_the_client() -> None:
    split_emoji = chunk('{"content":"a\\ud83d"}') + chunk('{"content":"\\ude00b"}')
    script: list[Step] = [
        RawReply([ROLE, split_emoji, chunk('{"content":" \\udc00!"}'), END]),
        # A plain JSON answer to a stream request goes through another parser.
        RawReply(
            b'{"choices":[{"index":0,"message":{"role":"assistant","content":"x\\ud800y"},'
            b'"finish_reason":"stop"}]}',
            content_type="application/json",
        ),
    ]
    body = {"model": "hermes-agent", "messages": [{"role": "user", "content": "hi"}]}
    async with api_stack(script) as (api, _):
        async with http_for(api) as http:
            streamed = await http.post("/chat/completions", json={**body, "stream": True})
            plain = await http.post("/chat/completions", json={**body, "stream": True})
    # Each half of the split pair is lone on its own: both are replaced.
    assert content_of(streamed) == "a\ufffd\ufffdb \ufffd!"
    assert content_of(plain) == "x\ufffdy"


def content_of(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    chunks = [json.loads(line[6:]) for line in response.text.splitlines() if line[:7] == "data: {"]
    assert not any("error" in c for c in chunks), chunks
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


# -- wrong or oversized bodies ---------------------------------------------------


async def test_an_html_page_with_status_200_is_an_error_and_streaming_stays_on() -> None:
    page = b"<html><body><h1>Welcome to the captive portal</h1></body></html>"
    script: list[Step] = [RawReply(page, content_type="text/html"), TextReply("streamed again")]
    async with open_scripted_server(script) as server:
        async with open_agent(make_config(server.base_url, model={"max_retries": 0})) as agent:
            _, first = await run_turn(agent, "one")
            _, second = await run_turn(agent, "two")
        streamed = [r.stream for r in server.model_requests]
    assert first.finish_reason == "error" and "captive portal" in (first.error or "")
    assert second.text == "streamed again"
    assert streamed == [True, True]


async def test_an_endless_line_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_client, "_MAX_EVENT_BYTES", 256 * 1024)
    piece = b"x" * 65536
    script: list[Step] = [RawReply([ROLE, b"data: " + piece, *[piece] * 15], hold=30)]
    events, result, _ = await turn(script, max_retries=0)
    assert result.finish_reason == "error"
    assert "256 KiB" in (result.error or "") and "event" in (result.error or "")


async def test_a_gzip_bomb_is_cut_off() -> None:
    bomb = gzip.compress(b" " * (12 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 30_000
    script: list[Step] = [
        RawReply(bomb, content_type="application/json", headers={"Content-Encoding": "gzip"})
    ]
    events, result, _ = await turn(script, max_retries=0, max_answer_bytes=1024 * 1024)
    assert result.finish_reason == "error"
    assert "model.max_answer_bytes (1048576 bytes)" in (result.error or "")


async def test_a_compressed_event_stream_is_read() -> None:
    body = gzip.compress(ROLE + chunk({"content": "squeezed"}) + END)
    script: list[Step] = [RawReply(body, headers={"Content-Encoding": "gzip"})]
    events, result, streamed = await turn(script, timeouts={"first_token": 2})
    assert result.finish_reason == "stop" and result.text == "squeezed"


@pytest.mark.parametrize("content_type", ["text/event-stream", "application/json"])
async def test_a_broken_compressed_body_is_an_error_not_a_crash(content_type: str) -> None:
    script: list[Step] = [
        RawReply(
            b"not gzip at all", content_type=content_type, headers={"Content-Encoding": "gzip"}
        )
    ]
    events, result, _ = await turn(script, max_retries=0)
    assert result.finish_reason == "error"
    assert "decod" in (result.error or "").lower()


# -- the model list -----------------------------------------------------------


@pytest.mark.parametrize(
    "listing",
    [b'{"data": {"a": 1}}', b'{"data": [1]}', b"[1, 2]", DEEP.encode(), b"<html></html>"],
)
async def test_a_model_list_of_any_shape_falls_back_to_default(listing: bytes) -> None:
    def models(request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/models")
        return httpx.Response(200, content=listing, headers={"content-type": "application/json"})

    def answer(request: httpx.Request) -> httpx.Response:
        body = b'{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"}}]}'
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    upstream = TimedUpstream([models, answer])
    client, http = upstream.client(name=None)

    async def on_delta(_: object) -> None:
        pass

    async with http:
        response = await client.complete(
            ModelRequest([{"role": "user", "content": "hi"}]), stream=False, on_delta=on_delta
        )
    assert response.message.content == "ok"
    assert upstream.requests[-1]["model"] == "default"


# -- an answer whose connection is held open ---------------------------------------


@pytest.mark.parametrize("api_mode", ["chat_completions", "responses"])
async def test_a_complete_answer_on_a_connection_held_open_is_not_reused(api_mode: str) -> None:
    # When it ends is tested on the clock: test_agent_timing.py.
    script: list[Step] = [TextReply("complete answer", hold=30), TextReply("next one")]
    async with open_scripted_server(script) as server:
        config = make_config(server.base_url, model={"api_mode": api_mode})
        async with open_agent(config) as agent:
            with trio.fail_after(3):
                _, first = await run_turn(agent, "q")
            with trio.fail_after(3):
                record = await server.wait_connection_closed(server.model_requests[0].connection_id)
            _, second = await run_turn(agent, "again")
        requests = server.model_requests
    assert (first.text, first.finish_reason, first.error) == ("complete answer", "stop", None)
    assert first.usage.total_tokens > 0
    # Not read to its end, so not pooled: we hung up, and asked again elsewhere.
    assert record.closed_by == "client"
    assert second.text == "next one"
    assert requests[1].connection_id != requests[0].connection_id


# -- bounds on a streamed answer -------------------------------------------------


async def test_a_streamed_answer_beyond_max_answer_bytes_reaches_the_client_as_an_error() -> None:
    pieces = [ROLE, *[chunk({"content": "x" * 1000})] * 200, END]
    body = {"model": "hermes-agent", "messages": [{"role": "user", "content": "hi"}]}
    model = {"max_answer_bytes": 50_000, "max_retries": 0}
    async with api_stack([RawReply(pieces)], model=model) as (api, _):
        async with http_for(api) as http:
            answer = await http.post("/chat/completions", json={**body, "stream": True})
    frames = [json.loads(line[6:]) for line in answer.text.splitlines() if line[:7] == "data: {"]
    errors = [f["error"]["message"] for f in frames if "error" in f]
    assert len(errors) == 1, answer.text
    assert "model.max_answer_bytes" in errors[0] and "50000" in errors[0]
    deltas = [f["choices"][0]["delta"] for f in frames if f.get("choices")]
    text = "".join(d.get("content") or "" for d in deltas)
    assert 40_000 <= len(text) <= 50_000


# -- big bodies stay off the event loop ------------------------------------------


async def test_a_big_plain_answer_is_parsed_in_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    threaded: list[str] = []
    run_sync = trio.to_thread.run_sync

    async def spy(fn: Any, *args: Any, **kwargs: Any) -> Any:
        threaded.append(getattr(fn, "__name__", repr(fn)))
        return await run_sync(fn, *args, **kwargs)

    monkeypatch.setattr(trio.to_thread, "run_sync", spy)
    words = "word " * 400_000  # 2 MB
    script: list[Step] = [plain_answer(words), plain_answer("small")]
    events, result, _ = await turn(script)
    assert result.text == words
    assert len(threaded) == 1, threaded
    events, result, _ = await turn(script[1:])
    assert result.text == "small" and len(threaded) == 1


# -- a lone surrogate a tool produced --------------------------------------------


async def test_a_lone_surrogate_in_a_tool_result_does_not_crash_the_turn() -> None:
    # The model asks for a working directory named with a lone surrogate;
    # the tool's error names it, and that result goes back to the model.
    call = ToolCallReply([("terminal", '{"command": "ls", "workdir": "x\\ud800"}')])
    body = {"model": "hermes-agent", "messages": [{"role": "user", "content": "go"}]}
    async with api_stack([call, TextReply("done")]) as (api, model):
        async with http_for(api) as http:
            answer = await http.post("/chat/completions", json=body)
        requests = model.model_requests
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "done"
    assert len(requests) == 2
    tool = requests[1].json["messages"][-1]
    assert tool["role"] == "tool" and "x\ufffd" in tool["content"]


def plain_answer(text: str) -> RawReply:
    message = {"role": "assistant", "content": text}
    answer = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    return RawReply(json.dumps(answer).encode(), content_type="application/json")


def test_a_request_body_with_a_lone_surrogate_is_still_utf8() -> None:
    raw = model_client._json_bytes({"messages": [{"content": "a\ud800b", "seed": 2**70}]})
    assert json.loads(raw.decode("utf-8")) == {"messages": [{"content": "a\ufffdb", "seed": 2**70}]}
