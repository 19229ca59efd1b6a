"""A real headless browser for tests: Debian's chromium driven by
Playwright's sync API, never a browser Playwright downloads.

Playwright's sync objects belong to the thread that made them, and trio
tests must not block their event loop: every browser call runs on one
dedicated thread (:meth:`Browser.call`), awaited from trio.

Without a browser the tests that need one are skipped, with the reason in
pytest's summary, so the README's test command passes on any machine; under
CI (``CI`` set, as CI services and ``.ci/run`` do) the browser is required
and its absence fails them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import pytest
import trio

if TYPE_CHECKING:
    from playwright.sync_api import Browser as PlaywrightBrowser

__all__ = ["Browser", "artifacts_dir", "chromium_path", "missing_outside_tool", "open_browser"]

T = TypeVar("T")

TESTS = Path(__file__).resolve().parent


def chromium_path() -> str:
    """The browser binary (``HERMES_CHROMIUM``, else Debian's)."""
    return os.environ.get("HERMES_CHROMIUM", "/usr/bin/chromium")


def outside_tools_required() -> bool:
    """CI must run the tests that need an outside program (a browser,
    node): ``CI`` set to anything but a no."""
    return os.environ.get("CI", "").strip().lower() not in {"", "0", "false", "no"}


def missing_outside_tool(why: str, tests: str) -> NoReturn:
    """Fail (under CI) or skip a test whose outside program is missing,
    saying why; ``tests`` names the tests that need it."""
    if outside_tools_required():
        pytest.fail(f"{why} (CI is set, so {tests} are required)", pytrace=False)
    pytest.skip(f"{why}; {tests} are skipped (under CI they are required)")


def _no_browser(why: str) -> NoReturn:
    missing_outside_tool(why, "the browser tests")


def artifacts_dir() -> Path:
    """Where tests leave what a person may want to look at (screenshots):
    ``HERMES_TEST_ARTIFACTS``, else ``tests/.artifacts`` (git-ignored)."""
    path = Path(os.environ.get("HERMES_TEST_ARTIFACTS") or TESTS / ".artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Browser:
    """One launched chromium and the thread that drives it."""

    def __init__(self, executor: ThreadPoolExecutor, browser: PlaywrightBrowser) -> None:
        self._executor = executor
        self.browser = browser

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the browser's thread."""
        future = self._executor.submit(fn, *args, **kwargs)
        return await trio.to_thread.run_sync(future.result)


@contextmanager
def open_browser() -> Iterator[Browser]:
    """Launch chromium; closed, with Playwright's driver, on leaving. No
    browser: the test is skipped, or fails under CI."""
    path = chromium_path()
    if not os.access(path, os.X_OK):
        _no_browser(
            f"no browser at {path}: install Debian's chromium (apt-get install -y chromium; "
            ".ci/run does) or point HERMES_CHROMIUM at one"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _no_browser(f"Playwright cannot be imported ({exc}): pip install -e '.[test]'")

    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="browser")
    try:
        manager = sync_playwright()
        playwright = executor.submit(manager.start).result()
        try:
            launched = executor.submit(playwright.chromium.launch, executable_path=path).result()
            try:
                yield Browser(executor, launched)
            finally:
                executor.submit(launched.close).result()
        finally:
            executor.submit(playwright.stop).result()
    finally:
        executor.shutdown(wait=True)
