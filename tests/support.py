"""Shared helpers for tests: configs pointed at a scripted model server and a
way to run one agent turn and keep every event."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from hermes_trio.agent import Agent, TurnResult, open_agent
from hermes_trio.config import AgentConfig, Config, ModelConfig, StoreConfig, TimeoutsConfig
from hermes_trio.events import StreamEvent


def make_config(
    base_url: str,
    *,
    model: dict[str, Any] | None = None,
    agent: dict[str, Any] | None = None,
    **sections: Any,
) -> Config:
    """A config for tests: fast retries, short timeouts, no config file read."""
    model_fields: dict[str, Any] = {
        "base_url": base_url,
        "api_key": "test-key",
        "name": "scripted-model",
        "max_retries": 2,
        "backoff_base": 0.001,
        "backoff_max": 0.01,
        "timeouts": TimeoutsConfig(connect=2, first_token=5, idle=5, request=5),
    }
    for key, value in (model or {}).items():
        if key == "timeouts" and isinstance(value, dict):
            value = dataclasses.replace(model_fields["timeouts"], **value)
        model_fields[key] = value
    agent_fields: dict[str, Any] = {"long_tool_hint": 0}
    agent_fields.update(agent or {})
    # Never the user's ~/.hermes-trio: each config gets its own store.
    sections.setdefault("store", StoreConfig(data_dir=tempfile.mkdtemp(prefix="hermes-test-")))
    return Config(
        model=ModelConfig(**model_fields),
        agent=dataclasses.replace(AgentConfig(), **agent_fields),
        **sections,
    )


async def run_turn(
    agent: Agent, messages: list[dict[str, Any]] | str, **kwargs: Any
) -> tuple[list[StreamEvent], TurnResult]:
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    send, receive = trio.open_memory_channel[StreamEvent](64)
    events: list[StreamEvent] = []
    results: list[TurnResult] = []

    async def produce() -> None:
        results.append(await agent.run_turn(messages, send, **kwargs))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        async with receive:
            async for event in receive:
                events.append(event)
    return events, results[0]


__all__ = ["api_stack", "make_config", "open_agent", "run_turn"]


@asynccontextmanager
async def api_stack(
    script: Any = (),
    *,
    model: dict[str, Any] | None = None,
    agent: dict[str, Any] | None = None,
    api: dict[str, Any] | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """The real API server on a loopback port in front of a scripted model server."""
    from hermes_trio.config import ApiServerConfig
    from hermes_trio.server.run import open_api_server
    from hermes_trio.testing import open_scripted_server

    async with open_scripted_server(script) as model_server:
        config = make_config(
            model_server.base_url,
            model=model,
            agent=agent,
            api_server=ApiServerConfig(**(api or {})),
        )
        async with open_api_server(config, port=0) as api_server:
            yield api_server, model_server
