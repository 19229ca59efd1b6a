"""The data directory lock: one holder, released when the holder dies."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from functools import partial

import pytest
import trio

from hermes_trio.server.data_lock import LOCK_FILENAME, DataDirInUse, lock_data_dir

# The holder keeps the lock until the test kills it.
HOLD = """
import signal, sys
from pathlib import Path
from hermes_trio.server.data_lock import lock_data_dir
lock_data_dir(Path(sys.argv[1]))
print("locked", flush=True)
signal.pause()
"""


def test_one_holder_at_a_time(tmp_path) -> None:
    lock = lock_data_dir(tmp_path)
    try:
        with pytest.raises(DataDirInUse) as refused:
            lock_data_dir(tmp_path)
        assert refused.value.pid == os.getpid()
        assert str(refused.value) == f"in use by another hermes-trio process (pid {os.getpid()})"
        # Not inherited by programs the server starts (tools, shells).
        assert lock._fd is not None
        assert fcntl.fcntl(lock._fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
    finally:
        lock.release()
    lock.release()
    lock_data_dir(tmp_path).release()
    assert (tmp_path / LOCK_FILENAME).read_text() == f"{os.getpid()}\n"


async def test_a_killed_holder_leaves_no_lock(tmp_path) -> None:
    async with trio.open_nursery() as nursery:
        holder: trio.Process = await nursery.start(
            partial(
                trio.run_process,
                [sys.executable, "-c", HOLD, str(tmp_path)],
                stdout=subprocess.PIPE,
                check=False,
            )
        )
        assert holder.stdout is not None
        with trio.fail_after(10):
            assert (await holder.stdout.receive_some()).startswith(b"locked")
        with pytest.raises(DataDirInUse) as refused:
            lock_data_dir(tmp_path)
        assert refused.value.pid == holder.pid
        holder.send_signal(signal.SIGKILL)
        with trio.fail_after(10):
            await holder.wait()
    lock_data_dir(tmp_path).release()
