"""The first five minutes: a model server found by itself, ``--demo``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio
from support import clean_env, run_cli, start_serve

from hermes_trio.cli.discovery import LOCAL_SERVERS, discover, local_servers
from hermes_trio.testing import TextReply, open_scripted_server


def test_the_probe_list_and_its_override() -> None:
    assert local_servers({}) == list(LOCAL_SERVERS)
    assert local_servers({"HERMES_LOCAL_SERVERS": ""}) == []
    assert local_servers({"HERMES_LOCAL_SERVERS": "11434, Mine=9999"}) == [
        ("Ollama", 11434),
        ("Mine", 9999),
    ]
    with pytest.raises(ValueError, match="HERMES_LOCAL_SERVERS: expected name=port"):
        local_servers({"HERMES_LOCAL_SERVERS": "ollama"})


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_serve_finds_a_local_server_and_says_which(tmp_path: Path) -> None:
    nothing = _free_port()
    async with open_scripted_server([TextReply("found you")]) as model:
        port = int(model.base_url.split(":")[2].split("/")[0])
        assert discover([("Nothing", nothing)]) is None
        env = clean_env(
            HERMES_DATA_DIR=str(tmp_path / "data"),
            HERMES_LOCAL_SERVERS=f"Nothing={nothing},Test server={port}",
        )
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path)
            async with httpx.AsyncClient(base_url=served.base_url, timeout=15) as http:
                reply = await http.post(
                    "/chat/completions",
                    json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                )
            nursery.cancel_scope.cancel()
    assert reply.json()["choices"][0]["message"]["content"] == "found you"
    said = "\n".join(served.output)
    assert f"using Test server at http://127.0.0.1:{port}/v1, found on this machine" in said
    # The model it listed is the one asked for.
    assert model.model_requests[0].json["model"] == "scripted-model"


async def test_with_nothing_found_serve_refuses_in_one_line(tmp_path: Path) -> None:
    env = clean_env(HERMES_DATA_DIR=str(tmp_path / "data"), HERMES_LOCAL_SERVERS=str(_free_port()))
    result = await run_cli(["serve", "--port", "0"], env, tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.decode().strip().splitlines()
    assert line.startswith("hermes-trio serve: no model server configured: set model.base_url")


@pytest.mark.parametrize("flag", ["--demo", "--demo=auto"])
async def test_serve_demo_streams_a_canned_answer(tmp_path: Path, flag: str) -> None:
    env = clean_env(HERMES_DATA_DIR=str(tmp_path / "data"))
    # As a new user has it: nothing says the window but the model server.
    del env["HERMES_CONTEXT_WINDOW"]
    async with trio.open_nursery() as nursery:
        served = await start_serve(nursery, env, tmp_path, args=[flag])
        async with httpx.AsyncClient(base_url=served.base_url, timeout=15) as http:
            body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
            pieces = []
            async with http.stream("POST", "/chat/completions", json=body) as reply:
                assert reply.status_code == 200
                async for line in reply.aiter_lines():
                    if line.startswith("data: {"):
                        for choice in json.loads(line[6:])["choices"]:
                            pieces.append(choice["delta"].get("content") or "")
        nursery.cancel_scope.cancel()
    text = "".join(pieces)
    assert text.startswith("This is hermes-trio's demo mode")
    # Streamed: many pieces, not one.
    assert len([p for p in pieces if p]) > 10
    said = "\n".join(served.output)
    assert "DEMO MODE: answers are canned" in said
    # The demo model says its window: no warning that one is assumed.
    assert "assuming" not in said and "WARNING" not in said
    said_lines = [line for line in served.output if line.startswith("hermes-trio serve:")]
    assert said_lines[-1].startswith("hermes-trio serve: chat page: http://127.0.0.1:")


def test_chat_demo_answers_in_the_terminal(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "hermes_trio.cli", "chat", "--demo", "-q", "hello"],
        env=clean_env(HERMES_DATA_DIR=str(tmp_path / "data")),
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()
    assert "demo mode" in result.stdout.decode()
    assert "DEMO MODE" in result.stderr.decode()
