"""Scenario 2: the OpenAI Agents SDK with a client ``@function_tool`` while the
server's agent also runs its own ``read_file`` (issue 10 item 13)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clientcheck import Verdict, hermes, run_python

from hermes_trio.testing import TextReply, ToolCallReply

pytestmark = pytest.mark.clients("py")

ANSWER = "Order A-17 shipped on Tuesday from Lyon."


def script() -> list:
    return [
        # The server's own tool: the agent runs it, no client ever should.
        ToolCallReply([("read_file", {"path": "notes.txt"})]),
        # The client's tool: goes back to the Agents SDK, which runs it.
        ToolCallReply([("lookup_order", {"order_id": "A-17"})]),
        TextReply(ANSWER),
    ]


@pytest.mark.parametrize("case", ["responses", "responses_streamed", "chat", "chat_streamed"])
async def test_agents_sdk_client_tool_beside_server_tool(case: str, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("Orders starting with A ship from Lyon.\n")
    async with hermes(script(), tmp_path) as stack:
        run = await run_python("py", "agents_client.py", case, stack.client, time_limit=60)
        requests = [r.json for r in stack.model.model_requests]
    v = Verdict(run)
    error = run.last("exception")
    v.expect(
        "read_file" not in str(error.get("message", "")),
        f"the SDK was asked to run the server's own read_file (issue 10 item 13): "
        f"{error.get('type')}: {error.get('message')}",
    )
    result = run.last("result")
    v.expect(result.get("final") == ANSWER, f"final output {result.get('final')!r}")
    v.expect(
        len(run.of("client_tool_ran")) == 1,
        f"the client tool ran {len(run.of('client_tool_ran'))} times, not once",
    )
    seen = [i.get("name") for i in run.of("item")]
    v.expect("read_file" not in seen, f"the server's read_file reached the SDK as an item: {seen}")
    # The server did run read_file: its result went back to the model.
    tool_results = [
        m.get("content", "")
        for r in requests[1:2]
        for m in r.get("messages", [])
        if m.get("role") == "tool"
    ]
    v.expect(
        any("Lyon" in str(c) for c in tool_results),
        "the server's read_file result did not reach the model",
    )
    v.expect(len(requests) == 3, f"the model server got {len(requests)} requests, not 3")
    v.finish()
