"""One server process per data directory.

The response store treats every response still ``in_progress`` at startup as
left behind by a crash, so a second server on the same directory would end
the first one's running responses under it. :func:`lock_data_dir` takes an
exclusive ``flock`` on a lock file in the directory for as long as the
process holds it; the kernel releases it when the process dies, even by
SIGKILL, so a crash never leaves a stale lock. Several workers sharing one
store would need a different rule, and this module is where it goes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

__all__ = ["LOCK_FILENAME", "DataDirInUse", "DataDirLock", "lock_data_dir"]

LOCK_FILENAME = "responses.lock"


class DataDirInUse(Exception):
    """Another process holds the directory's lock."""

    def __init__(self, directory: Path, pid: int | None) -> None:
        self.directory = directory
        self.pid = pid
        holder = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(f"in use by another hermes-trio process ({holder})")


class DataDirLock:
    """A held lock; :meth:`release` (or the process's end) lets it go."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            # Closing the descriptor drops the flock.
            os.close(fd)


def lock_data_dir(directory: Path) -> DataDirLock:
    """Lock ``directory`` (which must exist) for this process.

    Raises :class:`DataDirInUse` when another process holds it, ``OSError``
    when the lock file cannot be opened. Blocking only on the file system:
    the lock is tried, never waited for.
    """
    path = directory / LOCK_FILENAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        pid = _holder(fd)
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise DataDirInUse(directory, pid) from None
        raise
    try:
        # Who holds it, for the message a second process prints.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        # The lock is what matters; the pid is only a courtesy.
        pass
    return DataDirLock(fd, path)


def _holder(fd: int) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(os.pread(fd, 32, 0).decode().strip())
    return None
