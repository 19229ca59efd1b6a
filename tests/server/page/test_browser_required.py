"""The README's test command passes on a machine without a browser: the
chat page's browser tests are skipped with the reason in the summary, and
only under CI (``CI`` set) does a missing browser fail them. Run as a user
runs them: pytest in a child process, pointed at a browser that is not there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PAGE_TESTS = "tests/server/page/test_chat_page.py"


def run_page_tests(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith("PYTEST_")}
    environment["HERMES_CHROMIUM"] = str(tmp_path / "no-such-chromium")
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", PAGE_TESTS],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_without_a_browser_the_page_tests_are_skipped_and_say_why(tmp_path: Path) -> None:
    ran = run_page_tests(tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    summary = ran.stdout.strip().splitlines()[-1]
    assert "6 skipped" in summary and "error" not in summary, ran.stdout
    assert f"SKIPPED [1] {PAGE_TESTS}" in ran.stdout
    assert f"no browser at {tmp_path / 'no-such-chromium'}" in ran.stdout


def test_under_ci_a_missing_browser_fails_the_page_tests(tmp_path: Path) -> None:
    ran = run_page_tests(tmp_path, CI="true")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "6 errors" in ran.stdout.strip().splitlines()[-1], ran.stdout
    assert "CI is set, so the browser tests are required" in ran.stdout
