"""The child hooks (child_hooks/sitecustomize.py) reach every process a test
starts with ``clean_env``'s environment, a test's own ``PYTHONPATH`` too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support import clean_env

PROBE = "import hermes_trio.store.signals as s; print(s.IDLE_POLL)"


def idle_poll_in_child(env: dict[str, str]) -> str:
    return subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_child_is_patched_with_or_without_a_path_of_its_own(tmp_path: Path) -> None:
    assert idle_poll_in_child(clean_env()) == "0.1"
    assert idle_poll_in_child(clean_env(PYTHONPATH=str(tmp_path))) == "0.1"
