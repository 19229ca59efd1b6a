"""Shared helpers for tests: configs pointed at a scripted model server and a
way to run one agent turn and keep every event."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
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


__all__ = ["ServeProcess", "api_stack", "make_config", "open_agent", "run_turn", "start_serve"]


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


class ServeProcess:
    """A real ``hermes-trio serve`` process and the lines it printed."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.base_url = ""
        self.output: list[str] = []
        self._changed = trio.Event()

    def add(self, line: str) -> None:
        self.output.append(line)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, text: str) -> str:
        while True:
            for line in self.output:
                if text in line:
                    return line
            await self._changed.wait()


async def start_serve(nursery: trio.Nursery, env: dict[str, str], cwd: Any) -> ServeProcess:
    """Start ``hermes-trio serve --port 0``; returns once it printed where it
    listens and which model server it uses."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "hermes_trio.cli", "serve", "--port", "0"],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    served = ServeProcess(process)

    async def read() -> None:
        buffer = b""
        assert process.stdout is not None
        async for piece in process.stdout:
            buffer += piece
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                served.add(line.decode())

    nursery.start_soon(read)
    try:
        with trio.fail_after(15):
            listening = await served.wait_for("listening on")
            await served.wait_for("serve: model server")
    except BaseException:
        process.kill()
        raise
    served.base_url = listening.split("listening on ")[1].split()[0]
    return served
