"""Directories and files that are this user's alone (``0700``/``0600``).

Used by everything that keeps what a person said on disk: the store's data
directory (``store/private.py``) and turn recordings (``recording/files.py``).
Ones that already exist with wider modes (made by an older version, or
under a looser umask) are tightened, and the caller says so once. A
directory owned by someone else, or one with the sticky bit (``/tmp``), is
never changed: it is shared on purpose, and the files in it are still made
private.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

__all__ = ["DIR_MODE", "FILE_MODE", "private_dir", "private_file"]

DIR_MODE = 0o700
FILE_MODE = 0o600


def _tighten(path: Path, *, directory: bool) -> str | None:
    """Take group and other access away from ``path`` if it has any;
    ``"path (0755 -> 0700)"`` when it did, None otherwise (or when ``path``
    is not there, not ours, or shared on purpose)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    old = stat.S_IMODE(info.st_mode)
    if not old & 0o077 or info.st_uid != os.geteuid():
        return None
    if directory and old & stat.S_ISVTX:
        return None
    new = old & ~0o077
    os.chmod(path, new)
    return f"{path} ({old:04o} -> {new:04o})"


def private_dir(directory: Path) -> list[str]:
    """Create ``directory`` (``0700``; its parents as the umask says) or
    tighten it. Returns what was tightened. Raises ``OSError``."""
    try:
        directory.mkdir(mode=DIR_MODE, parents=True)
    except FileExistsError:
        pass
    else:
        return []
    changed = _tighten(directory, directory=True)
    return [changed] if changed else []


def private_file(path: Path, *, create: bool = True) -> list[str]:
    """Create ``path`` empty (``0600``) if it is missing and ``create``, or
    tighten it. Returns what was tightened. Raises ``OSError``."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE))
            return []
    changed = _tighten(path, directory=False)
    return [changed] if changed else []
