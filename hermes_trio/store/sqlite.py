"""The embedded store: one SQLite file under ``store.data_dir``.

WAL mode, so several processes on one machine (``serve --workers``, two
``serve`` instances, the gateway) share the file safely. Each process has
one connection for writes and one for reads, each used by one worker thread
at a time (every access goes through ``trio.to_thread.run_sync`` behind that
connection's ``trio.Lock``: a read never queues behind a write that waits
for the disk or for another process's lock), and every change is a single
transaction, so a crash or a SIGKILL at any moment leaves the file readable
with whole rows only.

The file's schema version is SQLite's ``user_version``; opening an older
file migrates it in one transaction, a newer one is refused.

A refused operation (disk full, read-only, locked, damaged) raises
:class:`~.base.StoreError` with a code saying which; the first
failure of an outage is logged once with SQLite's own words.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import trio

from ..private_files import private_dir, private_file
from . import statements as sql
from .base import StoreError, log, wall_clock
from .runners import Runner, this_runner
from .schema import SCHEMA_VERSION, SQLITE_MIGRATIONS, migrate_from
from .shared import SQLStore

__all__ = ["DB_FILENAME", "NewerSchema", "SQLiteStore", "store_failure"]

T = TypeVar("T")

DB_FILENAME = "responses.sqlite3"
# SQLite primary result codes -> (code, what it means for a client).
_FAILURES: dict[int, tuple[str, str]] = {
    13: ("store_full", "the response store is full: its disk has no room left"),
    8: ("store_read_only", "the response store is read-only"),
    5: ("store_busy", "the response store is locked by another program"),
    6: ("store_busy", "the response store is locked by another program"),
    11: ("store_corrupt", "the response store is damaged"),
    26: ("store_corrupt", "the response store is damaged"),
    10: ("store_io_error", "the response store could not use its disk (full or failing?)"),
    14: ("store_io_error", "the response store could not open its file"),
    3: ("store_io_error", "the response store may not use its file"),
}


def store_failure(exc: sqlite3.Error) -> tuple[str, str]:
    """``(code, message)`` for an SQLite error: what a client is told."""
    primary = getattr(exc, "sqlite_errorcode", None)
    if isinstance(primary, int) and (primary & 0xFF) in _FAILURES:
        return _FAILURES[primary & 0xFF]
    return "store_error", "the response store failed"


class NewerSchema(Exception):
    """The database was written by a newer version, with a schema this one
    does not know."""


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring the file to :data:`SCHEMA_VERSION` in one transaction (several
    processes may open it at once: the version is read again inside it)."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version > SCHEMA_VERSION:
        raise NewerSchema(
            f"schema version {version}; this version of hermes-trio knows up to {SCHEMA_VERSION}"
        )
    if version == SCHEMA_VERSION:
        return

    def migrate(conn: sqlite3.Connection) -> None:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        migrate_from(version, SQLITE_MIGRATIONS, conn.execute, conn)
        conn.execute(f"PRAGMA user_version={max(version, SCHEMA_VERSION)}")

    _transaction(conn, migrate)


def _transaction(conn: sqlite3.Connection, body: Callable[[sqlite3.Connection], T]) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = body(conn)
    except BaseException:
        # SQLite ends the transaction itself after some errors (a full
        # disk, an I/O error); a second ROLLBACK would hide the first error.
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


def _connect(path: Path) -> sqlite3.Connection:
    # A write waits this long for another process's transaction.
    return sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10.0)


class SQLiteStore(SQLStore):
    """:class:`~.base.Store` over one SQLite file (see the module doc)."""

    def __init__(
        self,
        path: str | Path,
        *,
        max_rows: int = 10_000,
        max_age_days: float = 30.0,
        clock: Callable[[], float] = wall_clock,
        runner: Runner | None = None,
    ) -> None:
        super().__init__(
            runner=runner or this_runner(),
            max_rows=max_rows,
            max_age_days=max_age_days,
            clock=clock,
        )
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        # A connection may move between worker threads but must never be used
        # by two at once; the lock is held across each thread call.
        self._lock = trio.Lock()
        # Reads have their own connection (WAL lets it read while a write
        # is under way); None where WAL is not available.
        self._reader: sqlite3.Connection | None = None
        self._read_lock = trio.Lock()
        # The code of the failure being logged, until a write succeeds again:
        # an outage is one log line, not one per request.
        self._failing: str | None = None
        # While opening, a failure is the caller's one startup line instead.
        self._quiet = False

    # -- plumbing -----------------------------------------------------------

    async def _run(self, fn: Callable[[sqlite3.Connection], Any], *, write: bool = True) -> Any:
        async with self._lock:
            conn = self._conn
            if conn is None:
                raise RuntimeError("the response store is closed")
            try:
                # Never abandoned on cancel: the transaction runs to its end
                # and the lock stays held until it has.
                result = await trio.to_thread.run_sync(fn, conn)
            except sqlite3.Error as exc:
                raise self._refused(exc) from exc
        if write and self._failing is not None and not self._quiet:
            self._failing = None
            log.warning("the response store works again (%s)", self.path)
        return result

    async def _write(self, fn: Callable[[sql.Db], T]) -> T:
        result: T = await self._run(lambda conn: _transaction(conn, fn))
        return result

    async def _read(self, fn: Callable[[sql.Db], T]) -> T:
        """Run ``fn`` on the read connection: it does not wait for a write
        in progress."""
        if self._reader is None:
            result: T = await self._run(fn, write=False)
            return result
        async with self._read_lock:
            reader = self._reader
            if reader is None:
                raise RuntimeError("the response store is closed")
            try:
                return await trio.to_thread.run_sync(fn, reader)
            except sqlite3.Error as exc:
                raise self._refused(exc) from exc

    def _refused(self, exc: sqlite3.Error) -> StoreError:
        code, message = store_failure(exc)
        if not self._quiet and self._failing != code:
            self._failing = code
            log.error(
                "%s (%s; %s: %s); requests that need it get 503 until it works",
                message,
                self.path,
                getattr(exc, "sqlite_errorname", type(exc).__name__),
                exc,
            )
        return StoreError(code, f"{message}; try again later")

    async def open(self, *, recover: bool = False) -> None:
        """Open the file (creating it), apply retention and, with
        ``recover``, end what processes that are gone left running."""

        def connect() -> tuple[sqlite3.Connection, sqlite3.Connection | None]:
            self._make_private()
            conn = _connect(self.path)
            reader = None
            try:
                (mode,) = conn.execute("PRAGMA journal_mode=WAL").fetchone()
                # In WAL mode NORMAL never corrupts and loses nothing on a
                # process crash; only power loss may drop the last commits.
                conn.execute("PRAGMA synchronous=NORMAL")
                _migrate(conn)
                if str(mode).lower() == "wal":
                    reader = _connect(self.path)
                    reader.execute("PRAGMA query_only=1")
            except BaseException:
                conn.close()
                if reader is not None:
                    reader.close()
                raise
            return conn, reader

        self._quiet = True
        try:
            try:
                self._conn, self._reader = await trio.to_thread.run_sync(connect)
            except sqlite3.Error as exc:
                raise self._refused(exc) from exc
            except OSError as exc:
                raise StoreError(
                    "store_io_error", f"the response store could not use its files ({exc})"
                ) from exc
            except NewerSchema as exc:
                raise StoreError(
                    "store_newer", f"the response store was written by a newer version ({exc})"
                ) from exc
            await self.heartbeat()
            await self.prune()
            if recover:
                await self.recover_interrupted()
        finally:
            self._quiet = False

    def _make_private(self) -> None:
        """The directory ``0700``, the file and its ``-wal`` and ``-shm``
        ``0600`` (SQLite gives those two the file's mode when it makes
        them); wider modes left by an older version are tightened, in one
        line."""
        changed = private_dir(self.path.parent)
        changed += private_file(self.path)
        for suffix in ("-wal", "-shm", "-journal"):
            changed += private_file(self.path.with_name(self.path.name + suffix), create=False)
        if changed:
            log.warning(
                "the store's files were readable by other users of this machine; made "
                "private (they hold every conversation): %s",
                ", ".join(changed),
            )

    async def aclose(self) -> None:
        if self._conn is not None:
            # Leaving is no news: no "works again" for it.
            self._quiet = True
            with contextlib.suppress(StoreError):
                await self.retire()
        async with self._read_lock:
            reader, self._reader = self._reader, None
            if reader is not None:
                await trio.to_thread.run_sync(reader.close)
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                await trio.to_thread.run_sync(conn.close)
