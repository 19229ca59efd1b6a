"""The API server over raw HTTP: SSE framing byte by byte, keep-alive,
CORS, limits, disconnects and sessions."""

from __future__ import annotations

import json
import os

import httpx
import pytest
import trio
from support import api_stack, make_config

from hermes_trio.llm.http_body import open_body
from hermes_trio.server.run import open_api_server
from hermes_trio.testing import (
    ErrorFrame,
    Stall,
    TextReply,
    ToolCallReply,
    open_scripted_server,
)
from hermes_trio.wire.sse import SSEDecoder, SSEEvent

CHAT = {"model": "hermes-agent", "messages": [{"role": "user", "content": "hi"}]}


def frames_of(raw: bytes) -> list[bytes]:
    assert raw.endswith(b"\n\n")
    return [f + b"\n\n" for f in raw[:-2].split(b"\n\n")]


async def test_sse_framing_byte_by_byte() -> None:
    tokens = ["Hi", " there", ",", " friend"]
    async with api_stack([TextReply(tokens=tokens, delay=0.005)]) as (api, _):
        async with httpx.AsyncClient() as client:
            body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
            async with client.stream("POST", f"{api.base_url}/chat/completions",
                                     json=body) as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                assert response.headers["cache-control"] == "no-cache"
                raw = b"".join([piece async for piece in response.aiter_raw()])
    frames = frames_of(raw)
    # Every frame is exactly "id: N\ndata: <json>\n\n" and ids increase.
    for number, frame in enumerate(frames, start=1):
        lines = frame.split(b"\n")
        assert lines[0] == f"id: {number}".encode()
        assert lines[1].startswith(b"data: ")
        assert lines[2:] == [b"", b""]
    assert frames[-1] == f"id: {len(frames)}\ndata: [DONE]\n\n".encode()
    chunks = [json.loads(f.split(b"\n")[1][6:]) for f in frames[:-1]]
    assert len({(c["id"], c["created"]) for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "Hi there, friend"
    finishes = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert len(finishes) == 1 and finishes[0]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
    assert all(c["usage"] is None for c in chunks[:-1])


async def test_tokens_go_out_before_the_turn_ends() -> None:
    # The second token only comes after 0.3 s; the first must arrive long before.
    reply = TextReply(tokens=["early", " late"], delay=0.3)
    async with api_stack([reply]) as (api, _):
        async with httpx.AsyncClient() as client:
            async with client.stream("POST", f"{api.base_url}/chat/completions",
                                     json={**CHAT, "stream": True}) as response:
                decoder = SSEDecoder()
                started = trio.current_time()
                seen = ""
                async with open_body(response, decode=False) as pieces:
                    async for piece in pieces:
                        for event in decoder.feed(piece):
                            assert isinstance(event, SSEEvent)
                            if event.data != "[DONE]":
                                delta = json.loads(event.data)["choices"][0]["delta"]
                                seen += delta.get("content", "")
                        if "early" in seen:
                            break
                assert trio.current_time() - started < 0.25


async def test_keep_alive_while_a_tool_runs() -> None:
    script = [ToolCallReply(calls=[("terminal", {"command": "sleep 0.5; echo done"})]),
              TextReply("finished")]
    async with api_stack(script, api={"keepalive_interval": 0.1}) as (api, _):
        async with httpx.AsyncClient() as client:
            response = await client.post(f"{api.base_url}/chat/completions",
                                         json={**CHAT, "stream": True})
    raw = response.content
    assert raw.count(b": keep-alive\n\n") >= 2
    # Keep-alive comments never split a data frame.
    assert b"data: [DONE]\n\n" in raw and raw.endswith(b"data: [DONE]\n\n")


async def test_tool_transparency_is_opt_in() -> None:
    script = [ToolCallReply(calls=[("terminal", {"command": "echo x"})]), TextReply("ok")]
    async with api_stack(script * 2) as (api, _):
        async with httpx.AsyncClient() as client:
            plain = await client.post(f"{api.base_url}/chat/completions",
                                      json={**CHAT, "stream": True})
            extended = await client.post(
                f"{api.base_url}/chat/completions",
                json={**CHAT, "stream": True},
                headers={"X-Hermes-Stream-Extensions": "tools"},
            )
    assert b"event:" not in plain.content
    assert b"event: hermes.tool.started\n" in extended.content
    assert b"event: hermes.tool.finished\n" in extended.content


async def test_error_before_the_stream_is_json_and_after_is_a_frame() -> None:
    script = [ErrorFrame(text="partial", message="blew up")]
    async with api_stack(script, model={"max_retries": 0}) as (api, _):
        async with httpx.AsyncClient() as client:
            response = await client.post(f"{api.base_url}/chat/completions",
                                         json={**CHAT, "stream": True})
    assert response.status_code == 200
    frames = frames_of(response.content)
    last = json.loads(frames[-1].split(b"data: ", 1)[1])
    assert "blew up" in last["error"]["message"]
    assert b"[DONE]" not in response.content


async def test_unreachable_model_server_is_502_naming_it() -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    async with api_stack(model={"base_url": f"http://127.0.0.1:{port}/v1",
                                "max_retries": 0}) as (api, _):
        async with httpx.AsyncClient() as client:
            for stream in (False, True):
                response = await client.post(f"{api.base_url}/chat/completions",
                                             json={**CHAT, "stream": stream})
                assert response.status_code == 502
                error = response.json()["error"]
                assert f"127.0.0.1:{port}" in error["message"]
                assert error["code"] == "model_unreachable"


async def test_cors_preflight_and_origins() -> None:
    async with api_stack(api={"cors_origins": ["http://ui.test"]}) as (api, _):
        async with httpx.AsyncClient() as client:
            ok = await client.options(
                f"{api.base_url}/chat/completions",
                headers={"Origin": "http://ui.test",
                         "Access-Control-Request-Method": "POST",
                         "Access-Control-Request-Headers": "authorization,x-stainless-os"},
            )
            denied = await client.options(
                f"{api.base_url}/chat/completions",
                headers={"Origin": "http://evil.test", "Access-Control-Request-Method": "POST"},
            )
            models = await client.get(f"{api.base_url}/models",
                                      headers={"Origin": "http://ui.test"})
    assert ok.status_code == 204
    assert ok.headers["access-control-allow-origin"] == "http://ui.test"
    allowed = ok.headers["access-control-allow-headers"].lower()
    for header in ("authorization", "content-type", "x-stainless-os", "x-stainless-lang"):
        assert header in allowed
    assert denied.status_code == 403
    assert "access-control-allow-origin" not in denied.headers
    assert models.headers["access-control-allow-origin"] == "http://ui.test"


async def test_cors_is_off_by_default() -> None:
    async with api_stack() as (api, _):
        async with httpx.AsyncClient() as client:
            response = await client.options(
                f"{api.base_url}/chat/completions",
                headers={"Origin": "http://ui.test", "Access-Control-Request-Method": "POST"},
            )
    assert response.status_code == 403
    assert "access-control-allow-origin" not in response.headers


async def test_auth_and_request_errors() -> None:
    async with api_stack(api={"key": "sekrit", "max_body_bytes": 2000}) as (api, _):
        async with httpx.AsyncClient() as client:
            url = f"{api.base_url}/chat/completions"
            good = {"Authorization": "Bearer sekrit"}
            missing = await client.post(url, json=CHAT)
            wrong = await client.post(url, json=CHAT, headers={"Authorization": "Bearer nope"})
            health = await client.get(f"{api.url}/health")
            not_json = await client.post(
                url, content=b"{nope", headers={**good, "Content-Type": "application/json"})
            no_messages = await client.post(url, json={"model": "m"}, headers=good)
            bad_role = await client.post(
                url, json={"messages": [{"role": "robot", "content": "x"}]}, headers=good)
            wrong_type = await client.post(url, json={**CHAT, "seed": "42"}, headers=good)
            temperature = await client.post(url, json={**CHAT, "temperature": 9}, headers=good)
            huge = await client.post(
                url, json={**CHAT, "messages": [{"role": "user", "content": "x" * 5000}]},
                headers=good)
            nowhere = await client.get(f"{api.base_url}/nowhere", headers=good)
    assert missing.status_code == 401 and wrong.status_code == 401
    assert missing.json()["error"]["type"] == "authentication_error"
    assert health.status_code == 200
    assert not_json.status_code == 400 and "invalid JSON" in not_json.json()["error"]["message"]
    assert no_messages.status_code == 400 and no_messages.json()["error"]["param"] == "messages"
    assert bad_role.json()["error"]["param"] == "messages[0].role"
    assert wrong_type.status_code == 400 and wrong_type.json()["error"]["param"] == "seed"
    assert temperature.json()["error"]["param"] == "temperature"
    assert huge.status_code == 413 and "too large" in huge.json()["error"]["message"]
    assert nowhere.status_code == 404 and nowhere.json()["error"]["message"]


async def test_too_many_turns_is_429_with_retry_after() -> None:
    async with api_stack([Stall(seconds=30)], api={"max_concurrent": 1}) as (api, model):
        async with httpx.AsyncClient() as client, trio.open_nursery() as nursery:
            url = f"{api.base_url}/chat/completions"

            async def hold() -> None:
                async with client.stream("POST", url, json={**CHAT, "stream": True}) as r:
                    async for _ in r.aiter_raw():
                        pass

            nursery.start_soon(hold)
            await model.wait_request(1)
            busy = await client.post(url, json=CHAT)
            nursery.cancel_scope.cancel()
    assert busy.status_code == 429
    assert busy.headers["retry-after"] == "1"
    assert busy.json()["error"]["code"] == "rate_limit_exceeded"


async def test_client_disconnect_closes_the_upstream_connection() -> None:
    slow = TextReply(tokens=["a", "b", "c"], delay=30)
    async with api_stack([slow]) as (api, model):
        async with httpx.AsyncClient() as client:
            async with client.stream("POST", f"{api.base_url}/chat/completions",
                                     json={**CHAT, "stream": True}) as response:
                async with open_body(response, decode=False) as pieces:
                    async for piece in pieces:
                        if b'"content":"a"' in piece:
                            break
            # Leaving the block closes our connection mid-stream.
        with trio.fail_after(3):
            record = await model.wait_connection_closed()
        assert record.closed_by == "client"
        with trio.fail_after(3):
            await api.state.slots.wait_idle()


async def test_client_disconnect_kills_the_running_tool(tmp_path) -> None:
    marker = tmp_path / "pid"
    os.mkfifo(marker)
    command = f"echo $$ > {marker}; exec sleep 60"
    script = [ToolCallReply(calls=[("terminal", {"command": command})])]
    async with api_stack(script, agent={"yolo": True}) as (api, _):
        async with httpx.AsyncClient() as client:
            async with client.stream("POST", f"{api.base_url}/chat/completions",
                                     json={**CHAT, "stream": True},
                                     headers={"X-Hermes-Stream-Extensions": "tools"}) as r:
                # The connection stays open until this block ends.
                async with open_body(r, decode=False) as pieces:
                    async for piece in pieces:
                        if b"hermes.tool.started" in piece:
                            break
                    # Opening the FIFO blocks until the shell writes its pid.
                    with trio.fail_after(5):
                        pid = int(await trio.to_thread.run_sync(marker.read_text))
                    exited = os.pidfd_open(pid)
        # A pidfd turns readable when its process ends: no polling needed.
        with trio.fail_after(3):
            await trio.lowlevel.wait_readable(exited)
        os.close(exited)


async def test_session_keeps_history_and_interrupts_a_running_turn() -> None:
    script = [
        TextReply("Nice to meet you, Ada."),
        TextReply(tokens=["Let", " me", " think"], delay=30),
        TextReply("Your name is Ada."),
    ]
    async with api_stack(script) as (api, model):
        url = f"{api.base_url}/chat/completions"
        headers = {"X-Session-ID": "chat-42"}
        async with httpx.AsyncClient() as client:
            first = await client.post(url, headers=headers, json={
                "messages": [{"role": "user", "content": "I am Ada"}]})
            assert first.json()["choices"][0]["message"]["content"] == "Nice to meet you, Ada."
            assert first.headers["x-session-id"] == "chat-42"
            async with trio.open_nursery() as nursery:
                interrupted: list[bytes] = []

                async def slow_turn() -> None:
                    async with client.stream("POST", url, headers=headers, json={
                        "messages": [{"role": "user", "content": "think hard"}],
                        "stream": True,
                    }) as response:
                        interrupted.append(b"".join([p async for p in response.aiter_raw()]))

                nursery.start_soon(slow_turn)
                await model.wait_request(2)
                third = await client.post(url, headers=headers, json={
                    "messages": [{"role": "user", "content": "What is my name?"}]})
            bad = await client.post(url, headers={"X-Session-ID": "bad id!"}, json=CHAT)
    assert third.json()["choices"][0]["message"]["content"] == "Your name is Ada."
    # The interrupted stream ended with an error frame naming why.
    assert b"interrupted by a newer request" in interrupted[0]
    # The model saw the whole conversation, including the interrupted turn.
    sent = [m["content"] for m in model.requests[2].json["messages"][1:]]
    assert sent == ["I am Ada", "Nice to meet you, Ada.", "think hard",
                    "Let [interrupted]", "What is my name?"]
    assert model.connections[1].closed
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "X-Session-ID"


async def test_a_role_of_the_wrong_type_is_a_400() -> None:
    async with api_stack() as (api, _):
        async with httpx.AsyncClient() as client:
            response = await client.post(f"{api.base_url}/chat/completions",
                                         json={"messages": [{"role": ["user"], "content": "x"}]})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "messages[0].role"


@pytest.mark.usefixtures("short_shutdown")
async def test_shutdown_ends_open_streams_with_a_reason() -> None:
    slow = TextReply(tokens=["a", "b", "c"], delay=30)
    async with open_scripted_server([slow]) as model:
        config = make_config(model.base_url)
        stop = trio.Event()
        ready = trio.Event()
        urls: list[str] = []

        async def serve() -> None:
            async with open_api_server(config, port=0, shutdown=stop) as api:
                urls.append(api.base_url)
                ready.set()
                await stop.wait()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            await ready.wait()
            async with httpx.AsyncClient() as client:
                async with client.stream("POST", f"{urls[0]}/chat/completions",
                                         json={**CHAT, "stream": True}) as response:
                    pieces = response.aiter_raw()
                    received = [await pieces.__anext__()]
                    stop.set()
                    with trio.fail_after(10):
                        received += [piece async for piece in pieces]
    body = b"".join(received)
    last = frames_of(body)[-1]
    assert last.startswith(b"id: ")
    assert json.loads(last.split(b"data: ", 1)[1])["error"]["message"] == (
        "the server is shutting down"
    )
