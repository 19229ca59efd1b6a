"""The chat page's Markdown renderer does work in proportion to its text,
whatever the text: 2 MB of ``<`` once took 35 s in a browser (each ``<``
searched the rest of the text for a ``>``).

The work is counted, not timed: ``markdown_work.mjs`` runs the page's own
``markdown.js`` under node with V8's block coverage (every JavaScript block
run) and counts the characters the string and RegExp built-ins it calls
scan or copy. Doubling a linear renderer's input doubles that count; a
quadratic one's quadruples it. Needs node 19 or later (skipped without).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from browser import missing_outside_tool

HERE = Path(__file__).resolve().parent
RENDERER = HERE.parents[2] / "hermes_trio" / "server" / "page" / "markdown.js"
COUNTER = HERE / "markdown_work.mjs"

# Texts that made some search start over at every character.
PATHOLOGICAL: dict[str, Callable[[int], str]] = {
    "a run of <": lambda n: "<" * n,
    "a run of < and one >": lambda n: "<" * n + ">",
    "autolinks never closed": lambda n: "<http://a" * (n // 9) + ">",
    "bare URLs with a bad host": lambda n: "http://[/" * (n // 9),
    "bare URLs one after another": lambda n: "http://x|" * (n // 9),
    "a URL and its closing parentheses": lambda n: "http://a" + ")" * n,
    "a run of [": lambda n: "[" * n,
    "links never closed": lambda n: "[](" * (n // 3),
    "nested labels never closed": lambda n: "[[]" * (n // 3),
    "unmatched emphasis": lambda n: "*a" * (n // 2),
    "unmatched code": lambda n: "`a" * (n // 2),
    "a line per character": lambda n: "a\n" * (n // 2),
}
SIZE = 10_000
RENDERER_TESTS = "the tests that run the page's renderer under node"


def node() -> str:
    found = shutil.which("node")
    if found is None:
        missing_outside_tool("node is not installed", RENDERER_TESTS)
    version = subprocess.run([found, "--version"], capture_output=True, text=True, check=True)
    major = int(re.match(r"v(\d+)", version.stdout).group(1))  # type: ignore[union-attr]
    if major < 19:
        missing_outside_tool(
            f"node {version.stdout.strip()} is too old (node:inspector/promises needs 19)",
            RENDERER_TESTS,
        )
    return found


def work(cases: list[tuple[str, str]]) -> dict[str, int]:
    ran = subprocess.run(
        [node(), str(COUNTER), str(RENDERER)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    counted = json.loads(ran.stdout)
    return {name: c["blocks"] + c["characters"] for name, c in counted.items()}


def test_rendering_work_grows_linearly_with_the_text() -> None:
    cases = [
        (f"{name} x{size}", text(size * SIZE))
        for name, text in PATHOLOGICAL.items()
        for size in (1, 2)
    ]
    steps = work(cases)
    growth = {name: steps[f"{name} x2"] / steps[f"{name} x1"] for name in PATHOLOGICAL}
    # Linear: twice the text, twice the work (a quadratic renderer: four times).
    too_fast = {name: round(g, 2) for name, g in growth.items() if g > 2.5}
    assert not too_fast, f"work more than doubles with the text: {too_fast}"


def test_the_counter_sees_a_quadratic_search(tmp_path: Path) -> None:
    # The counter itself: a renderer that searches the rest of the text at
    # every character is caught.
    quadratic = tmp_path / "quadratic.js"
    quadratic.write_text(
        "export function renderMarkdown(text) {\n"
        "  const f = document.createDocumentFragment();\n"
        "  for (let i = 0; i < text.length; i += 1) text.indexOf('>', i);\n"
        "  return f;\n"
        "}\n"
    )
    ran = subprocess.run(
        [node(), str(COUNTER), str(quadratic)],
        input=json.dumps([["x1", "<" * 2000], ["x2", "<" * 4000]]),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    counted = {k: v["blocks"] + v["characters"] for k, v in json.loads(ran.stdout).items()}
    assert counted["x2"] / counted["x1"] > 3.5
