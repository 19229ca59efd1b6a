"""Drive ``hermes-trio chat`` in a pseudo-terminal from a trio test.

The scripted model server runs in the test's trio loop; pexpect is blocking,
so every wait on the child goes through ``trio.to_thread.run_sync`` and the
server keeps serving meanwhile. Every wait is bounded by ``TIMEOUT``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import pexpect
import trio
from support import clean_env

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 10
PROMPT = "❯ "
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")


def chat_env(base_url: str | None, home: Path, extra: Mapping[str, str] = ()) -> dict[str, str]:
    """The environment of a user with nothing configured but the model server."""
    env = clean_env(
        HOME=str(home),
        HERMES_DATA_DIR=str(home / "data"),
        PYTHONPATH=str(REPO),
        TERM="xterm-256color",
        # No terminal answers prompt_toolkit's cursor-position request here.
        PROMPT_TOOLKIT_NO_CPR="1",
        HERMES_MODEL="scripted-model",
    )
    if base_url is not None:
        env["HERMES_MODEL_BASE_URL"] = base_url
    env.update(extra)
    return env


def chat_argv(*args: str) -> list[str]:
    return ["-m", "hermes_trio.cli", "chat", *args]


class Pty:
    def __init__(self, child: pexpect.spawn) -> None:
        self.child = child

    async def expect(self, pattern: str | type[pexpect.EOF]) -> str:
        """Wait (at most ``TIMEOUT``) for ``pattern`` (a regex); return what came before it."""
        await trio.to_thread.run_sync(lambda: self.child.expect(pattern, timeout=TIMEOUT))
        return str(self.child.before)

    async def expect_prompt(self) -> str:
        return await self.expect(re.escape(PROMPT))

    def sendline(self, text: str) -> None:
        self.child.sendline(text)

    def interrupt(self) -> None:
        self.child.sendintr()

    async def wait_exit(self) -> int:
        await self.expect(pexpect.EOF)
        await trio.to_thread.run_sync(self.child.wait)
        return int(self.child.exitstatus if self.child.exitstatus is not None else -1)

    def seen(self) -> str:
        """Everything printed so far, without control codes."""
        return ANSI.sub("", str(self.child.before) + str(self.child.after))


@asynccontextmanager
async def spawn_chat(
    base_url: str | None, home: Path, *args: str, env: Mapping[str, str] = ()
) -> AsyncIterator[Pty]:
    child = await trio.to_thread.run_sync(
        lambda: pexpect.spawn(
            sys.executable,
            chat_argv(*args),
            env=chat_env(base_url, home, env),
            cwd=str(home),
            encoding="utf-8",
            codec_errors="replace",
            timeout=TIMEOUT,
            dimensions=(40, 100),
        )
    )
    try:
        yield Pty(child)
    finally:
        # terminate() sleeps between signals; keep that off the trio thread.
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(lambda: child.terminate(force=True))
        child.close()
