"""The examples in ``hermes_trio/testing/README.md`` and on the manual's
page "Testing with the kit" (``docs/testing-kit.md``) are tests: each Python block is run, and each
``test_*`` function in it too, on MockClock when it takes ``autojump_clock``,
else on the real clock (the socket server)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from trio.testing import MockClock

import hermes_trio.testing

KIT_README = Path(hermes_trio.testing.__file__).with_name("README.md")
README = Path(__file__).resolve().parents[2] / "docs" / "testing-kit.md"
SECTION = "# Testing with the kit"


def _blocks() -> list[tuple[str, str]]:
    kit = KIT_README.read_text(encoding="utf-8")
    section = README.read_text(encoding="utf-8").split(SECTION, 1)[1].split("\n## ", 1)[0]
    return [
        (f"{where}:block{n}", block)
        for where, text in ((str(KIT_README), kit), (str(README), section))
        for n, block in enumerate(re.findall(r"```python\n(.*?)```", text, re.S))
    ]


def _examples() -> list[tuple[str, Callable[..., Any]]]:
    found: list[tuple[str, Callable[..., Any]]] = []
    for where, block in _blocks():
        namespace: dict[str, Any] = {"__name__": where}
        exec(compile(block, where, "exec"), namespace)
        found += [(name, fn) for name, fn in namespace.items() if name.startswith("test_")]
    return found


EXAMPLES = _examples()
ON_THE_CLOCK = [(n, f) for n, f in EXAMPLES if "autojump_clock" in inspect.signature(f).parameters]
REAL_TIME = [(n, f) for n, f in EXAMPLES if (n, f) not in ON_THE_CLOCK]


def test_the_readme_has_examples_of_each_part_of_the_kit() -> None:
    names = " ".join(name for name, _ in EXAMPLES)
    for part in (
        "tokens_arrive",
        "edited_into_one_message",
        "polling_backs_off",
        "stalled",
        "my_embedding",
        "mention_is_one_question",
    ):
        assert part in names
    assert len(ON_THE_CLOCK) >= 5 and len(REAL_TIME) >= 3


@pytest.mark.parametrize("example", [f for _, f in ON_THE_CLOCK], ids=[n for n, _ in ON_THE_CLOCK])
async def test_example_on_the_virtual_clock(
    autojump_clock: MockClock, example: Callable[..., Any]
) -> None:
    await example(autojump_clock)


@pytest.mark.parametrize("example", [f for _, f in REAL_TIME], ids=[n for n, _ in REAL_TIME])
async def test_example_on_the_real_clock(example: Callable[..., Any]) -> None:
    await example()
