"""Configured MCP servers as the agent's tools, against real servers:
``mcp-server-time`` (PyPI, stdio, nobody here wrote it), a streamable-HTTP
server built with the SDK's ``MCPServer`` in this test, a server that exits
at once and one that hangs on start — all in one agent, one start.

What it shows: tools reach the model as ``<label>__<tool>`` with their
schemas and a call's result reaches the model; a read-only tool runs and
one that is not asks first (refused with nobody to ask); a server that is
down answers with an error at once; progress notifications become
``ToolProgress`` events; interrupting the turn during a long call returns at
once, the server sees the cancellation and serves the next call."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from http_server import open_http_mcp_server
from mcp_support import interrupt_at_progress
from support import make_config, run_turn

from hermes_trio.agent import open_agent
from hermes_trio.cli.doctor import _mcp_servers as doctor_mcp_servers
from hermes_trio.config import McpServerConfig
from hermes_trio.events import ToolCallFinished
from hermes_trio.mcp import open_mcp_servers
from hermes_trio.testing import ModelDouble, TextReply, ToolCallReply
from hermes_trio.tools import ToolContext, ToolRegistry

# A start that would hang is given up after this long.
START_TIMEOUT = 2.0


def servers(url: str) -> dict[str, McpServerConfig]:
    return {
        "time": McpServerConfig(
            command=sys.executable,
            args=["-m", "mcp_server_time", "--local-timezone", "UTC"],
            env={"TZ": "UTC"},
            timeout=30,
        ),
        "web": McpServerConfig(url=url, timeout=10, exclude_tools=["nothing"]),
        "gone": McpServerConfig(command="false", timeout=START_TIMEOUT),
        "stuck": McpServerConfig(
            command=sys.executable,
            args=["-c", "import time; time.sleep(600)"],
            timeout=START_TIMEOUT,
        ),
        "off": McpServerConfig(command="false", enabled=False),
    }


def tool_messages(request: Any) -> list[str]:
    return [m["content"] for m in request.json["messages"] if m["role"] == "tool"]


async def test_configured_servers_tools_calls_and_failures() -> None:
    double = ModelDouble(
        [
            ToolCallReply(
                [
                    ("time__get_current_time", {"timezone": "Europe/Paris"}),
                    ("web__add", {"a": 2, "b": 40}),
                    ("web__shout", {"text": "hi"}),
                    ("gone__anything", {}),
                    ("stuck__anything", {}),
                ]
            ),
            TextReply("All done."),
            # Interrupted during the call: the model is not asked again.
            ToolCallReply([("web__slow", {"steps": 50})]),
            ToolCallReply([("web__add", {"a": 1, "b": 1})]),
            TextReply("Two."),
            ToolCallReply([("web__grow", {})]),
            TextReply("Grown."),
        ]
    )
    async with open_http_mcp_server() as (url, calls):
        config = make_config(double.base_url, mcp_servers=servers(url))
        started = trio.current_time()
        async with open_agent(config, transport=double) as agent:
            # The broken servers cost at most their start timeout.
            assert trio.current_time() - started < START_TIMEOUT + 10
            events, result = await run_turn(agent, "what time is it?")
            assert result.text == "All done."
            names = [t["function"]["name"] for t in double.model_requests[0].json["tools"]]
            assert {"time__get_current_time", "time__convert_time"} <= set(names)
            assert {"web__add", "web__shout", "web__slow"} <= set(names)
            assert not any(n.startswith(("gone__", "stuck__", "off__")) for n in names)
            schema = next(
                t["function"]["parameters"]
                for t in double.model_requests[0].json["tools"]
                if t["function"]["name"] == "time__get_current_time"
            )
            assert schema["required"] == ["timezone"]

            now, added, shouted, gone, stuck = tool_messages(double.model_requests[1])
            assert json.loads(now)["timezone"] == "Europe/Paris"
            assert added == "2 + 40 = 42"
            assert shouted.startswith("refused:") and "approval" in shouted
            assert gone.startswith("error: the MCP server 'gone' is not running")
            assert stuck.startswith("error: the MCP server 'stuck' is not running")
            assert "did not answer within 2 s" in stuck
            finished = sorted(
                (e for e in events if isinstance(e, ToolCallFinished)), key=lambda e: e.index
            )
            assert [e.ok for e in finished] == [True, True, False, False, False]
            # The down servers answered at once.
            assert all(e.duration < 1.0 for e in finished[3:])

            # A long call, interrupted once its progress shows.
            progress = await interrupt_at_progress(agent, "slowly")
            assert [(p.tool_name, p.progress, p.total, p.message) for p in progress] == [
                ("web__slow", 1, 50, "step 1"),
                ("web__slow", 2, 50, "step 2"),
            ]
            with trio.fail_after(5):
                await calls.saw_cancel.wait()
            assert calls.cancelled == [50] and calls.finished == []

            # The server keeps serving.
            _, result = await run_turn(agent, "one plus one")
            assert result.text == "Two."
            assert tool_messages(double.model_requests[-1]) == ["1 + 1 = 2"]

            # notifications/tools/list_changed: the new tool reaches the model.
            assert "web__extra" not in agent.tools
            _, result = await run_turn(agent, "grow")
            for _ in range(100):
                if "web__extra" in agent.tools:
                    break
                await trio.sleep(0.05)
            assert "web__extra" in agent.tools


async def test_doctor_lists_each_server_and_its_tools() -> None:
    async with open_http_mcp_server() as (url, _):
        config = make_config(
            "http://127.0.0.1:1/v1",
            mcp_servers={
                "web": McpServerConfig(url=url, timeout=10),
                "gone": McpServerConfig(command="false", timeout=START_TIMEOUT),
                "off": McpServerConfig(command="false", enabled=False),
            },
        )
        checks = await doctor_mcp_servers(config)
    lines = sorted(check.line() for check in checks)
    assert lines[0].startswith("FAIL  mcp server gone: ")
    assert lines[1] == "ok    mcp server web: answered; tools: add, grow, shout, slow"
    assert len(lines) == 2


async def test_a_crashed_server_is_started_again_and_its_stderr_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stdio server that dies mid-call: the call is an error result at
    once, the server is started again after the first backoff (1 s), and
    its stderr lines are logged under its label."""
    caplog.set_level(logging.INFO, logger="hermes_trio.mcp")
    script = Path(__file__).with_name("stdio_server.py")
    registry = ToolRegistry()
    crashy = McpServerConfig(command=sys.executable, args=[str(script)], timeout=20)
    async with open_mcp_servers({"crashy": crashy}, registry) as running:
        server = running.servers["crashy"]
        first = await registry.execute("crashy__pid", "{}", ToolContext())
        assert first.ok
        with trio.fail_after(5):
            crashed = await registry.execute("crashy__crash", "{}", ToolContext())
        assert not crashed.ok and crashed.content.startswith("error: crashy:")
        # Down now: an answer at once, not a wait.
        with trio.fail_after(0.5):
            down = await registry.execute("crashy__pid", "{}", ToolContext())
        assert not down.ok
        # Noticed as down, then up again (no event says either: polled).
        with trio.fail_after(10):
            while server.up:  # noqa: ASYNC110
                await trio.sleep(0.02)
            went_down = trio.current_time()
            while not server.up:  # noqa: ASYNC110
                await trio.sleep(0.02)
        assert trio.current_time() - went_down >= 0.9  # the first backoff
        again = await registry.execute("crashy__pid", "{}", ToolContext())
        assert again.ok and again.content != first.content
    said = [r.getMessage() for r in caplog.records]
    assert said.count("[crashy] hello from stderr") == 2
    assert any("'crashy' is down" in line and "again in 1 s" in line for line in said)
