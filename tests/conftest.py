"""Suite-wide settings that pyproject.toml cannot express."""

from __future__ import annotations

import sys

import pytest

# Cache the bytecode of hermes_trio and of the (assertion-rewritten) test
# modules, as Python and pytest do by default: with PYTHONDONTWRITEBYTECODE
# set, each pytest process (every xdist worker) compiled them all from
# source again, about 4 s of CPU a process. __pycache__ is git-ignored.
sys.dont_write_bytecode = False

# The openai SDK, used here as a real client of the server, stops reading a
# stream at ``[DONE]`` without closing its own async generators (and those of
# httpx2/httpcore2, its HTTP stack, under them); trio reports each when the
# garbage collector finalises it. Only those names are ignored: a generator
# of ours, or of the httpx that hermes_trio uses, is still an error. A mark,
# not an ini filter, so that it also holds against ``-W error::ResourceWarning``
# on the command line.
_SDK_GENERATORS = pytest.mark.filterwarnings(
    r"ignore:Async generator '(openai|httpx2|httpcore2)\.:ResourceWarning"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(_SDK_GENERATORS)


@pytest.fixture(autouse=True)
def _no_dotenv_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """load_config() in this process reads no .env of this machine (a
    developer's own in the checkout or in ~/.hermes-trio): the .env tests
    say where theirs is."""
    monkeypatch.setenv("HERMES_DOTENV", "0")


@pytest.fixture
def short_shutdown(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process server's shutdown grace at 0.2 s instead of 2 s, for a
    test that stops a server with a turn running but is not about how long
    the grace is (tests/server/test_shutdown.py is)."""
    from hermes_trio.server import run

    monkeypatch.setattr(run, "SHUTDOWN_GRACE", 0.2)
