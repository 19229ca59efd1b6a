"""Whether the server streams from the model: a streamed request always
does; for a non-streamed one, on either endpoint, ``streaming.api_server``
(then the master switch) decides, and a streamed answer is assembled."""

from __future__ import annotations

from typing import Any

import pytest
from support import http_for, make_config

from hermes_trio.config import StreamingConfig
from hermes_trio.server.run import open_api_server
from hermes_trio.testing import TextReply, open_scripted_server

ANSWER = "Streamed or not, the same answer."
CHAT = {"model": "hermes-agent", "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "hermes-agent", "input": "hi", "store": False}


async def _upstream_stream(streaming: StreamingConfig, path: str, body: dict[str, Any]) -> Any:
    """The ``stream`` field of the model request behind ``body`` at ``path``."""
    async with open_scripted_server([TextReply(ANSWER)]) as model:
        config = make_config(model.base_url, streaming=streaming)
        async with open_api_server(config, port=0) as api, http_for(api) as http:
            reply = await http.post(path, json=body)
            assert reply.status_code == 200, reply.text
            if body.get("stream"):
                assert ANSWER.split()[-1] in reply.text
            elif path == "/chat/completions":
                assert reply.json()["choices"][0]["message"]["content"] == ANSWER
            else:
                assert reply.json()["output"][-1]["content"][0]["text"] == ANSWER
    [request] = model.requests
    return request.json.get("stream")


@pytest.mark.parametrize("path,body", [("/chat/completions", CHAT), ("/responses", RESPONSES)])
@pytest.mark.parametrize(
    "streaming,upstream",
    [
        (StreamingConfig(api_server=True), True),
        (StreamingConfig(api_server=False, enabled=True), None),
        (StreamingConfig(enabled=True), True),
        (StreamingConfig(), None),
    ],
)
async def test_a_non_streamed_request_streams_upstream_as_configured(
    path: str, body: dict[str, Any], streaming: StreamingConfig, upstream: bool | None
) -> None:
    assert await _upstream_stream(streaming, path, body) is upstream


@pytest.mark.parametrize("path,body", [("/chat/completions", CHAT), ("/responses", RESPONSES)])
async def test_a_streamed_request_always_streams_upstream(path: str, body: dict[str, Any]) -> None:
    streaming = StreamingConfig(api_server=False)
    assert await _upstream_stream(streaming, path, {**body, "stream": True}) is True
