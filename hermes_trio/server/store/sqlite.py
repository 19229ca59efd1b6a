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
:class:`~.base.StoreError`, a 503 with a code saying which; the first
failure of an outage is logged once with SQLite's own words.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import trio

from . import statements as sql
from .base import StoreError, wall_clock
from .private import private_dir, private_file
from .runners import Runner, this_runner
from .shared import SQLStore

__all__ = ["DB_FILENAME", "SCHEMA_VERSION", "NewerSchema", "SQLiteStore", "store_failure"]

log = logging.getLogger("hermes_trio.server.store")

T = TypeVar("T")

DB_FILENAME = "responses.sqlite3"
SCHEMA_VERSION = 7
"""2: events, reservations. 3: the item index. 4: runners, conversations,
signals. 5: chat settings. 6: a response's own messages and a reference to the one it
continues (``parent_id``, ``inherited``), instead of the whole conversation
in every row."""

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


_SCHEMA_V3 = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    background INTEGER NOT NULL DEFAULT 0,
    response TEXT NOT NULL,
    messages TEXT NOT NULL,
    input_items TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_by_age ON responses (created_at);
CREATE INDEX IF NOT EXISTS responses_by_status ON responses (status);
CREATE TABLE IF NOT EXISTS response_events (
    response_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (response_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS response_reservations (
    response_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS response_items (
    owner TEXT NOT NULL,
    item_id TEXT NOT NULL,
    response_id TEXT NOT NULL,
    created_at REAL NOT NULL,
    source INTEGER NOT NULL,
    PRIMARY KEY (owner, item_id, response_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS response_items_by_response ON response_items (response_id);
"""
_SCHEMA_V4 = """
ALTER TABLE responses ADD COLUMN runner TEXT;
CREATE TABLE conversations (
    key TEXT PRIMARY KEY,
    messages TEXT NOT NULL,
    updated_at REAL NOT NULL,
    runner TEXT,
    turn TEXT
) WITHOUT ROWID;
CREATE INDEX conversations_by_age ON conversations (updated_at);
CREATE TABLE runners (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    seen_at REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE signals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    runner TEXT NOT NULL,
    kind TEXT NOT NULL,
    target TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX signals_by_runner ON signals (runner);
"""
_SCHEMA_V6 = """
ALTER TABLE responses ADD COLUMN parent_id TEXT;
ALTER TABLE responses ADD COLUMN inherited INTEGER NOT NULL DEFAULT 0;
CREATE INDEX responses_by_parent ON responses (parent_id);
"""

# Tool calls a response holds for a person's answer (mcp_approval_request).
_SCHEMA_V7 = """
CREATE TABLE response_approvals (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    response_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    expires_at REAL NOT NULL,
    answered_by TEXT
) WITHOUT ROWID;
CREATE INDEX response_approvals_by_response ON response_approvals (response_id);
"""

# The gateway's small settings that outlive a restart (``/verbose`` per chat,
# the long-tool hint a user has seen), by key.
_SCHEMA_V5_CHAT_SETTINGS = """
CREATE TABLE IF NOT EXISTS chat_settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at REAL NOT NULL
) WITHOUT ROWID;
"""


def _statements(script: str) -> list[str]:
    return [part.strip() for part in script.split(";") if part.strip()]


# Built from the rows an older file already has (migration to version 3).
_BACKFILL_ITEMS = [
    "INSERT OR IGNORE INTO response_items "
    "SELECT r.owner, json_extract(j.value, '$.id'), r.id, r.created_at, 0 "
    "FROM responses r, json_each(r.input_items) j "
    "WHERE json_type(j.value, '$.id') = 'text'",
    "INSERT OR IGNORE INTO response_items "
    "SELECT r.owner, json_extract(j.value, '$.id'), r.id, r.created_at, 1 "
    "FROM responses r, json_each(r.response, '$.output') j "
    "WHERE json_type(j.value, '$.id') = 'text'",
    # Left by older versions: events written after their response was deleted.
    "DELETE FROM response_events WHERE response_id NOT IN (SELECT id FROM responses)",
    "DELETE FROM response_reservations WHERE response_id NOT IN (SELECT id FROM responses)",
]

# A step is a statement, or a function run on the connection (rows the
# new layout stores differently).
_MIGRATIONS: list[tuple[int, list[str | Callable[[sql.Db], None]]]] = [
    (3, [*_statements(_SCHEMA_V3), *_BACKFILL_ITEMS]),
    (4, [*_statements(_SCHEMA_V4)]),
    (5, [*_statements(_SCHEMA_V5_CHAT_SETTINGS)]),
    (6, [*_statements(_SCHEMA_V6), sql.compact_chains]),
    (7, [*_statements(_SCHEMA_V7)]),
]


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
        for target, statements in _MIGRATIONS:
            if version < target:
                for statement in statements:
                    if isinstance(statement, str):
                        conn.execute(statement)
                    else:
                        statement(conn)
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
