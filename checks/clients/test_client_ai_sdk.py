"""Scenario 5: the Vercel AI SDK (node): ``streamText`` / ``generateText`` over
``createOpenAI(...).chat()`` and ``.responses()``, a tool with ``execute``,
several steps, and a second turn that sends the first turn's
``response.messages`` back (the responses provider then sends
``item_reference`` items: issue 10 item 12). Then the same beside a server-side
``read_file`` (issue 10 item 13)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clientcheck import Verdict, hermes, run_node

from hermes_trio.testing import TextReply, ToolCallReply

pytestmark = pytest.mark.clients("node")

ANSWER = "Order A-17 shipped on Tuesday — from Lyon. 📦"
SECOND = "It should arrive on Friday."
CASES = ["chat_stream", "chat_generate", "responses_stream", "responses_generate"]


async def check(case: str, tmp_path: Path, *, server_tool: bool) -> None:
    (tmp_path / "notes.txt").write_text("Orders starting with A ship from Lyon.\n")
    script = [
        ToolCallReply([("lookup_order", {"order_id": "A-17"})]),
        TextReply(ANSWER, delay=0.01),
        TextReply(SECOND, delay=0.01),
    ]
    if server_tool:
        script.insert(0, ToolCallReply([("read_file", {"path": "notes.txt"})]))
    async with hermes(script, tmp_path) as stack:
        run = await run_node("ai_sdk_client.mjs", case, stack.client, time_limit=45)
        requests = [r.json for r in stack.model.model_requests]
    v = Verdict(run)
    turns = {t["turn"]: t for t in run.of("turn")}
    first, second = turns.get("first", {}), turns.get("second", {})
    problems = run.of("error_part")
    for p in problems:
        v.expect(
            False,
            f"turn '{p.get('turn')}' streamed an error: {p.get('type')}: "
            f"{p.get('message')} (status {p.get('status')}, body {p.get('body')!r})",
        )
    calls = [c["name"] for c in run.of("tool_call")]
    v.expect(
        calls == ["lookup_order"],
        f"the SDK saw tool calls {calls}, expected only its own lookup_order"
        + (" (the server's read_file leaked: issue 10 item 13)" if "read_file" in calls else ""),
    )
    for error in run.of("tool_error"):
        v.expect(False, f"tool error for {error['name']}: {error['error']}")
    v.expect(
        len(run.of("client_tool_ran")) == 1,
        f"the client tool ran {len(run.of('client_tool_ran'))} times, not once",
    )
    v.expect(first.get("text") == ANSWER, f"first turn text {first.get('text')!r}")
    v.expect(first.get("steps") == 2, f"first turn took {first.get('steps')} steps, not 2")
    if case.endswith("stream"):
        v.expect(first.get("deltas", 0) > 2, f"first turn: {first.get('deltas')} text deltas")
    v.expect(
        second.get("text") == SECOND,
        f"second turn (reusing response.messages) text {second.get('text')!r}",
    )
    expected = 4 if server_tool else 3
    v.expect(
        len(requests) == expected, f"the model server got {len(requests)} requests, not {expected}"
    )
    if len(requests) == expected:
        history = str(requests[-1].get("messages"))
        v.expect(
            "shipped on Tuesday" in history and "A-17" in history,
            "the second turn's model request lacks the first turn's tool result",
        )
    v.finish()


@pytest.mark.parametrize("case", CASES)
async def test_ai_sdk_tool_steps_and_second_turn(case: str, tmp_path: Path) -> None:
    await check(case, tmp_path, server_tool=False)


@pytest.mark.parametrize("case", ["chat_stream", "responses_stream"])
async def test_ai_sdk_beside_server_tool(case: str, tmp_path: Path) -> None:
    await check(case, tmp_path, server_tool=True)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_ai_sdk_unused_fields_are_accepted(api: str, tmp_path: Path) -> None:
    """Issue 10 item 15, as AI SDK users meet it (provider options)."""
    async with hermes([TextReply("ok")] * 3, tmp_path) as stack:
        run = await run_node(
            "ai_sdk_client.mjs", f"{api}_extra_fields", stack.client, time_limit=45
        )
    v = Verdict(run)
    trials = run.of("trial")
    v.expect(len(trials) == (2 if api == "responses" else 1), f"{len(trials)} trials ran")
    for trial in trials:
        v.expect(
            trial["ok"],
            f"{trial['name']}: refused with {trial.get('status')} "
            f"{trial.get('message')!r} (issue 10 item 15)",
        )
    v.finish()
