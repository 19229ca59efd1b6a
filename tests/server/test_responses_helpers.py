"""Shared by the Responses API tests (no tests here): the real server with its
response store in a temporary directory, in front of the scripted model server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
from support import make_config

from hermes_trio.config import ApiServerConfig, Config, StoreConfig
from hermes_trio.server.run import ApiServer, open_api_server
from hermes_trio.testing import ScriptedModelServer, open_scripted_server
from hermes_trio.wire.sse import SSEDecoder, SSEEvent


def responses_config(
    base_url: str,
    data_dir: Path,
    *,
    api: dict[str, Any] | None = None,
    store: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Config:
    return make_config(
        base_url,
        api_server=ApiServerConfig(**(api or {})),
        store=StoreConfig(data_dir=str(data_dir), **(store or {})),
        **kwargs,
    )


@asynccontextmanager
async def responses_stack(
    data_dir: Path,
    script: Any = (),
    *,
    api: dict[str, Any] | None = None,
    store: dict[str, Any] | None = None,
    **kwargs: Any,
) -> AsyncIterator[tuple[ApiServer, ScriptedModelServer]]:
    async with open_scripted_server(script) as model_server:
        config = responses_config(model_server.base_url, data_dir, api=api, store=store, **kwargs)
        async with open_api_server(config, port=0) as api_server:
            yield api_server, model_server


def client_for(api: ApiServer, **kwargs: Any) -> openai.AsyncOpenAI:
    kwargs.setdefault("api_key", "test-client-key")
    return openai.AsyncOpenAI(base_url=api.base_url, max_retries=0, **kwargs)


def http_for(api: ApiServer, key: str = "test-client-key") -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=api.base_url,
        headers={"Authorization": f"Bearer {key}"},
        timeout=httpx.Timeout(10.0),
    )


def parse_sse(raw: bytes) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [e for e in decoder.feed(raw) if isinstance(e, SSEEvent)]
    decoder.close()
    return events


def payloads(events: list[SSEEvent]) -> list[dict[str, Any]]:
    return [json.loads(e.data) for e in events]


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
