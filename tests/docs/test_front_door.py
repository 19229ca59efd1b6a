"""The README is the front door: short, its links lead somewhere, and its
test command is the one CI runs. (The manual's own links are checked by
``mkdocs build --strict`` in ``.ci/run``; the README is not part of it.)"""

from __future__ import annotations

import re
from pathlib import Path

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub and MkDocs both make it."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(page: Path) -> set[str]:
    tokens = MarkdownIt().parse(page.read_text(encoding="utf-8"))
    return {
        _slug(tokens[n + 1].content)
        for n, token in enumerate(tokens)
        if token.type == "heading_open"
    }


def _links() -> list[str]:
    tokens = MarkdownIt().parse(README.read_text(encoding="utf-8"))
    return [
        str(child.attrs["href"])
        for token in tokens
        for child in token.children or []
        if child.type == "link_open"
    ]


def test_the_readme_is_a_front_door() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_every_link_of_the_readme_leads_to_a_file_and_its_heading() -> None:
    local = [link for link in _links() if not re.match(r"[a-z]+:", link)]
    assert len(local) >= 10
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else README
        assert target.is_file(), f"README links to {link}: no such file"
        if anchor:
            assert anchor in _anchors(target), f"README links to {link}: no such heading"


def test_the_readme_shows_the_test_command_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    (command,) = [line for line in ci.splitlines() if "pytest" in line and "#" not in line]
    assert command.strip() in README.read_text(encoding="utf-8")
