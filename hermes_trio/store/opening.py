"""Opening the configured store: the SQLite file in ``store.data_dir``, or
the PostgreSQL database of ``store.url``."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from ..config import Config, StoreConfig
from .base import StoreError, StoreOpenError, wall_clock
from .shared import SQLStore
from .sqlite import DB_FILENAME, SQLiteStore

if TYPE_CHECKING:
    from .postgres import PostgresStore

__all__ = ["open_store", "store_path"]


def store_path(config: StoreConfig) -> Path:
    return Path(config.data_dir).expanduser() / DB_FILENAME


_FIX = "(set store.data_dir or HERMES_DATA_DIR to a writable directory)"

_OPEN_PROBLEMS = {
    "store_corrupt": (
        f"{DB_FILENAME} is not a SQLite database or is damaged; move it away to start "
        "with an empty store"
    ),
    "store_read_only": f"{DB_FILENAME} is read-only",
    "store_full": "the disk is full",
    "store_busy": f"{DB_FILENAME} is locked by another program",
    "store_newer": (
        f"{DB_FILENAME} was written by a newer version of hermes-trio; run that version, "
        "or move the file away to start with an empty store"
    ),
    "store_io_error": (
        f"cannot open or write {DB_FILENAME} and its -wal and -shm files beside it "
        "(is the directory writable?)"
    ),
}


def _make_data_dir(directory: Path) -> None:
    """Create the data directory, or say in one line why not."""
    where = f"store.data_dir {directory}"
    try:
        # Private from the start: it will hold every conversation.
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise StoreOpenError(f"{where} is not a directory {_FIX}") from None
    except OSError as exc:
        raise StoreOpenError(f"{where} cannot be created ({exc.strerror or exc}) {_FIX}") from None
    if not directory.is_dir():
        raise StoreOpenError(f"{where} is not a directory {_FIX}")
    # SQLite says only "unable to open database file" when it cannot create
    # its journal files; a probe says why.
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        raise StoreOpenError(f"{where} cannot be written ({exc.strerror or exc}) {_FIX}") from None


async def _open_sqlite(
    settings: StoreConfig, *, recover: bool, clock: Callable[[], float]
) -> SQLiteStore:
    directory = store_path(settings).parent
    await trio.to_thread.run_sync(partial(_make_data_dir, directory))
    store = SQLiteStore(
        directory / DB_FILENAME,
        max_rows=settings.max_rows,
        max_age_days=settings.max_age_days,
        clock=clock,
    )
    try:
        await store.open(recover=recover)
    except StoreError as exc:
        await store.aclose()
        cause = exc.__cause__
        problem = _OPEN_PROBLEMS.get(exc.code) or f"cannot use {DB_FILENAME}"
        raise StoreOpenError(f"store.data_dir {directory}: {problem} ({cause})") from None
    return store


@asynccontextmanager
async def open_store(
    config: Config, *, recover: bool = False, clock: Callable[[], float] = wall_clock
) -> AsyncIterator[SQLStore]:
    """The configured store for the life of this block. ``recover=True``
    ends what processes that are gone left running, as ``incomplete``.
    Several processes may have the same store open.

    Raises :class:`StoreOpenError` when it cannot be opened. A PostgreSQL
    store's probe (:meth:`PostgresStore.keep_reachable`) runs for the life
    of the block.
    """
    settings = config.store
    store: SQLStore
    pg: PostgresStore | None = None
    if settings.url:
        # Imported here: PostgreSQL's driver loads only for a store.url.
        from .postgres import PostgresStore

        pg = PostgresStore(
            settings.url,
            max_rows=settings.max_rows,
            max_age_days=settings.max_age_days,
            clock=clock,
        )
        await pg.open(recover=recover)
        store = pg
    else:
        store = await _open_sqlite(settings, recover=recover, clock=clock)
    try:
        async with trio.open_nursery() as probe:
            if pg is not None:
                await probe.start(pg.keep_reachable)
            try:
                yield store
            finally:
                probe.cancel_scope.cancel()
    finally:
        # Closing waits for a running statement; shielded so a cancelled
        # server still releases the store cleanly.
        with trio.CancelScope(shield=True):
            await store.aclose()
