"""Scenario 4: pydantic-ai, an Agent with a tool over ``OpenAIChatModel`` and
``OpenAIResponsesModel``, streamed and not; then the same while the server
runs its own ``read_file`` first (issue 10 item 13)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clientcheck import Verdict, hermes, run_python

from hermes_trio.testing import TextReply, ToolCallReply

pytestmark = pytest.mark.clients("py")

ANSWER = "Order A-17 shipped on Tuesday — from Lyon. 📦"
CASES = ["chat", "chat_stream", "responses", "responses_stream"]


async def check(case: str, tmp_path: Path, *, server_tool: bool) -> None:
    (tmp_path / "notes.txt").write_text("Orders starting with A ship from Lyon.\n")
    script = [
        ToolCallReply([("lookup_order", {"order_id": "A-17"})]),
        TextReply(ANSWER, delay=0.01),
    ]
    if server_tool:
        script.insert(0, ToolCallReply([("read_file", {"path": "notes.txt"})]))
    async with hermes(script, tmp_path) as stack:
        run = await run_python("py", "pydantic_ai_client.py", case, stack.client, time_limit=60)
        requests = [r.json for r in stack.model.model_requests]
    v = Verdict(run)
    result = run.last("result")
    v.expect(result.get("output") == ANSWER, f"output {result.get('output')!r}")
    v.expect(
        len(run.of("client_tool_ran")) == 1,
        f"the client tool ran {len(run.of('client_tool_ran'))} times, not once",
    )
    if case.endswith("stream"):
        deltas = result.get("deltas") or []
        v.expect("".join(deltas) == ANSWER and len(deltas) > 2, f"streamed deltas {deltas}")
    sent = str(requests)
    v.expect(
        "Unknown tool" not in sent and "not a valid tool" not in sent,
        "pydantic-ai told the model its tool call was unknown (it was asked to run the "
        "server's own tool: issue 10 item 13)",
    )
    expected = 3 if server_tool else 2
    v.expect(
        len(requests) == expected, f"the model server got {len(requests)} requests, not {expected}"
    )
    v.finish()


@pytest.mark.parametrize("case", CASES)
async def test_pydantic_ai_tool(case: str, tmp_path: Path) -> None:
    await check(case, tmp_path, server_tool=False)


@pytest.mark.parametrize("case", ["chat", "responses"])
async def test_pydantic_ai_tool_beside_server_tool(case: str, tmp_path: Path) -> None:
    await check(case, tmp_path, server_tool=True)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_pydantic_ai_unused_fields_are_accepted(api: str, tmp_path: Path) -> None:
    """Issue 10 item 15, as pydantic-ai users meet it."""
    async with hermes([TextReply("ok")] * 3, tmp_path) as stack:
        run = await run_python(
            "py", "pydantic_ai_client.py", f"{api}_extra_fields", stack.client, time_limit=60
        )
    v = Verdict(run)
    trials = run.of("trial")
    v.expect(len(trials) == 2, f"{len(trials)} trials ran")
    for trial in trials:
        v.expect(
            trial["ok"],
            f"{trial['name']}: refused with {trial.get('status')} "
            f"{trial.get('message')!r} (issue 10 item 15)",
        )
    v.finish()
