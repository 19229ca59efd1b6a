"""The durable response store behind ``/v1/responses`` (issue 4).

:class:`ResponseStore` is the small interface the routes use; a shared
database server can implement it when several server processes share state.
:class:`SQLiteResponseStore` is the default: one file under the configured
data directory, WAL mode, one connection used by one worker thread at a time
(every access goes through ``trio.to_thread.run_sync`` behind a
``trio.Lock``), and every change in a single transaction, so a crash or a
SIGKILL at any moment leaves the file readable with whole rows only.

A row holds the response object, the conversation that a later
``previous_response_id`` continues (user, assistant and tool messages,
including tool calls and their results), the request's input items, and the
owner: a hash of the API key that created it. Reads and deletes of another
owner's row behave as if it did not exist. Stream events live in their own
table, keyed by (response id, sequence number), so a dropped client can
resume after the last event it saw.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import trio

from ..agent import INTERRUPTED_MARK
from ..config import Config, StoreConfig
from ..wire.responses_out import ResponseEvent

__all__ = [
    "ResponseStore",
    "SQLiteResponseStore",
    "StoredResponse",
    "open_response_store",
    "owner_scope",
    "wall_clock",
]

log = logging.getLogger("hermes_trio.server.store")

DB_FILENAME = "responses.sqlite3"
SCHEMA_VERSION = 1
# Retention runs at open and then once per this many new responses: counting
# rows on every insert would cost more than the rows it saves.
PRUNE_EVERY = 64

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def wall_clock() -> float:
    # Stored timestamps are Unix seconds by contract (created_at, retention
    # across restarts); trio's clock is monotonic and has no epoch.
    return datetime.datetime.now(datetime.UTC).timestamp()


def owner_scope(api_key: str | None) -> str:
    """The owner recorded with a response: a hash, never the key itself."""
    return hashlib.sha256((api_key or "").encode()).hexdigest()[:32]


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

    async def create(self, record: StoredResponse) -> None:
        """Record a new response (normally ``in_progress``)."""

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
"""

_INSERT_EVENTS = "INSERT OR IGNORE INTO response_events VALUES (?, ?, ?, ?)"
_FINISH_RESPONSE = (
    "UPDATE responses SET status = ?, updated_at = ?, response = ?, messages = ? WHERE id = ?"
)


def _event_rows(
    response_id: str, events: Sequence[ResponseEvent]
) -> list[tuple[str, int, str, str]]:
    return [(response_id, e.sequence_number, e.type, e.data) for e in events]


class SQLiteResponseStore:
    """:class:`ResponseStore` over one SQLite file (see the module doc).

    One file belongs to one server process at a time:
    :meth:`recover_interrupted` treats every ``in_progress`` row as left
    behind by a crash.
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
        self._since_prune = 0

    # -- plumbing -----------------------------------------------------------

    async def _run(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        async with self._lock:
            conn = self._conn
            if conn is None:
                raise RuntimeError("the response store is closed")
            # Never abandoned on cancel: the transaction runs to its end and
            # the lock stays held until it has.
            return await trio.to_thread.run_sync(fn, conn)

    @staticmethod
    def _transaction(conn: sqlite3.Connection, body: Callable[[], Any]) -> Any:
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = body()
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    async def open(self) -> None:
        def connect() -> sqlite3.Connection:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=10.0
            )
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                # In WAL mode NORMAL never corrupts and loses nothing on a
                # process crash; only power loss may drop the last commits.
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.executescript(_SCHEMA)
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            except BaseException:
                conn.close()
                raise
            return conn

        self._conn = await trio.to_thread.run_sync(connect)
        await self.prune()

    async def aclose(self) -> None:
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                await trio.to_thread.run_sync(conn.close)

    # -- the interface ------------------------------------------------------

    async def create(self, record: StoredResponse) -> None:
        now = self.clock()
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

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)

        await self._run(insert)
        self._since_prune += 1
        if self._since_prune >= PRUNE_EVERY:
            await self.prune()

    async def append_events(self, response_id: str, events: Sequence[ResponseEvent]) -> None:
        if not events:
            return
        rows = _event_rows(response_id, events)

        def insert(conn: sqlite3.Connection) -> None:
            self._transaction(conn, lambda: conn.executemany(_INSERT_EVENTS, rows))

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
        update = (status, self.clock(), _dumps(response), _dumps(messages), response_id)

        def write(conn: sqlite3.Connection) -> None:
            def body() -> None:
                conn.executemany(_INSERT_EVENTS, rows)
                conn.execute(_FINISH_RESPONSE, update)

            self._transaction(conn, body)

        await self._run(write)

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        def read(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            row: tuple[Any, ...] | None = conn.execute(
                "SELECT id, owner, status, created_at, response, messages, input_items, "
                "background FROM responses WHERE id = ? AND owner = ?",
                (response_id, owner),
            ).fetchone()
            return row

        row = await self._run(read)
        if row is None:
            return None
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

    async def find_items(self, owner: str, item_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        wanted = sorted(set(item_ids))

        def read(conn: sqlite3.Connection) -> list[tuple[float, str]]:
            rows: list[tuple[float, str]] = []
            # SQLite bounds the parameters of one statement.
            for start in range(0, len(wanted), 500):
                batch = wanted[start : start + 500]
                marks = ", ".join("?" * len(batch))
                query = " UNION ALL ".join(
                    "SELECT r.created_at, j.value FROM responses r, "
                    f"json_each(r.{column}{path}) j WHERE r.owner = ? "
                    f"AND json_extract(j.value, '$.id') IN ({marks})"
                    for column, path in (("input_items", ""), ("response", ", '$.output'"))
                )
                rows += conn.execute(query, (owner, *batch, owner, *batch)).fetchall()
            return rows

        found: dict[str, dict[str, Any]] = {}
        if not wanted:
            return found
        # Oldest first, so that the newest response's item wins.
        for _, raw in sorted(await self._run(read), key=lambda row: row[0]):
            item = json.loads(raw)
            found[item["id"]] = item
        return found

    async def events_after(self, response_id: str, after: int) -> list[ResponseEvent]:
        def read(conn: sqlite3.Connection) -> list[tuple[int, str, str]]:
            rows: list[tuple[int, str, str]] = conn.execute(
                "SELECT seq, type, data FROM response_events "
                "WHERE response_id = ? AND seq > ? ORDER BY seq",
                (response_id, after),
            ).fetchall()
            return rows

        rows = await self._run(read)
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
                return len(old)

            count: int = self._transaction(conn, body)
            return count

        count: int = await self._run(prune)
        if count:
            log.info("response store: removed %d response(s) past retention", count)
        return count


def _recover_one(
    conn: sqlite3.Connection, response_id: str, response_json: str, messages_json: str, now: float
) -> None:
    """End one orphaned response as ``incomplete``: its output is what the
    stored events had finished, and a ``response.incomplete`` event closes
    its stream for anyone who resumes it."""
    response = json.loads(response_json)
    # Only finished items and the last sequence number matter: the deltas,
    # most of a long response, stay unread.
    (last,) = conn.execute(
        "SELECT MAX(seq) FROM response_events WHERE response_id = ?", (response_id,)
    ).fetchone()
    done: dict[int, dict[str, Any]] = {}
    for (data,) in conn.execute(
        "SELECT data FROM response_events "
        "WHERE response_id = ? AND type = 'response.output_item.done' ORDER BY seq",
        (response_id,),
    ):
        event = json.loads(data)
        done[int(event["output_index"])] = event["item"]
    output = [done[index] for index in sorted(done)]
    text = "".join(
        part.get("text", "")
        for item in output
        if item.get("type") == "message"
        for part in item.get("content") or []
    )
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
    seq = last + 1 if last is not None else 0
    event = {"type": "response.incomplete", "response": response, "sequence_number": seq}
    conn.execute(_INSERT_EVENTS, (response_id, seq, "response.incomplete", _dumps(event)))
    conn.execute(
        _FINISH_RESPONSE, ("incomplete", now, _dumps(response), _dumps(messages), response_id)
    )


def store_path(config: StoreConfig) -> Path:
    return Path(config.data_dir).expanduser() / DB_FILENAME


@asynccontextmanager
async def open_response_store(
    config: Config, *, clock: Callable[[], float] = wall_clock
) -> AsyncIterator[SQLiteResponseStore]:
    """The configured store for the life of this block."""
    settings = config.store
    store = SQLiteResponseStore(
        store_path(settings),
        max_rows=settings.max_rows,
        max_age_days=settings.max_age_days,
        clock=clock,
    )
    await store.open()
    try:
        yield store
    finally:
        # Closing waits for a running statement; shielded so a cancelled
        # server still releases the file cleanly.
        with trio.CancelScope(shield=True):
            await store.aclose()
