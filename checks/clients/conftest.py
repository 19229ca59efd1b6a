"""pytest configuration for the real-client checks (not part of the project's
test suite: run them with ``.venv/bin/python -m pytest checks/clients``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# clientcheck lives beside this file; support.py is importable through the
# project's pythonpath (tests/).
sys.path.insert(0, str(Path(__file__).resolve().parent))

from clientcheck import chromium, environment


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "clients(*names): the client environments a check needs ('py', 'pyold', 'node', "
        "'chromium'); checked before any server starts",
    )


@pytest.fixture(autouse=True)
def _client_environments(request: pytest.FixtureRequest) -> None:
    """Fail (never skip) before the check starts anything when an environment
    it needs is missing, with the command that creates it."""
    names: list[str] = []
    for marker in request.node.iter_markers("clients"):
        names.extend(marker.args)
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and "sdk" in callspec.params:
        names.append(callspec.params["sdk"])
    for name in dict.fromkeys(names):
        if name == "chromium":
            chromium()
        else:
            environment(name)
