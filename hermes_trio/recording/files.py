"""Where recordings go: one private file per turn, the oldest pruned; and
reading one back."""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from pathlib import Path

from ..private_files import FILE_MODE, private_dir
from .document import RecordingDocument
from .schema import MAX_BYTES
from .tape import parse

__all__ = ["PREFIX", "Recorder", "read_recording"]

PREFIX = "turn-"

_names = itertools.count(1)


class Recorder:
    """Writes one file per turn into ``directory`` (made ``0700``; files
    ``0600``). A file past ``max_file_bytes`` stops recording details and
    says it was cut; past ``max_total_bytes`` in all, the oldest files go."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        max_file_bytes: int = 8 * 1024 * 1024,
        max_total_bytes: int = 256 * 1024 * 1024,
    ) -> None:
        self.directory = Path(directory).expanduser()
        self.max_file_bytes = max_file_bytes
        self.max_total_bytes = max_total_bytes
        self.written: list[Path] = []

    def save(self, text: str) -> Path:
        """Write one recording (an exclusive new file, ``0600``), then prune.

        Synchronous on purpose: it runs as the turn ends, also when the
        turn is cancelled, and must not be cut by that cancel; one small
        file costs less than a thread hop.
        """
        # Ours, made wider by someone: tightened; one shared on purpose is
        # left as it is (its files are still 0600).
        private_dir(self.directory)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        path = self.directory / f"{PREFIX}{stamp}-{os.getpid()}-{next(_names):04d}.json"
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        self.written.append(path)
        self._prune(keep=path)
        return path

    def _prune(self, *, keep: Path) -> None:
        files = []
        for path in self.directory.glob(f"{PREFIX}*.json"):
            with contextlib.suppress(OSError):
                info = path.stat()
                files.append((info.st_mtime, path.name, path, info.st_size))
        files.sort()
        total = sum(size for *_, size in files)
        for _, _, path, size in files:
            if total <= self.max_total_bytes:
                break
            if path == keep:
                continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            total -= size


def read_recording(path: str | os.PathLike[str]) -> RecordingDocument:
    """The recording in the file at ``path``, checked whole before anything
    uses it: :class:`~.tape.RecordingError` names what is wrong (``OSError``
    when it cannot be read). Reads at most ``MAX_BYTES`` (and one more, to
    tell a larger file)."""
    with open(path, "rb") as file:
        data = file.read(MAX_BYTES + 1)
    return parse(data, where=str(path))
