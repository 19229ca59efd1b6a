"""``ModelClient.context_window``: model.context_window without a request,
else the model server's own word — its model card, llama.cpp's /props,
Ollama's /api/show, LM Studio's /api/v0/models — asked once, else the
default with a warning. Real sockets on loopback: the scripted model server
and tiny fake servers shaped after each kind."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from model_cards import (
    LLAMA_CPP_MODELS,
    LLAMA_CPP_PROPS,
    LM_STUDIO_MODELS,
    LM_STUDIO_V0_LOADED,
    OLLAMA_MODELS,
    OLLAMA_SHOW,
    OPENAI_MODELS,
    OPENROUTER_MODELS,
)

from hermes_trio.config import ModelConfig
from hermes_trio.llm import ContextWindow, ModelClient, make_http_client
from hermes_trio.llm import context_window as context_window_module
from hermes_trio.testing import ModelDouble, open_scripted_server
from hermes_trio.testing.fake_http import FakeRequest, FakeResponse, serve_http


@asynccontextmanager
async def fake_server(
    answers: dict[tuple[str, str], Any],
) -> AsyncIterator[tuple[str, list[FakeRequest]]]:
    """A server that answers ``(method, path)`` with the JSON given (or a
    FakeResponse), everything else with a 404; yields its base URL (with
    ``/v1``) and the requests it saw."""
    seen: list[FakeRequest] = []

    async def handle(request: FakeRequest) -> FakeResponse:
        seen.append(request)
        answer = answers.get((request.method, request.path))
        if answer is None:
            return FakeResponse.json({"error": "not found"}, status=404)
        if isinstance(answer, FakeResponse):
            return answer
        return FakeResponse.json(answer)

    async with serve_http(handle) as root:
        yield f"{root}/v1", seen


@asynccontextmanager
async def client_for(base_url: str, **fields: Any) -> AsyncIterator[ModelClient]:
    config = ModelConfig(base_url=base_url, **fields)
    async with make_http_client(config) as http:
        yield ModelClient(config, http)


def asked(seen: list[FakeRequest]) -> list[str]:
    return [f"{r.method} {r.path}" for r in seen]


async def test_model_context_window_wins_without_asking() -> None:
    double = ModelDouble(context_window=4096)
    config = ModelConfig(base_url=double.base_url, context_window=2048)
    async with make_http_client(config, transport=double) as http:
        window = await ModelClient(config, http).context_window("scripted-model")
    assert window == ContextWindow(2048, "config")
    assert double.requests == []


async def test_the_scripted_servers_card_states_max_model_len(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "hermes_trio.llm")
    async with (
        open_scripted_server(context_window=8192) as server,
        client_for(server.base_url) as client,
    ):
        first = await client.context_window()
        again = await client.context_window()
        other_default = await client.context_window(default=1000)
    assert first == again == other_default == ContextWindow(8192, "the model card (max_model_len)")
    # Asked once, for the configured (here: the listed) model; kept.
    assert [f"{r.method} {r.path}" for r in server.requests] == ["GET /v1/models"] * 2
    said = [r.getMessage() for r in caplog.records if "context window" in r.getMessage()]
    assert said == [
        "context window of model 'scripted-model': 8192 tokens (the model card (max_model_len))"
    ]


async def test_llama_cpp_answers_at_its_root_props() -> None:
    answers = {("GET", "/v1/models"): LLAMA_CPP_MODELS, ("GET", "/props"): LLAMA_CPP_PROPS}
    async with fake_server(answers) as (base_url, seen), client_for(base_url, name="m") as client:
        window = await client.context_window()
    assert window == ContextWindow(4096, "llama.cpp /props")
    assert asked(seen) == ["GET /v1/models", "GET /props"]


async def test_ollama_answers_api_show_for_the_model_named() -> None:
    answers = {("GET", "/v1/models"): OLLAMA_MODELS, ("POST", "/api/show"): OLLAMA_SHOW}
    async with (
        fake_server(answers) as (base_url, seen),
        client_for(base_url, name="llama3.1:8b", api_key="sk-local") as client,
    ):
        window = await client.context_window()
    assert window == ContextWindow(8192, "Ollama /api/show (num_ctx)")
    assert asked(seen) == ["GET /v1/models", "GET /props", "POST /api/show"]
    assert seen[-1].json() == {"model": "llama3.1:8b"}
    # The model server's key goes with every question, as with a request.
    assert {r.headers.get("authorization") for r in seen} == {"Bearer sk-local"}


async def test_lm_studio_answers_its_own_model_card() -> None:
    answers = {
        ("GET", "/v1/models"): LM_STUDIO_MODELS,
        ("GET", "/api/v0/models/qwen2.5-7b-instruct"): LM_STUDIO_V0_LOADED,
        # LM Studio's own 200 with an HTML page for unknown paths.
        ("GET", "/props"): FakeResponse(200, b"<html>Unexpected endpoint</html>"),
    }
    async with fake_server(answers) as (base_url, _), client_for(base_url) as client:
        window = await client.context_window("qwen2.5-7b-instruct")
    assert window == ContextWindow(4096, "LM Studio /api/v0/models (loaded_context_length)")


async def test_openrouters_card_states_context_length() -> None:
    answers = {("GET", "/v1/models"): OPENROUTER_MODELS}
    async with fake_server(answers) as (base_url, seen), client_for(base_url) as client:
        window = await client.context_window("openai/gpt-4o-mini")
    assert window == ContextWindow(128000, "the model card (context_length)")
    assert asked(seen) == ["GET /v1/models"]


async def test_a_server_that_says_nothing_gives_the_default_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "hermes_trio.llm")
    answers = {("GET", "/v1/models"): OPENAI_MODELS}
    async with fake_server(answers) as (base_url, seen), client_for(base_url) as client:
        window = await client.context_window("gpt-4o-mini", default=16384)
        again = await client.context_window("gpt-4o-mini", default=16384)
        # Each caller's default: the server's silence is what was kept.
        other = await client.context_window("gpt-4o-mini", default=8000)
    assert window == again == ContextWindow(16384, "default")
    assert other == ContextWindow(8000, "default")
    assert len(seen) == 4  # asked once: the card, /props, /api/show, LM Studio's card
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "model.context_window" in warnings[0].getMessage()
    assert "16384 tokens" in warnings[0].getMessage()


async def test_an_unreachable_server_is_asked_again_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "hermes_trio.llm")
    async with client_for("http://127.0.0.1:9/v1", name="m") as client:
        first = await client.context_window(default=8000)
        second = await client.context_window(default=8000)
    assert first == second == ContextWindow(8000, "default")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "could not be reached" in warnings[0]
    # Not kept: a server that starts later is asked then.
    async with (
        open_scripted_server(context_window=2048) as server,
        client_for(server.base_url) as client,
    ):
        client.config = dataclasses.replace(client.config, base_url="http://127.0.0.1:9/v1")
        assert (await client.context_window("scripted-model")).source == "default"
        client.config = dataclasses.replace(client.config, base_url=server.base_url)
        assert await client.context_window("scripted-model") == ContextWindow(
            2048, "the model card (max_model_len)"
        )


async def test_a_silent_server_is_waited_for_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(context_window_module, "PROBE_TIMEOUT", 0.2)
    caplog.set_level(logging.INFO, "hermes_trio.llm")
    seen: list[str] = []

    async def handle(request: FakeRequest) -> FakeResponse:
        seen.append(request.path)
        if request.path == "/props":
            await trio.sleep_forever()
        return FakeResponse.json({"error": "not found"}, status=404)

    async with serve_http(handle) as root, client_for(f"{root}/v1", name="m") as client:
        with trio.fail_after(5):
            first = await client.context_window(default=9000)
            again = await client.context_window(default=9000)
    assert first == again == ContextWindow(9000, "default")
    # The whole asking has one deadline, and silence is remembered.
    assert seen == ["/v1/models", "/props"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "did not answer within 0.2 s" in warnings[0]


async def test_turns_that_ask_together_ask_once() -> None:
    async with (
        open_scripted_server(context_window=8192) as server,
        client_for(server.base_url, name="scripted-model") as client,
    ):
        windows: list[ContextWindow] = []

        async def one() -> None:
            windows.append(await client.context_window())

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(one)
    assert windows == [ContextWindow(8192, "the model card (max_model_len)")] * 5
    assert len(server.requests) == 1
