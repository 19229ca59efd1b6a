"""A turn that crashes (a bug, not a model failure) on the real server: one
error with code ``internal_error``, logged once, and the server and the
session keep working. The primitive's own tests are in
``tests/turn/test_turn.py``."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import httpx
import pytest
import trio
from support import make_config

from hermes_trio.agent import open_agent
from hermes_trio.server.run import ApiServer, open_api_server
from hermes_trio.testing import ScriptedModelServer, TextReply, ToolCallReply, open_scripted_server
from hermes_trio.tools import ToolContext, ToolRegistry, ToolResult
from hermes_trio.turn import INTERNAL_ERROR
from hermes_trio.wire.sse import SSEDecoder, SSEEvent

CHAT = {"model": "hermes-agent", "messages": [{"role": "user", "content": "hi"}]}


class _Probe:
    name = "probe"
    description = "Looks at something."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    def preview(self, args: dict[str, Any]) -> str:
        return "probe"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(True, "fine")


class _BrokenRegistry(ToolRegistry):
    """A registry with a bug: running any tool raises, outside the tool's own
    error handling, so the exception escapes the agent's loop."""

    async def execute(self, name: str, raw_args: str, ctx: ToolContext) -> ToolResult:
        raise RuntimeError("registry bug")


@asynccontextmanager
async def crashing_stack(
    script: list[Any],
) -> AsyncIterator[tuple[ApiServer, ScriptedModelServer]]:
    async with open_scripted_server(script) as model:
        config = make_config(model.base_url, model={"max_retries": 0})
        async with (
            open_agent(config, tools=_BrokenRegistry([_Probe()])) as agent,
            open_api_server(config, agent=agent, port=0) as api,
        ):
            yield api, model


def _crash(text: str = "") -> ToolCallReply:
    return ToolCallReply([("probe", {})], text=text)


def _events(raw: bytes) -> list[SSEEvent]:
    return [e for e in SSEDecoder().feed(raw) if isinstance(e, SSEEvent)]


def _crash_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Log records that carry the crash's traceback."""
    return [r for r in caplog.records if r.exc_info and "registry bug" in (r.exc_text or "")]


async def test_crash_after_output_ends_the_stream_with_one_error_frame(caplog) -> None:
    caplog.set_level(logging.ERROR)
    async with crashing_stack([_crash("Let me look."), TextReply("Still here.")]) as (api, _):
        async with httpx.AsyncClient(base_url=api.base_url, timeout=10) as http:
            with trio.fail_after(10):
                reply = await http.post("/chat/completions", json={**CHAT, "stream": True})
                after = await http.post("/chat/completions", json=CHAT)
    assert reply.status_code == 200
    assert reply.content.endswith(b"\n\n")
    events = _events(reply.content)
    payloads = [json.loads(e.data) for e in events if e.data != "[DONE]"]
    text = "".join(
        p["choices"][0]["delta"].get("content") or "" for p in payloads if p.get("choices")
    )
    assert text == "Let me look."
    errors = [p["error"] for p in payloads if "error" in p]
    assert len(errors) == 1, reply.content
    assert errors[0]["code"] == "internal_error"
    assert errors[0]["type"] == "server_error"
    assert "internal error" in errors[0]["message"]
    # The same end as a model failure after the stream started: the error
    # frame is the last frame.
    assert "error" in payloads[-1] and events[-1].data != "[DONE]"
    assert len(_crash_records(caplog)) == 1
    assert after.status_code == 200 and after.json()["choices"][0]["message"]["content"] == (
        "Still here."
    )


async def test_crash_before_output_is_one_500(caplog) -> None:
    caplog.set_level(logging.ERROR)
    async with crashing_stack([_crash(), _crash(), TextReply("ok")]) as (api, _):
        async with httpx.AsyncClient(base_url=api.base_url, timeout=10) as http:
            with trio.fail_after(10):
                streamed = await http.post("/chat/completions", json={**CHAT, "stream": True})
                plain = await http.post("/chat/completions", json=CHAT)
                after = await http.post("/chat/completions", json=CHAT)
    for reply in (streamed, plain):
        assert reply.status_code == 500, reply.text
        assert reply.headers["content-type"].startswith("application/json")
        error = reply.json()["error"]
        assert error["code"] == "internal_error" and error["type"] == "server_error"
    assert len(_crash_records(caplog)) == 2
    assert after.status_code == 200


async def test_session_stays_usable_after_a_crash() -> None:
    script = [_crash("Checking."), TextReply("Recovered.")]
    headers = {"X-Session-ID": "crashy"}
    async with crashing_stack(script) as (api, model):
        async with httpx.AsyncClient(base_url=api.base_url, timeout=10) as http:
            with trio.fail_after(10):
                crashed = await http.post(
                    "/chat/completions", json={**CHAT, "stream": True}, headers=headers
                )
                again = await http.post(
                    "/chat/completions",
                    json={"messages": [{"role": "user", "content": "again"}]},
                    headers=headers,
                )
    assert crashed.status_code == 200 and b"internal_error" in crashed.content
    assert again.status_code == 200, again.text
    assert again.json()["choices"][0]["message"]["content"] == "Recovered."
    sent = model.model_requests[1].json["messages"]
    # Every tool call of the crashed turn has its result, so the model server
    # accepts the history.
    calls = {c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or []}
    results = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
    assert calls and calls == results
    assert sent[-1] == {"role": "user", "content": "again"}


async def test_responses_crash_is_one_failure(caplog) -> None:
    caplog.set_level(logging.ERROR)
    script = [_crash("Looking."), TextReply("fine")]
    async with crashing_stack(script) as (api, _):
        async with httpx.AsyncClient(base_url=api.base_url, timeout=10) as http:
            with trio.fail_after(10):
                streamed = await http.post(
                    "/responses", json={"model": "m", "input": "hi", "stream": True}
                )
                after = await http.post("/responses", json={"model": "m", "input": "hi"})
    events = [json.loads(e.data) for e in _events(streamed.content)]
    kinds = [e["type"] for e in events]
    assert kinds.count("response.failed") == 1 and kinds[-1] == "response.failed"
    # The precise code is on the error event before response.failed.
    assert kinds[-2] == "error" and events[-2]["code"] == INTERNAL_ERROR
    assert "internal error" in events[-1]["response"]["error"]["message"]
    assert len(_crash_records(caplog)) == 1
    assert after.status_code == 200 and after.json()["status"] == "completed"


@pytest.mark.parametrize("wrote_first", [True, False])
async def test_a_crashing_stream_writer_on_the_real_server(monkeypatch, wrote_first) -> None:
    from hermes_trio.server.chat import route as chat_route

    async def broken_writer(receive, out, frames, options) -> None:  # type: ignore[no-untyped-def]
        with out, receive:
            await receive.receive()
            if wrote_first:
                await out.send(frames.content("Hel"))
            raise RuntimeError("registry bug in the writer")

    monkeypatch.setattr(chat_route, "write_chat_sse", broken_writer)
    async with crashing_stack([TextReply("Hello there"), TextReply("ok")]) as (api, _):
        async with httpx.AsyncClient(base_url=api.base_url, timeout=10) as http:
            with trio.fail_after(10):
                reply = await http.post("/chat/completions", json={**CHAT, "stream": True})
                after = await http.post("/chat/completions", json=CHAT)
    if wrote_first:
        assert reply.status_code == 200
        payloads = [json.loads(e.data) for e in _events(reply.content)]
        text = [p["choices"][0]["delta"]["content"] for p in payloads if "choices" in p]
        assert "".join(text) == "Hel"
        assert [p["error"]["code"] for p in payloads if "error" in p] == [INTERNAL_ERROR]
        assert "error" in payloads[-1]
    else:
        assert reply.status_code == 500
        assert reply.json()["error"]["code"] == INTERNAL_ERROR
    assert after.status_code == 200


async def test_responses_crash_not_streamed_is_one_500() -> None:
    script = [_crash("Looking."), TextReply("fine")]
    async with crashing_stack(script) as (api, _):
        async with httpx.AsyncClient(base_url=api.base_url, timeout=10) as http:
            with trio.fail_after(10):
                crashed = await http.post("/responses", json={"model": "m", "input": "hi"})
                after = await http.post("/responses", json={"model": "m", "input": "hi"})
    assert crashed.status_code == 500
    assert crashed.json()["error"]["code"] == "internal_error"
    assert after.status_code == 200
