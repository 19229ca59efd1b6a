"""The model client's own calls for the code that once spoke httpx to the
model server itself (the plain relay, ``doctor``, ``init``, discovery): one
error mapping (``ModelError``) and one place for the key."""

from __future__ import annotations

import socket

import pytest
import trio
from support import make_config

from hermes_trio.llm import ModelClient, ModelError, list_models, make_http_client
from hermes_trio.testing import TextReply, open_scripted_server


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_models_and_relay_fail_as_model_errors_naming_the_cause() -> None:
    config = make_config(f"http://127.0.0.1:{_closed_port()}/v1").model
    async with make_http_client(config) as http:
        client = ModelClient(config, http)
        with pytest.raises(ModelError) as listing:
            await client.models()
        with pytest.raises(ModelError) as relaying:
            async with client.relay({"model": "m", "messages": []}):
                pass
    for error in (listing.value, relaying.value):
        assert error.code == "model_unreachable" and error.status is None
        assert error.cause == "ConnectError" and not error.timed_out
    with pytest.raises(ModelError) as synced:
        await trio.to_thread.run_sync(lambda: list_models(config.base_url or "", None, timeout=1))
    assert synced.value.status is None and synced.value.cause == "ConnectError"


async def test_relay_sends_the_key_and_hands_back_the_answer_as_it_came() -> None:
    async with open_scripted_server([TextReply("hi")]) as model:
        config = make_config(model.base_url, model={"api_key": "sk-relay"}).model
        async with make_http_client(config) as http:
            client = ModelClient(config, http)
            async with client.relay({"model": "m", "messages": [], "stream": True}) as answer:
                raw = b"".join([piece async for piece in answer.pieces])
            listed = await client.models()
    assert answer.status == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert b'"hi"' in raw and raw.rstrip().endswith(b"data: [DONE]")
    assert model.model_requests[0].headers.get("authorization") == "Bearer sk-relay"
    assert listed and isinstance(listed[0]["id"], str)


async def test_a_model_list_that_is_not_one_is_a_model_error_with_its_status() -> None:
    async with open_scripted_server([]) as model:
        url = model.base_url.removesuffix("/v1") + "/nothing/v1"
        with pytest.raises(ModelError) as refused:
            await trio.to_thread.run_sync(lambda: list_models(url, None, timeout=5))
    assert refused.value.status == 404 and refused.value.cause is None
