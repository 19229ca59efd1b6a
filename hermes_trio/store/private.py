"""The data directory and its files are this user's alone.

The store keeps every conversation in ``store.data_dir`` (the SQLite file
and its ``-wal`` and ``-shm`` files beside it), and the directory holds this
install's secret (:func:`install_secret`). The directory is made ``0700``
and the files ``0600``; ones that already exist with wider modes (made by
an older version, or under a looser umask) are tightened, and the caller
says so once. SQLite gives its ``-wal`` and ``-shm`` files the database
file's mode, so a private database file keeps them private too.

A directory owned by someone else, or one with the sticky bit (``/tmp``
as a data directory), is never changed: it is shared on purpose, and its
files are still made private.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from ..private_files import FILE_MODE, private_dir, private_file

__all__ = ["SECRET_FILENAME", "install_secret"]

SECRET_FILENAME = "install-secret"
_SECRET_BYTES = 32


def install_secret(directory: Path) -> tuple[bytes, list[str]]:
    """This install's secret (32 random bytes, made on first use and kept
    in ``directory``, ``0600``), and what was tightened. Several processes
    may start at once: the first to link its file in place wins and the
    others read that one. Raises ``OSError``."""
    changed = private_dir(directory)
    path = directory / SECRET_FILENAME
    if not path.exists():
        # Written whole under another name, then linked in place: no
        # process ever reads a half-written secret.
        staged = directory / f".{SECRET_FILENAME}.{secrets.token_hex(8)}"
        fd = os.open(staged, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
        try:
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_hex(_SECRET_BYTES) + "\n")
            with contextlib.suppress(FileExistsError):
                os.link(staged, path)
        finally:
            staged.unlink(missing_ok=True)
    changed += private_file(path)
    text = path.read_text().strip()
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) < 16:
        raise OSError(f"{path} is not a secret this version wrote (move it away to make one)")
    return secret, changed
