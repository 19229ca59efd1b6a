"""The durable response store behind ``/v1/responses``.

:class:`ResponseStore` is the small interface the routes use; a shared
database server can implement it when several server processes share state.
:class:`SQLiteResponseStore` is the default: one file under the configured
data directory, WAL mode, one connection for writes and one for reads, each
used by one worker thread at a time (every access goes through
``trio.to_thread.run_sync`` behind that connection's ``trio.Lock``: a read
never queues behind a write that waits for the disk or for another
program's lock), and every change in a single transaction, so a crash or a
SIGKILL at any moment leaves the file readable with whole rows only. The
JSON of whole conversations is encoded and decoded in those worker threads
too, never on the event loop.

A row holds the response object, the conversation that a later
``previous_response_id`` continues (user, assistant and tool messages,
including tool calls and their results), the request's input items, and the
owner: a hash of the API key that created it. Reads and deletes of another
owner's row behave as if it did not exist. Stream events live in their own
table, keyed by (response id, sequence number), so a dropped client can
resume after the last event it saw; they are written only while their
response's row exists, so a deleted response leaves none behind.

The input and output items of every response are indexed by (owner, item
id): an ``item_reference`` is a key lookup, not a scan of every stored
conversation.

The file's schema version is SQLite's ``user_version``; opening an older
file migrates it in one transaction (the item index is built from the rows
it has), a newer one is refused.

Events reach clients before they are stored (they are written in batches),
so a running response also has a *reservation*: the highest sequence number
its clients may see before it is stored, written ahead of the stream every
:data:`RESERVE_AHEAD` events. After a crash, recovery rebuilds the response
from the events that were stored and numbers its ``response.incomplete``
above the reservation, so a client resuming from the last event it saw gets
that ending, never an empty stream or a number it already had.

A refused operation (disk full, read-only, locked, damaged) raises
:class:`StoreError`, a 503 with a code saying which; the first failure of an
outage is logged once with SQLite's own words. A store that cannot be opened
at all raises :class:`StoreOpenError`: one line naming ``store.data_dir``.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import json
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import orjson
import trio

from ..agent import INTERRUPTED_MARK
from ..config import Config, StoreConfig
from ..wire.responses_out import ResponseEvent
from ..wire.responses_replay import output_text, replay_output
from .data_lock import DataDirInUse, DataDirLock, lock_data_dir
from .errors import APIError

__all__ = [
    "RESERVE_AHEAD",
    "ResponseStore",
    "SQLiteResponseStore",
    "StoreError",
    "StoreOpenError",
    "StoredResponse",
    "open_response_store",
    "owner_scope",
    "store_failure",
    "wall_clock",
]

log = logging.getLogger("hermes_trio.server.store")

DB_FILENAME = "responses.sqlite3"
SCHEMA_VERSION = 3
"""2: events, reservations. 3: the item index."""
# Sequence numbers reserved per reservation write: one small write per this
# many events, never one per token.
RESERVE_AHEAD = 1024
# Retention runs at open and then once per this many new responses: counting
# rows on every insert would cost more than the rows it saves.
PRUNE_EVERY = 64

_std_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _dumps(value: Any) -> str:
    """``value`` as compact JSON text.

    orjson first: a JSON encoder holds the GIL, and with it the event loop,
    for the whole of one call, even in a worker thread, and orjson takes a
    tenth of the standard encoder's time. The standard encoder takes what
    orjson refuses (an integer beyond 64 bits)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return _std_dumps(value)


def wall_clock() -> float:
    # Stored timestamps are Unix seconds by contract (created_at, retention
    # across restarts); trio's clock is monotonic and has no epoch.
    return datetime.datetime.now(datetime.UTC).timestamp()


def owner_scope(api_key: str | None) -> str:
    """The owner recorded with a response: a hash, never the key itself."""
    return hashlib.sha256((api_key or "").encode()).hexdigest()[:32]


class StoreError(APIError):
    """The store refused an operation: a 503 whose ``code`` says why
    (``store_full``, ``store_read_only``, ``store_busy``, ``store_corrupt``,
    ``store_io_error``, ``store_error``)."""

    code: str
    """Always set: the store says why it refused."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(503, message, code=code)


class _NewerSchema(Exception):
    """The file was written by a newer version, with a schema this one does
    not know."""


class StoreOpenError(Exception):
    """The store cannot be opened: the one line a user sees at startup,
    naming ``store.data_dir`` and what is wrong with it."""


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


@dataclass
class StoredResponse:
    id: str
    owner: str
    status: str
    created_at: float
    response: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)
    input_items: list[dict[str, Any]] = field(default_factory=list)
    background: bool = False


@runtime_checkable
class ResponseStore(Protocol):
    """What the routes need from a response store. Every method is safe to
    call from any trio task; implementations must not block the event loop."""

    async def create(self, record: StoredResponse, *, reserved: int = -1) -> None:
        """Record a new response (normally ``in_progress``) with its first
        reservation (see :meth:`reserve`)."""

    async def reserve(self, response_id: str, seq: int) -> None:
        """Events up to sequence number ``seq`` may reach clients before
        they are stored: recovery numbers its ending above it."""

    async def append_events(self, response_id: str, events: Sequence[ResponseEvent]) -> None:
        """Add stream events; an event already stored is left as it is."""

    async def finish(
        self,
        response_id: str,
        *,
        status: str,
        response: dict[str, Any],
        messages: list[dict[str, Any]],
        events: Sequence[ResponseEvent] = (),
    ) -> None:
        """Store the final state and the last events, all at once."""

    async def get(self, response_id: str, owner: str) -> StoredResponse | None: ...

    async def find_items(self, owner: str, item_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored input and output items of ``owner``'s responses with
        these ids (the newest response's where several share an id)."""

    async def events_after(self, response_id: str, after: int) -> list[ResponseEvent]:
        """Stored events with a sequence number above ``after``, in order."""

    async def delete(self, response_id: str, owner: str) -> bool: ...

    async def recover_interrupted(self) -> int:
        """Mark responses left ``in_progress`` by a process that is gone as
        ``incomplete``; returns how many."""

    async def prune(self) -> int:
        """Apply the retention limits; returns how many responses went."""


_SCHEMA = """
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
_SCHEMA_STATEMENTS = [part.strip() for part in _SCHEMA.split(";") if part.strip()]

# Where an indexed item is kept: 0 the input items, 1 the response's output.
_ITEM_SOURCES = ("input_items", "response")
_INDEX_ITEM = "INSERT OR IGNORE INTO response_items VALUES (?, ?, ?, ?, ?)"
# Output items of a response, indexed under its own owner and age; nothing
# when the row is gone (deleted while its turn ran).
_INDEX_OUTPUT = (
    "INSERT OR IGNORE INTO response_items "
    "SELECT owner, ?, id, created_at, 1 FROM responses WHERE id = ?"
)
_FORGET_ITEMS = "DELETE FROM response_items WHERE response_id = ?"
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

_INSERT_EVENTS = "INSERT OR IGNORE INTO response_events VALUES (?, ?, ?, ?)"
# Its own small table: updating a column of the response row would rewrite
# the whole row, conversation included.
_RESERVE = "INSERT OR REPLACE INTO response_reservations VALUES (?, ?)"
_FORGET_RESERVATION = "DELETE FROM response_reservations WHERE response_id = ?"
_FINISH_RESPONSE = (
    "UPDATE responses SET status = ?, updated_at = ?, response = ?, messages = ? WHERE id = ?"
)


def _event_rows(
    response_id: str, events: Sequence[ResponseEvent]
) -> list[tuple[str, int, str, str]]:
    return [(response_id, e.sequence_number, e.type, e.data) for e in events]


def _item_ids(items: Any) -> list[str]:
    """The ids of a list of items, skipping anything without a text id."""
    if not isinstance(items, list):
        return []
    return [
        item["id"] for item in items if isinstance(item, dict) and isinstance(item.get("id"), str)
    ]


def _exists(conn: sqlite3.Connection, response_id: str) -> bool:
    found = conn.execute("SELECT 1 FROM responses WHERE id = ?", (response_id,)).fetchone()
    return found is not None


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring the file to :data:`SCHEMA_VERSION` in one transaction."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version > SCHEMA_VERSION:
        raise _NewerSchema(
            f"schema version {version}; this version of hermes-trio knows up to {SCHEMA_VERSION}"
        )
    if version == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SCHEMA_STATEMENTS:
            conn.execute(statement)
        if version < 3:
            for statement in _BACKFILL_ITEMS:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class SQLiteResponseStore:
    """:class:`ResponseStore` over one SQLite file (see the module doc).

    One file belongs to one server process at a time:
    :meth:`recover_interrupted` treats every ``in_progress`` row as left
    behind by a crash (:func:`open_response_store` locks the directory).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        max_rows: int = 10_000,
        max_age_days: float = 30.0,
        clock: Callable[[], float] = wall_clock,
    ) -> None:
        self.path = Path(path)
        self.max_rows = max_rows
        self.max_age_days = max_age_days
        self.clock = clock
        self._conn: sqlite3.Connection | None = None
        # A connection may move between worker threads but must never be used
        # by two at once; the lock is held across each thread call.
        self._lock = trio.Lock()
        # Reads have their own connection (WAL lets it read while a write
        # is under way); None where WAL is not available.
        self._reader: sqlite3.Connection | None = None
        self._read_lock = trio.Lock()
        self._since_prune = 0
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
        if write and self._failing is not None:
            self._failing = None
            log.warning("the response store works again (%s)", self.path)
        return result

    async def _read(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run ``fn`` on the read connection: it does not wait for a write
        in progress."""
        if self._reader is None:
            return await self._run(fn, write=False)
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

    @staticmethod
    def _transaction(conn: sqlite3.Connection, body: Callable[[], Any]) -> Any:
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = body()
        except BaseException:
            # SQLite ends the transaction itself after some errors (a full
            # disk, an I/O error); a second ROLLBACK would hide the first error.
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    async def open(self, *, recover: bool = False) -> None:
        """Open the file (creating it), apply retention and, with
        ``recover``, end what a previous process left running."""

        def connect() -> tuple[sqlite3.Connection, sqlite3.Connection | None]:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=10.0
            )
            reader = None
            try:
                (mode,) = conn.execute("PRAGMA journal_mode=WAL").fetchone()
                # In WAL mode NORMAL never corrupts and loses nothing on a
                # process crash; only power loss may drop the last commits.
                conn.execute("PRAGMA synchronous=NORMAL")
                _migrate(conn)
                if str(mode).lower() == "wal":
                    reader = sqlite3.connect(
                        self.path, check_same_thread=False, isolation_level=None, timeout=10.0
                    )
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
            except _NewerSchema as exc:
                raise StoreError(
                    "store_newer", f"the response store was written by a newer version ({exc})"
                ) from exc
            await self.prune()
            if recover:
                await self.recover_interrupted()
        finally:
            self._quiet = False

    async def aclose(self) -> None:
        async with self._read_lock:
            reader, self._reader = self._reader, None
            if reader is not None:
                await trio.to_thread.run_sync(reader.close)
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                await trio.to_thread.run_sync(conn.close)

    # -- the interface ------------------------------------------------------

    async def create(self, record: StoredResponse, *, reserved: int = -1) -> None:
        now = self.clock()

        def insert(conn: sqlite3.Connection) -> None:
            # Encoded here, in the worker thread: a conversation can be large.
            row = (
                record.id,
                record.owner,
                record.status,
                record.created_at,
                now,
                int(record.background),
                _dumps(record.response),
                _dumps(record.messages),
                _dumps(record.input_items),
            )
            items = [
                (record.owner, item_id, record.id, record.created_at, source)
                for source, ids in (
                    (0, _item_ids(record.input_items)),
                    (1, _item_ids(record.response.get("output"))),
                )
                for item_id in ids
            ]

            def body() -> None:
                conn.execute("INSERT INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
                conn.executemany(_INDEX_ITEM, items)
                if reserved >= 0:
                    conn.execute(_RESERVE, (record.id, reserved))

            self._transaction(conn, body)

        await self._run(insert)
        self._since_prune += 1
        if self._since_prune >= PRUNE_EVERY:
            await self.prune()

    async def reserve(self, response_id: str, seq: int) -> None:
        def write(conn: sqlite3.Connection) -> None:
            def body() -> None:
                if _exists(conn, response_id):
                    conn.execute(_RESERVE, (response_id, seq))

            self._transaction(conn, body)

        await self._run(write)

    async def append_events(self, response_id: str, events: Sequence[ResponseEvent]) -> None:
        if not events:
            return
        rows = _event_rows(response_id, events)

        def insert(conn: sqlite3.Connection) -> None:
            def body() -> None:
                # A response deleted while its turn ran keeps no events.
                if _exists(conn, response_id):
                    conn.executemany(_INSERT_EVENTS, rows)

            self._transaction(conn, body)

        await self._run(insert)

    async def finish(
        self,
        response_id: str,
        *,
        status: str,
        response: dict[str, Any],
        messages: list[dict[str, Any]],
        events: Sequence[ResponseEvent] = (),
    ) -> None:
        rows = _event_rows(response_id, events)
        now = self.clock()

        def write(conn: sqlite3.Connection) -> None:
            # Encoded here, in the worker thread: a conversation can be large.
            update = (status, now, _dumps(response), _dumps(messages), response_id)
            outputs = [(item_id, response_id) for item_id in _item_ids(response.get("output"))]

            def body() -> None:
                # The row first: a response deleted while its turn ran gets
                # no events or items back.
                if conn.execute(_FINISH_RESPONSE, update).rowcount:
                    conn.executemany(_INSERT_EVENTS, rows)
                    conn.executemany(_INDEX_OUTPUT, outputs)
                conn.execute(_FORGET_RESERVATION, (response_id,))

            self._transaction(conn, body)

        await self._run(write)

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        def read(conn: sqlite3.Connection) -> StoredResponse | None:
            row = conn.execute(
                "SELECT id, owner, status, created_at, response, messages, input_items, "
                "background FROM responses WHERE id = ? AND owner = ?",
                (response_id, owner),
            ).fetchone()
            if row is None:
                return None
            # Decoded here, in the worker thread: a conversation can be large.
            return StoredResponse(
                id=row[0],
                owner=row[1],
                status=row[2],
                created_at=row[3],
                response=json.loads(row[4]),
                messages=json.loads(row[5]),
                input_items=json.loads(row[6]),
                background=bool(row[7]),
            )

        found: StoredResponse | None = await self._read(read)
        return found

    async def find_items(self, owner: str, item_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        wanted = sorted(set(item_ids))

        def read(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
            # Where each item is: the newest of the owner's responses holding it.
            newest: dict[str, tuple[float, str, int]] = {}
            # SQLite bounds the parameters of one statement.
            for start in range(0, len(wanted), 500):
                batch = wanted[start : start + 500]
                marks = ", ".join("?" * len(batch))
                for item_id, response_id, created_at, source in conn.execute(
                    "SELECT item_id, response_id, created_at, source FROM response_items "
                    f"WHERE owner = ? AND item_id IN ({marks})",
                    (owner, *batch),
                ):
                    place = (created_at, response_id, source)
                    if item_id not in newest or place[:2] > newest[item_id][:2]:
                        newest[item_id] = place
            # Each response's items are read and decoded once, here in the
            # worker thread.
            by_place: dict[tuple[str, int], list[str]] = {}
            for item_id, (_, response_id, source) in newest.items():
                by_place.setdefault((response_id, source), []).append(item_id)
            found: dict[str, dict[str, Any]] = {}
            for (response_id, source), ids in by_place.items():
                column = _ITEM_SOURCES[source]
                stored = conn.execute(
                    f"SELECT {column} FROM responses WHERE id = ?", (response_id,)
                ).fetchone()
                if stored is None:
                    continue
                value = json.loads(stored[0])
                items = value if source == 0 else value.get("output")
                by_id = {
                    item["id"]: item
                    for item in items or []
                    if isinstance(item, dict) and isinstance(item.get("id"), str)
                }
                found.update((i, by_id[i]) for i in ids if i in by_id)
            return found

        if not wanted:
            return {}
        result: dict[str, dict[str, Any]] = await self._read(read)
        return result

    async def events_after(self, response_id: str, after: int) -> list[ResponseEvent]:
        def read(conn: sqlite3.Connection) -> list[tuple[int, str, str]]:
            rows: list[tuple[int, str, str]] = conn.execute(
                "SELECT seq, type, data FROM response_events "
                "WHERE response_id = ? AND seq > ? ORDER BY seq",
                (response_id, after),
            ).fetchall()
            return rows

        rows = await self._read(read)
        return [ResponseEvent.make(seq, type_, data) for seq, type_, data in rows]

    async def delete(self, response_id: str, owner: str) -> bool:
        def remove(conn: sqlite3.Connection) -> bool:
            def body() -> bool:
                cursor = conn.execute(
                    "DELETE FROM responses WHERE id = ? AND owner = ?", (response_id, owner)
                )
                if cursor.rowcount == 0:
                    return False
                conn.execute("DELETE FROM response_events WHERE response_id = ?", (response_id,))
                conn.execute(_FORGET_RESERVATION, (response_id,))
                conn.execute(_FORGET_ITEMS, (response_id,))
                return True

            deleted: bool = self._transaction(conn, body)
            return deleted

        deleted: bool = await self._run(remove)
        return deleted

    async def recover_interrupted(self) -> int:
        now = self.clock()

        def recover(conn: sqlite3.Connection) -> int:
            def body() -> int:
                rows = conn.execute(
                    "SELECT id, response, messages FROM responses WHERE status = 'in_progress'"
                ).fetchall()
                for response_id, response_json, messages_json in rows:
                    _recover_one(conn, response_id, response_json, messages_json, now)
                return len(rows)

            count: int = self._transaction(conn, body)
            return count

        count: int = await self._run(recover)
        if count:
            log.warning(
                "%d response(s) were still in progress when the server last stopped; "
                "marked incomplete",
                count,
            )
        return count

    async def prune(self) -> int:
        self._since_prune = 0
        cutoff = self.clock() - self.max_age_days * 86400.0
        keep = self.max_rows

        def prune(conn: sqlite3.Connection) -> int:
            def body() -> int:
                # Live responses stay whatever their age: their turn still
                # writes to them.
                old = conn.execute(
                    "SELECT id FROM responses WHERE status != 'in_progress' AND ("
                    "created_at < ? OR id IN (SELECT id FROM responses "
                    "ORDER BY created_at DESC LIMIT -1 OFFSET ?))",
                    (cutoff, keep),
                ).fetchall()
                conn.executemany("DELETE FROM responses WHERE id = ?", old)
                conn.executemany("DELETE FROM response_events WHERE response_id = ?", old)
                conn.executemany(_FORGET_RESERVATION, old)
                conn.executemany(_FORGET_ITEMS, old)
                return len(old)

            count: int = self._transaction(conn, body)
            return count

        count: int = await self._run(prune)
        if count:
            log.info("response store: removed %d response(s) past retention", count)
        return count


_ITEM_MARKS = ("response.output_item.added", "response.output_item.done")


def _stored_output(conn: sqlite3.Connection, response_id: str) -> list[dict[str, Any]]:
    """The output items the stored events had built. Deltas are read only
    from the first item still open on: most of a long response stays unread."""
    marks = conn.execute(
        "SELECT seq, type, data FROM response_events "
        "WHERE response_id = ? AND type IN (?, ?) ORDER BY seq",
        (response_id, *_ITEM_MARKS),
    ).fetchall()
    open_since: dict[int, int] = {}
    for seq, type_, data in marks:
        index = json.loads(data).get("output_index")
        if type_ == _ITEM_MARKS[0]:
            open_since[index] = seq
        else:
            open_since.pop(index, None)
    first_open = min(open_since.values(), default=None)
    events = [json.loads(data) for seq, _, data in marks if first_open is None or seq < first_open]
    if first_open is not None:
        events += [
            json.loads(data)
            for (data,) in conn.execute(
                "SELECT data FROM response_events WHERE response_id = ? AND seq >= ? ORDER BY seq",
                (response_id, first_open),
            )
        ]
    return replay_output(events)


def _recover_one(
    conn: sqlite3.Connection, response_id: str, response_json: str, messages_json: str, now: float
) -> None:
    """End one orphaned response as ``incomplete``: its output is what the
    stored events had built, and a ``response.incomplete`` event numbered
    above anything its clients may have seen closes its stream."""
    response = json.loads(response_json)
    (last,) = conn.execute(
        "SELECT MAX(seq) FROM response_events WHERE response_id = ?", (response_id,)
    ).fetchone()
    reservation = conn.execute(
        "SELECT seq FROM response_reservations WHERE response_id = ?", (response_id,)
    ).fetchone()
    output = _stored_output(conn, response_id)
    text = output_text(output)
    response.update(
        status="incomplete",
        incomplete_details={"reason": None},
        output=output,
        output_text=text,
    )
    messages = json.loads(messages_json)
    # The stored conversation ends with this turn's input; an assistant
    # message keeps it valid for a turn that continues from here.
    messages.append(
        {"role": "assistant", "content": f"{text} {INTERRUPTED_MARK}" if text else INTERRUPTED_MARK}
    )
    seen = max(-1 if last is None else last, -1 if reservation is None else reservation[0])
    seq = seen + 1
    event = {"type": "response.incomplete", "response": response, "sequence_number": seq}
    conn.execute(_INSERT_EVENTS, (response_id, seq, "response.incomplete", _dumps(event)))
    conn.execute(
        _FINISH_RESPONSE, ("incomplete", now, _dumps(response), _dumps(messages), response_id)
    )
    conn.executemany(_INDEX_OUTPUT, [(i, response_id) for i in _item_ids(output)])
    conn.execute(_FORGET_RESERVATION, (response_id,))


def store_path(config: StoreConfig) -> Path:
    return Path(config.data_dir).expanduser() / DB_FILENAME


_FIX = "(set store.data_dir or HERMES_DATA_DIR to a writable directory)"


def _take_data_dir(directory: Path) -> DataDirLock:
    """Create and lock the data directory, or say in one line why not."""
    where = f"store.data_dir {directory}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise StoreOpenError(f"{where} is not a directory {_FIX}") from None
    except OSError as exc:
        raise StoreOpenError(f"{where} cannot be created ({exc.strerror or exc}) {_FIX}") from None
    try:
        return lock_data_dir(directory)
    except DataDirInUse as exc:
        raise StoreOpenError(
            f"{where} is {exc}: one server per data directory; stop that one or set "
            "store.data_dir (HERMES_DATA_DIR) to another directory"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            raise StoreOpenError(f"{where} is not a directory {_FIX}") from None
        raise StoreOpenError(f"{where} cannot be written ({exc.strerror or exc}) {_FIX}") from None


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


@asynccontextmanager
async def open_response_store(
    config: Config, *, recover: bool = False, clock: Callable[[], float] = wall_clock
) -> AsyncIterator[SQLiteResponseStore]:
    """The configured store for the life of this block, its data directory
    locked for this process (one server per directory). ``recover=True``
    marks what a previous process left running as ``incomplete``.

    Raises :class:`StoreOpenError` when it cannot be opened.
    """
    settings = config.store
    directory = store_path(settings).parent
    lock = await trio.to_thread.run_sync(partial(_take_data_dir, directory))
    try:
        store = SQLiteResponseStore(
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
        try:
            yield store
        finally:
            # Closing waits for a running statement; shielded so a cancelled
            # server still releases the file cleanly.
            with trio.CancelScope(shield=True):
                await store.aclose()
    finally:
        lock.release()
