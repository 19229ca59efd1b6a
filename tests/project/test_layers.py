"""The layering rules that a fresh interpreter can see.

Each check runs in a subprocess: this test process has long since imported
trio and httpx, so ``sys.modules`` here proves nothing.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import hermes_trio


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize(
    "modules",
    [
        "hermes_trio.wire, hermes_trio.events",
        "hermes_trio.wire.sse, hermes_trio.wire.chat_chunks, hermes_trio.wire.responses_stream",
        "hermes_trio.wire.chat_out, hermes_trio.wire.responses_out, hermes_trio.wire.think",
        "hermes_trio.approvals.book",
        "hermes_trio.command_check.policy",
    ],
)
def test_the_sans_io_layer_imports_neither_trio_nor_httpx(modules: str) -> None:
    result = _run(
        f"import sys, {modules}\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('trio', 'httpx'))\n"
        "assert not loaded, loaded\n"
    )
    assert result.returncode == 0, result.stderr


def test_importing_the_package_loads_no_layer() -> None:
    result = _run(
        "import sys, hermes_trio\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('hermes_trio.'))\n"
        "assert not loaded, loaded\n"
    )
    assert result.returncode == 0, result.stderr


def test_public_names_resolve_lazily_and_are_listed() -> None:
    result = _run(
        "import hermes_trio\n"
        "from hermes_trio import open_agent, MessageChunk, ModelError\n"
        "assert open_agent.__module__ == 'hermes_trio.agent'\n"
        "assert set(hermes_trio.__all__) <= set(dir(hermes_trio))\n"
        "print(hermes_trio.__version__)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == hermes_trio.__version__


def test_every_public_name_has_a_home() -> None:
    for name in hermes_trio.__all__:
        assert getattr(hermes_trio, name) is not None
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = hermes_trio.no_such_name  # type: ignore[attr-defined]
