"""The manual's Responses API approval example (``docs/responses.md``), run as written (its
server address and key swapped for an in-process server's) with the person's
answers scripted: a denied command never runs, an approved one does."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import trio
from support import api_stack

from hermes_trio.testing import TextReply, ToolCallReply
from tests.server.approvals.test_chat_approvals import flagged

README = Path(__file__).resolve().parents[3] / "docs" / "responses.md"
SECTION = "## Approving commands in the Responses API"


def example_source() -> str:
    """The first Python block of the manual's section."""
    section = README.read_text(encoding="utf-8").split(SECTION, 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


async def test_the_readme_example_asks_and_answers(tmp_path: Path) -> None:
    kept, gone = tmp_path / "kept", tmp_path / "gone"
    script = [
        ToolCallReply(calls=[("terminal", {"command": flagged(kept)})]),
        ToolCallReply(calls=[("terminal", {"command": flagged(gone)})]),
        TextReply("Cleaned up, as far as you let me."),
    ]
    asked: list[str] = []
    printed: list[str] = []

    def answer(prompt: str) -> str:
        asked.append(prompt)
        return "n" if len(asked) == 1 else "y"

    def capture(*args: Any, **_: Any) -> None:
        printed.append(" ".join(map(str, args)))

    async with api_stack(script) as (api, _):
        source = (
            example_source()
            .replace("http://127.0.0.1:8642/v1", api.base_url)
            .replace("sk-…", "sk-test")
        )
        names: dict[str, Any] = {"__builtins__": builtins, "input": answer, "print": capture}
        # The example is blocking (the sync client): it runs in a thread
        # while the server answers here.
        await trio.to_thread.run_sync(exec, compile(source, str(README), "exec"), names)
    assert len(asked) == 2 and "terminal" in asked[0] and str(kept) in asked[0]
    assert not kept.exists() and gone.exists()
    assert printed == ["Cleaned up, as far as you let me."]
