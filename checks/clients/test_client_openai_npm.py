"""The official openai npm client from Node: a streamed chat, and a message
holding half of a surrogate pair (what a JavaScript ``.slice()`` through an
emoji produces, and what ``JSON.stringify`` sends as ``\\ud83c``):
issue 10 item 9."""

from __future__ import annotations

from pathlib import Path

import pytest
from clientcheck import Verdict, hermes, run_node

from hermes_trio.testing import TextReply

pytestmark = pytest.mark.clients("node")

STORY = "Once upon a time — «trio» — a scheduler woke up. 🌙\n\nThe end."


async def test_openai_npm_chat_stream(tmp_path: Path) -> None:
    async with hermes([TextReply(STORY, delay=0.005)], tmp_path) as stack:
        run = await run_node("openai_npm_client.mjs", "chat_stream", stack.client)
    v = Verdict(run)
    result = run.last("result")
    v.expect(result.get("text") == STORY, f"streamed text {result.get('text')!r}")
    v.expect(result.get("deltas", 0) > 5, f"{result.get('deltas')} deltas")
    v.expect(result.get("finish") == ["stop"], f"finish reasons {result.get('finish')}")
    v.finish()


async def test_lone_surrogate_is_a_client_error_not_a_crash(tmp_path: Path) -> None:
    async with hermes([TextReply("Fine.")] * 4, tmp_path) as stack:
        run = await run_node("openai_npm_client.mjs", "lone_surrogate", stack.client)
    v = Verdict(run)
    trials = {t["name"]: t for t in run.of("trial")}
    v.expect(len(trials) == 3, f"{len(trials)} trials ran")
    for name, trial in trials.items():
        # Answering it (the text made well-formed) or a 400 naming the field are
        # both fine; a 5xx or a 409 "internal error" is a crash.
        v.expect(
            trial["ok"] or trial.get("status") == 400,
            f"{name}: {trial.get('status')} {trial.get('message')!r} (issue 10 item 9)",
        )
    after = trials.get("the same session afterwards", {})
    v.expect(
        after.get("ok"),
        f"the session is unusable after the bad message: "
        f"{after.get('status')} {after.get('message')!r} (issue 10 item 9)",
    )
    v.finish()
