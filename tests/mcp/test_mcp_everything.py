"""``@modelcontextprotocol/server-everything`` (npm, stdio, nobody here
wrote it) as a configured server: the child sees only the environment
listed plus PATH; its long-running tool, interrupted with the turn, returns
at once and the server serves the next call; its progress notifications
reach the terminal renderer and the message editor.

The package is installed from the npm registry into a cache directory
once per session; without npm (or the registry) the test is skipped,
except under CI, where it fails."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import trio
from browser import missing_outside_tool
from mcp_support import interrupt_at_progress
from support import make_config, run_turn

from hermes_trio.agent import open_agent
from hermes_trio.config import McpServerConfig
from hermes_trio.consumers.editor_plan import EditorPlan, EditorSettings
from hermes_trio.consumers.messenger import Capabilities
from hermes_trio.consumers.terminal_plan import TerminalPlan
from hermes_trio.events import MessageStop, ToolCallChunk, ToolProgress
from hermes_trio.testing import ModelDouble, TextReply, ToolCallReply

PACKAGE = "@modelcontextprotocol/server-everything"
LONG = "ev__trigger-long-running-operation"
TESTS = "the server-everything tests"


@pytest.fixture(scope="session")
def everything() -> Path:
    """The server's entry point, installed from npm into a cache directory."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        missing_outside_tool("node and npm are not installed", TESTS)
    cache = Path(
        os.environ.get("HERMES_TEST_CACHE") or Path.home() / ".cache" / "hermes-trio-tests"
    )
    prefix = cache / "npm"
    entry = prefix / "node_modules" / PACKAGE / "dist" / "index.js"
    if not entry.exists():
        prefix.mkdir(parents=True, exist_ok=True)
        try:
            subprocess.run(
                [
                    npm,
                    "install",
                    "--silent",
                    "--no-audit",
                    "--no-fund",
                    "--prefix",
                    prefix,
                    PACKAGE,
                ],
                check=True,
                capture_output=True,
                timeout=300,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            missing_outside_tool(f"npm could not install {PACKAGE} ({exc})", TESTS)
    return entry


def editor_lines(events: list[ToolProgress]) -> list[str]:
    """What the message editor shows of a running tool as ``events`` arrive."""
    plan = EditorPlan(
        EditorSettings(typing_interval=0), Capabilities(can_edit=True, max_length=4096)
    )
    shown: list[str] = []
    now = 0.0
    for event in [MessageStop(False), ToolCallChunk(LONG, "long", {}, 0), *events]:
        now += 10.0
        plan.feed(event, now)
        while (action := plan.next_action(now)) is not None:
            shown.append(action.text)
            plan.succeeded(action, now, "1")
    return shown


async def test_everything_server_env_progress_cancel_and_next_call(everything: Path) -> None:
    double = ModelDouble(
        [
            ToolCallReply([("ev__get-env", {})]),
            TextReply("env seen"),
            ToolCallReply([(LONG, {"duration": 60, "steps": 120})]),
            ToolCallReply([("ev__get-sum", {"a": 2, "b": 3})]),
            TextReply("five"),
        ]
    )
    server = McpServerConfig(
        command="node", args=[str(everything), "stdio"], env={"HERMES_PROBE": "yes"}, timeout=30
    )
    config = make_config(double.base_url, mcp_servers={"ev": server})
    async with open_agent(config, transport=double) as agent:
        _, result = await run_turn(agent, "env?")
        assert result.text == "env seen"
        (env_text,) = [
            m["content"] for m in double.model_requests[1].json["messages"] if m["role"] == "tool"
        ]
        env = json.loads(env_text)
        assert env["HERMES_PROBE"] == "yes" and "PATH" in env
        assert "HOME" not in env and "USER" not in env

        progress = await interrupt_at_progress(agent, "take your time")
        assert [(p.tool_name, p.progress, p.total) for p in progress] == [
            (LONG, 1, 120),
            (LONG, 2, 120),
        ]

        terminal = TerminalPlan()
        terminal.start(0.0)
        terminal.feed([MessageStop(False), ToolCallChunk(LONG, "long", {}, 0), *progress], 1.0)
        assert terminal.live().tools[0].progress == "2/120"
        assert editor_lines(progress)[-1].endswith("· 2/120")

        with trio.fail_after(10):
            _, result = await run_turn(agent, "2+3")
        assert result.text == "five"
        (sum_text,) = [
            m["content"] for m in double.model_requests[-1].json["messages"] if m["role"] == "tool"
        ]
        assert "5" in sum_text


async def test_an_image_result_from_a_real_server_names_its_type(everything: Path) -> None:
    # The SDK's content blocks spell the field mime_type in Python and
    # mimeType on the wire: the tool's text must say what the image is.
    double = ModelDouble([ToolCallReply([("ev__get-tiny-image", {})]), TextReply("seen")])
    server = McpServerConfig(command="node", args=[str(everything), "stdio"], timeout=30)
    config = make_config(double.base_url, mcp_servers={"ev": server})
    async with open_agent(config, transport=double) as agent:
        _, result = await run_turn(agent, "show me")
    assert result.text == "seen"
    (tool_text,) = [
        m["content"] for m in double.model_requests[1].json["messages"] if m["role"] == "tool"
    ]
    assert "[image content, image/png]" in tool_text, tool_text
