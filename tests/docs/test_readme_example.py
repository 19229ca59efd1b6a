"""The manual's embedding example (``docs/library.md``), run as written
against the in-process model double on ``MockClock(autojump_threshold=0)``.

The code is read from the page's first Python block under ``SECTION``
(its ``trio.run(...)`` line left out), so the test follows the manual.
When that section is rewritten, adapt ``SECTION`` and ``run_example``
here, in this one place.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from trio.testing import MockClock

import hermes_trio
from hermes_trio.testing import ModelDouble, TextReply, ToolCallReply

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "docs" / "library.md"
SECTION = "# Using hermes-trio from a trio program"
# The front door shows a shorter example of the same thing; it runs too.
FRONT_DOOR = ROOT / "README.md"
FRONT_DOOR_SECTION = "## The library"
_SETTING_PREFIXES = ("HERMES_", "OPENAI_", "API_SERVER_", "TELEGRAM_")


def example_source(page: Path = README, heading: str = SECTION) -> str:
    """The first Python block of the manual's embedding section (or of
    ``heading`` on ``page``)."""
    section = page.read_text(encoding="utf-8").split(heading, 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    lines = [line for line in code.splitlines() if not line.startswith("trio.run(")]
    return "\n".join(lines) + "\n"


async def run_example(
    double: ModelDouble,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    on_print: Callable[[str], None] = lambda text: None,
    source: str | None = None,
) -> str:
    """Run the example's ``main()`` with its model server being ``double``;
    returns what it printed. ``on_print`` sees each print as it happens."""
    # load_config() as the example calls it: no config file here, the model
    # server from the environment, and nothing else from this machine.
    for name in list(os.environ):
        if name.startswith(_SETTING_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HERMES_MODEL_BASE_URL", double.base_url)
    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path / "data"))
    # The one change to the example: its agent reaches the double, not a socket.
    monkeypatch.setattr(
        hermes_trio, "open_agent", partial(hermes_trio.open_agent, transport=double)
    )
    printed: list[str] = []

    def fake_print(*args: Any, sep: str = " ", end: str = "\n", flush: bool = False) -> None:
        text = sep.join(str(a) for a in args) + end
        printed.append(text)
        on_print(text)

    namespace: dict[str, Any] = {"__name__": "readme_example", "print": fake_print}
    exec(compile(source or example_source(), str(README), "exec"), namespace)
    await namespace["main"]()
    return "".join(printed)


def test_the_example_is_found_and_runs_a_turn() -> None:
    source = example_source()
    assert "async def main()" in source and "agent.turn(" in source
    assert "trio.run" not in source


async def test_the_readme_example_runs_against_the_double(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = [
        ToolCallReply([("list_files", {"path": "."})]),
        TextReply(tokens=["Hi", " there", "!"], delay=0.5),
    ]
    double = ModelDouble(script)
    printed = await run_example(double, monkeypatch, tmp_path)
    # No such tool here: the model is told so, and answers anyway.
    shown = re.fullmatch(
        r'\n\[list_files: \{"path":"\."\}\]\nHi there!\n\(stop, (\d+) tokens\)\n', printed
    )
    assert shown is not None, printed
    assert int(shown[1]) > 0
    assert trio.current_time() == 1.0
    first, second = double.model_requests
    assert first.json["messages"][-1] == {
        "role": "user",
        "content": "List the files here, then say hi.",
    }
    assert second.json["messages"][-1]["role"] == "tool"
    assert second.received_at == 0.0


async def test_cancelling_the_readme_turn_after_its_5th_chunk_closes_the_request_then(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tokens = [f" word{n}" for n in range(1, 11)]
    double = ModelDouble([TextReply(tokens=tokens, first_token_delay=2, delay=1.5)])
    chunks: list[tuple[float, str]] = []
    cancelled_at: list[float] = []

    with trio.CancelScope() as turn:

        def on_print(text: str) -> None:
            if text.startswith(" word"):
                chunks.append((trio.current_time(), text))
                if len(chunks) == 5:
                    cancelled_at.append(trio.current_time())
                    turn.cancel()

        await run_example(double, monkeypatch, tmp_path, on_print)

    assert turn.cancelled_caught
    # Chunks at 2.0, 3.5, 5.0, 6.5, 8.0; nothing after the cancel.
    assert chunks == [(2.0 + 1.5 * n, tokens[n]) for n in range(5)]
    assert cancelled_at == [8.0]
    (request,) = double.model_requests
    connection = double.connections[request.connection_id - 1]
    assert connection.closed_by == "client"
    assert connection.closed_at == cancelled_at[0] == trio.current_time()


async def test_the_examples_own_deadline_stops_everything_at_30_s(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A token every 7 s: the example's move_on_after(30) ends the turn after
    # the fifth, at 30 s, and the model server sees the request closed then.
    double = ModelDouble([TextReply(tokens=[f" t{n}" for n in range(10)], delay=7)])
    printed = await run_example(double, monkeypatch, tmp_path)
    assert printed == " t0 t1 t2 t3 t4"
    assert trio.current_time() == 30.0
    (request,) = double.model_requests
    assert double.connections[request.connection_id - 1].closed_at == 30.0


async def test_the_front_doors_example_streams_the_answer(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    source = example_source(FRONT_DOOR, FRONT_DOOR_SECTION)
    assert "async def main()" in source and "agent.turn(" in source
    double = ModelDouble([TextReply(tokens=["Hi", " there", "!"], delay=0.5)])
    printed = await run_example(double, monkeypatch, tmp_path, source=source)
    assert printed == "Hi there!"
    assert trio.current_time() == 1.0
