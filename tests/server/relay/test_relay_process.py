"""The plain model relay (``api_server.upstream_models: true``) seen from
outside a real ``hermes-trio serve``: what the model server says about its
own key never reaches the client, a model server that refuses that key is a
502 naming it (the key is the server's, not the client's), and a stream the
model server cut short ends with an error frame, not a clean end."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import serve_before

from hermes_trio.testing import (
    Drop,
    ErrorFrame,
    ErrorReply,
    RecordedRequest,
    Step,
    TextReply,
    open_scripted_server,
)

MODEL_KEY = "sk-model-secret-0123456789abcdef"
CONFIG = f"model: {{api_key: '{MODEL_KEY}'}}\napi_server: {{upstream_models: true}}\n"
UPSTREAM = "scripted-model"
ASK = {"model": UPSTREAM, "messages": [{"role": "user", "content": "title, please"}]}


def _echoing(status: int) -> Callable[[RecordedRequest], Step]:
    """A model server that quotes the key it was sent, as OpenAI's does."""

    def reply(request: RecordedRequest) -> Step:
        sent = request.headers.get("authorization", "")
        return ErrorReply(status, f"Incorrect API key provided: {sent}.")

    return reply


def _frame_echoing(request: RecordedRequest) -> Step:
    sent = request.headers.get("authorization", "")
    return ErrorFrame(text="partial", message=f"upstream broke; you sent {sent}")


def _no_key_in(text: str) -> None:
    assert MODEL_KEY not in text
    # Nor the truncated echo servers often quote ("sk-model…").
    assert MODEL_KEY[:8] not in text and MODEL_KEY[-8:] not in text


async def _stream(http: httpx.AsyncClient) -> tuple[int, list[Any]]:
    """A streamed relay request: its status and every ``data:`` payload."""
    frames: list[Any] = []
    async with http.stream("POST", "/chat/completions", json={**ASK, "stream": True}) as r:
        body = (await r.aread()).decode()
    for line in body.splitlines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            frames.append(data if data == "[DONE]" else json.loads(data))
    return r.status_code, frames


async def test_the_model_key_never_reaches_the_client_in_an_error(tmp_path: Path) -> None:
    script = [_echoing(400), _frame_echoing]
    async with open_scripted_server(script) as model:
        async with serve_before(model.base_url, tmp_path, CONFIG) as (served, http):
            refused = await http.post("/chat/completions", json=ASK)
            status, frames = await _stream(http)
    # The key did reach the model server: it was there to be echoed.
    assert model.model_requests[0].headers["authorization"] == f"Bearer {MODEL_KEY}"
    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert message.startswith("Incorrect API key provided: Bearer <redacted>")
    _no_key_in(refused.text)
    assert status == 200
    errors = [f["error"] for f in frames if isinstance(f, dict) and "error" in f]
    assert len(errors) == 1 and "<redacted>" in errors[0]["message"]
    _no_key_in(json.dumps(frames))
    _no_key_in("\n".join(served.output))


@pytest.mark.parametrize("status", [401, 403])
async def test_the_model_servers_refusal_of_its_key_is_a_502_naming_it(
    tmp_path: Path, status: int
) -> None:
    async with open_scripted_server([_echoing(status), _echoing(status)]) as model:
        async with serve_before(model.base_url, tmp_path, CONFIG) as (_, http):
            plain = await http.post("/chat/completions", json=ASK)
            streamed = await http.post("/chat/completions", json={**ASK, "stream": True})
    for reply in (plain, streamed):
        assert reply.status_code == 502
        assert reply.headers["content-type"].startswith("application/json")
        error = reply.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["type"] == "upstream_error" and error["code"] == "upstream_auth_failed"
        assert model.base_url in error["message"] and f"HTTP {status}" in error["message"]
        assert "api_key" in error["message"]
        _no_key_in(reply.text)


@pytest.mark.parametrize("reset", [False, True])
async def test_a_stream_the_model_server_cut_short_ends_with_an_error_frame(
    tmp_path: Path, reset: bool
) -> None:
    script = [Drop(text="one two three", reset=reset), TextReply(tokens=["whole"])]
    async with open_scripted_server(script) as model:
        async with serve_before(model.base_url, tmp_path, CONFIG) as (_, http):
            status, cut = await _stream(http)
            _, whole = await _stream(http)
    assert status == 200
    text = "".join(
        c["choices"][0]["delta"].get("content") or ""
        for c in cut
        if isinstance(c, dict) and c.get("choices")
    )
    assert text == "one two three"
    last = cut[-1]
    assert isinstance(last, dict) and set(last) == {"error"}
    assert last["error"]["code"] == "upstream_stream_cut"
    assert model.base_url in last["error"]["message"]
    assert "[DONE]" not in cut
    # A stream that ended properly gets no such frame.
    assert whole[-1] == "[DONE]"
    assert not any(isinstance(f, dict) and "error" in f for f in whole)
