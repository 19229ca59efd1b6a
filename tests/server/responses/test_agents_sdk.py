"""The OpenAI Agents SDK driving ``/v1/responses`` of the real server.

The SDK runs on asyncio, so each run goes to a worker thread with its own
event loop while the server and the scripted model server stay on trio.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import openai
import trio
from agents import (
    Agent,
    ModelSettings,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from support import api_stack

from hermes_trio.testing import TextReply, ToolCallReply

set_tracing_disabled(True)


def _script() -> list[Any]:
    """The model reads a file with the agent's own tool, then asks the client
    for the weather, then answers."""
    return [
        ToolCallReply(calls=[("read_file", {"path": "notes.txt"})], text="Reading."),
        ToolCallReply(calls=[("get_weather", {"city": "Paris"})]),
        TextReply("Paris is sunny; your notes say hello."),
    ]


async def _run_agent(base_url: str, *, streamed: bool) -> tuple[str, list[str], list[str]]:
    """One Runner run; returns its final output, the cities the client tool
    was called with, and the names of the tool calls the run recorded."""
    cities: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        cities.append(city)
        return "sunny"

    async with openai.AsyncOpenAI(base_url=base_url, api_key="sdk-key", max_retries=0) as client:
        agent = Agent(
            name="assistant",
            instructions="Answer briefly.",
            tools=[get_weather],
            model=OpenAIResponsesModel("hermes-agent", client),
            model_settings=ModelSettings(temperature=0.2),
        )
        prompt = "What do my notes say, and how is the weather in Paris?"
        if streamed:
            run = Runner.run_streamed(agent, prompt)
            async for _ in run.stream_events():
                pass
            result: Any = run
        else:
            result = await Runner.run(agent, prompt)
    names = [
        getattr(item.raw_item, "name", "")
        for item in result.new_items
        if item.type == "tool_call_item"
    ]
    return str(result.final_output), cities, names


async def test_agents_sdk_runs_its_tool_and_never_sees_the_servers(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    agent = {"workdir": str(tmp_path)}
    async with api_stack([*_script(), *_script()], agent=agent) as (api, model):
        for streamed in (False, True):
            with trio.fail_after(20):
                output, cities, names = await trio.to_thread.run_sync(
                    asyncio.run, _run_agent(api.base_url, streamed=streamed)
                )
            assert output == "Paris is sunny; your notes say hello."
            assert cities == ["Paris"]
            assert names == ["get_weather"]
    # The server ran read_file; the model saw its result, and then the
    # client's answer to get_weather.
    second, third = model.model_requests[1].json, model.model_requests[2].json
    assert "hello" in second["messages"][-1]["content"]
    assert third["messages"][-1]["role"] == "tool"
    assert third["messages"][-1]["content"] == "sunny"
