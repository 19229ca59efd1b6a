"""Start the scripted model server in its own process for a benchmark."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio


@asynccontextmanager
async def model_server_process(tokens: int, delay: float = 0.0) -> AsyncIterator[str]:
    """Yields the base URL (…/v1) of a scripted model server subprocess."""
    process = await trio.lowlevel.open_process(
        [
            sys.executable,
            "-m",
            "hermes_trio.testing",
            "--port",
            "0",
            "--tokens",
            str(tokens),
            "--delay",
            str(delay),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        buffer = b""
        with trio.fail_after(15):
            while b"\n" not in buffer:
                buffer += await process.stdout.receive_some(4096)
        line = buffer.split(b"\n")[0].decode()
        yield line.split("listening on ")[1].strip()
    finally:
        process.terminate()
        with trio.move_on_after(5):
            await process.wait()
        process.kill()
