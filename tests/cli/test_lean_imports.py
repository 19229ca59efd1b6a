"""Each command imports what it uses (issue 36): the MCP SDK (~34 MB, most
of a second), PostgreSQL's driver, the web stack, the platform adapters
and the testing kit load where they are configured or used, not at start.

Every check is a real process of its own, as a user starts it; the child
hook (child_hooks/sitecustomize.py) writes what was in ``sys.modules`` when
it exited, so an import done late in its life counts too.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import httpx
import pytest
import trio
from support import clean_env, start_serve

from hermes_trio.testing import TextReply, open_scripted_server

RECORDING = Path(__file__).resolve().parents[1] / "recording" / "tool_call_turn.json"

MCP = ("mcp", "mcp_types", "hermes_trio.mcp")
POSTGRES = ("psycopg", "psycopg_pool")
WEB = ("quart", "quart_trio", "hypercorn", "hermes_trio.server", "hermes_trio.listener")
ADAPTERS = tuple(
    f"hermes_trio.platforms.{name}"
    for name in ("telegram", "discord", "slack", "whatsapp", "homeassistant")
)
FAKES = tuple(
    f"hermes_trio.testing.{name}"
    for name in (
        "fake_discord",
        "fake_homeassistant",
        "fake_http",
        "fake_messenger",
        "fake_slack",
        "fake_telegram",
        "fake_whatsapp",
    )
)
KIT = ("hermes_trio.testing",)
RUNTIME = ("trio", "httpx", "hermes_trio.agent", "hermes_trio.gateway")

# What a command that runs nothing must not load (``--version`` and
# ``--help`` answer before the config is read); ``replay`` runs a turn on
# the kit's scripted model (but no platform, server or MCP server).
NOTHING_TO_RUN = (*MCP, *POSTGRES, *WEB, *ADAPTERS, *KIT, *RUNTIME, "hermes_trio.config", "yaml")
REPLAY = (*MCP, *POSTGRES, *WEB, *ADAPTERS, *FAKES, "hermes_trio.gateway")
SERVE = (*MCP, *POSTGRES, *ADAPTERS, *KIT, "hermes_trio.gateway")
# The terminal chat serves nothing and keeps no store.
CHAT = (*MCP, *POSTGRES, *WEB, *ADAPTERS, *KIT, "hermes_trio.gateway", "hermes_trio.store")


def loaded(modules: Iterable[str], unwanted: Iterable[str]) -> list[str]:
    """The modules of ``modules`` that are, or are inside, one of ``unwanted``."""
    return sorted(
        module
        for module in modules
        if any(module == name or module.startswith(f"{name}.") for name in unwanted)
    )


def modules_at_exit(directory: Path) -> list[str]:
    (written,) = directory.glob("*.modules")
    return written.read_text().split("\n")


@pytest.mark.parametrize(
    ("argv", "unwanted"),
    [
        (["-c", "import hermes_trio"], NOTHING_TO_RUN),
        (["-m", "hermes_trio.cli", "--version"], NOTHING_TO_RUN),
        (["-m", "hermes_trio.cli", "chat", "--help"], NOTHING_TO_RUN),
        (["-m", "hermes_trio.cli", "replay", str(RECORDING)], REPLAY),
    ],
    ids=["import", "version", "chat-help", "replay"],
)
def test_a_command_loads_only_what_it_uses(
    tmp_path: Path, argv: list[str], unwanted: tuple[str, ...]
) -> None:
    seen = tmp_path / "modules"
    seen.mkdir()
    done = subprocess.run(
        [sys.executable, *argv],
        env=clean_env(HERMES_TEST_MODULES_AT_EXIT=str(seen)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert loaded(modules_at_exit(seen), unwanted) == []


async def test_serve_without_mcp_servers_never_imports_mcp(tmp_path: Path) -> None:
    seen = tmp_path / "modules"
    seen.mkdir()
    async with open_scripted_server(default=TextReply("Hi there")) as model:
        env = clean_env(
            HERMES_MODEL_BASE_URL=model.base_url,
            HERMES_DATA_DIR=str(tmp_path / "data"),
            HERMES_TEST_MODULES_AT_EXIT=str(seen),
        )
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path)
            async with httpx.AsyncClient(base_url=served.base_url, timeout=20) as http:
                # Both APIs' request paths, a stored response included.
                chat = await http.post(
                    "/chat/completions",
                    json={"model": "hermes-agent", "messages": [{"role": "user", "content": "hi"}]},
                )
                assert chat.status_code == 200, chat.text
                response = await http.post(
                    "/responses", json={"model": "hermes-agent", "input": "hi", "store": True}
                )
                assert response.status_code == 200, response.text
            served.process.send_signal(signal.SIGINT)
            with trio.fail_after(15):
                await served.process.wait()
    assert loaded(modules_at_exit(seen), SERVE) == []


async def test_a_chat_question_loads_no_web_stack(tmp_path: Path) -> None:
    seen = tmp_path / "modules"
    seen.mkdir()
    async with open_scripted_server(default=TextReply("Hi there")) as model:
        env = clean_env(HERMES_MODEL_BASE_URL=model.base_url, HERMES_TEST_MODULES_AT_EXIT=str(seen))
        with trio.fail_after(60):
            done = await trio.run_process(
                [sys.executable, "-m", "hermes_trio.cli", "chat", "-q", "hi"],
                env=env,
                cwd=tmp_path,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    assert done.returncode == 0, done.stderr.decode()
    assert b"Hi there" in done.stdout
    assert loaded(modules_at_exit(seen), CHAT) == []
