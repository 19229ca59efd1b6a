"""The real API server, a model that asks the terminal tool to delete $HOME,
and nobody to approve it: the home directory's canary must survive and the
client must see the refusal."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import trio
from support import api_stack

from hermes_trio.testing import TextReply, ToolCallReply
from hermes_trio.wire.sse import SSEDecoder, SSEEvent

COMMAND = r"\rm -rf $HOME"


async def test_rm_rf_home_through_the_server_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    canary = home / "canary.txt"
    canary.write_text("still here")
    work = tmp_path / "work"
    work.mkdir()
    # The in-process server's tool shells inherit this environment.
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("HERMES_YOLO_MODE", raising=False)

    script = [
        ToolCallReply(calls=[("terminal", {"command": COMMAND})], text="Cleaning up."),
        TextReply("I was not allowed to do that."),
    ]
    async with api_stack(script, agent={"workdir": str(work), "yolo": False}) as (api, model):
        async with httpx.AsyncClient(timeout=10) as client:
            with trio.fail_after(10):
                response = await client.post(
                    f"{api.base_url}/chat/completions",
                    json={
                        "model": "hermes-agent",
                        "messages": [{"role": "user", "content": "clean my home"}],
                        "stream": True,
                    },
                    headers={"X-Hermes-Stream-Extensions": "tools"},
                )
        second = model.model_requests[1].json

    assert canary.read_text() == "still here"
    assert response.status_code == 200
    frames = [e for e in SSEDecoder().feed(response.content) if isinstance(e, SSEEvent)]
    finished = [json.loads(e.data) for e in frames if e.event == "hermes.tool.finished"]
    assert [(f["tool"], f["ok"]) for f in finished] == [("terminal", False)]
    # What the model read back: the refusal, naming why.
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["content"].startswith("refused:")
    assert "recursive delete of a broad path" in tool_message["content"]
    answer = "".join(
        chunk["choices"][0]["delta"].get("content") or ""
        for chunk in (
            json.loads(e.data) for e in frames if e.event == "message" and e.data != "[DONE]"
        )
        if chunk.get("choices")
    )
    assert answer.endswith("I was not allowed to do that.")


async def test_read_file_outside_the_workdir_through_the_server_is_refused(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    script = [
        ToolCallReply(calls=[("read_file", {"path": "/etc/passwd"})]),
        TextReply("Not allowed."),
    ]
    async with api_stack(script, agent={"workdir": str(work)}) as (api, model):
        async with httpx.AsyncClient(timeout=10) as client:
            with trio.fail_after(10):
                response = await client.post(
                    f"{api.base_url}/chat/completions",
                    json={
                        "model": "hermes-agent",
                        "messages": [{"role": "user", "content": "show /etc/passwd"}],
                    },
                )
        second = model.model_requests[1].json
    assert response.status_code == 200
    tool_message = second["messages"][-1]
    assert tool_message["content"].startswith("refused: /etc/passwd is outside")
    assert "root:" not in tool_message["content"]
