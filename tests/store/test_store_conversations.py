"""Issue 35: a conversation's messages are rows (schema 8), so a turn
writes only the messages it added, not the whole history again; a
compaction (``kept=0``) is a new base, and dropping the oldest turns
deletes their rows and rewrites none. On SQLite and PostgreSQL, older
stores included."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
import trio
from test_store_backends import Stores, backend, pg_url, stores  # noqa: F401

from hermes_trio.store import kept_messages, schema
from hermes_trio.store.postgres import _PgDb
from hermes_trio.store.shared import SQLStore

KEY = "chat:telegram:1:"


class CountingDb:
    """A connection that counts the bytes of the parameters it is sent: what
    a transaction writes, give or take the statements' own text."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.written = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)

    def execute(self, query: str, params: Sequence[Any] = ()) -> Any:
        self.written += _size(params)
        return self.db.execute(query, params)

    def executemany(self, query: str, rows: Iterable[Sequence[Any]]) -> Any:
        rows = list(rows)
        self.written += sum(_size(row) for row in rows)
        return self.db.executemany(query, rows)


def _size(params: Sequence[Any]) -> int:
    return sum(len(p.encode()) if isinstance(p, str) else 8 for p in params if p is not None)


async def _release_counted(store: SQLStore, *args: Any, **kwargs: Any) -> int:
    """Bytes the release's transaction sent."""
    counted: list[CountingDb] = []
    write = store._write

    async def counting(fn: Any) -> Any:
        def run(db: Any) -> Any:
            counter = CountingDb(db)
            counted.append(counter)
            return fn(counter)

        return await write(run)

    store._write = counting  # type: ignore[method-assign]
    try:
        assert await store.release_conversation(*args, **kwargs)
    finally:
        del store._write
    return sum(c.written for c in counted)


def _turn(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"question {n:04d} " + "q" * 200},
        {"role": "assistant", "content": f"answer {n:04d} " + "a" * 200},
    ]


async def _rows(store: SQLStore, key: str) -> list[int]:
    def read(db: Any) -> list[int]:
        query = "SELECT seq FROM conversation_messages WHERE key = ? ORDER BY seq"
        return [int(row[0]) for row in db.execute(query, (key,)).fetchall()]

    result: list[int] = await store._read(read)
    return result


async def test_a_turn_writes_its_own_messages_whatever_the_chat_length(stores: Stores) -> None:  # noqa: F811
    store = await stores.open()
    written: dict[int, int] = {}
    for n in range(1, 301):
        claim = await store.claim_conversation(KEY, f"turn-{n:04d}")
        assert claim.messages is not None and len(claim.messages) == 2 * (n - 1)
        messages = [*claim.messages, *_turn(n)]
        kept = kept_messages(claim.messages, messages)
        written[n] = await _release_counted(store, KEY, f"turn-{n:04d}", messages, kept=kept)
    # The 300th turn costs what the 10th did: its two messages.
    assert written[300] == written[10], written
    assert written[10] < 2 * len(json.dumps(_turn(10))), written
    whole = await store.conversation(KEY)
    assert whole == [m for n in range(1, 301) for m in _turn(n)]
    assert await _rows(store, KEY) == list(range(600))


async def test_kept_zero_replaces_the_history_with_a_new_base(stores: Stores) -> None:  # noqa: F811
    first, second = await stores.open(), await stores.open()
    history = [m for n in range(5) for m in _turn(n)]
    await first.claim_conversation(KEY, "t1")
    assert await first.release_conversation(KEY, "t1", history, kept=0)
    # A compaction: a summary and the newest turn, stored whole.
    claim = await first.claim_conversation(KEY, "t2")
    assert claim.messages == history
    base = [{"role": "user", "content": "summary of turns 0-3"}, *_turn(4), *_turn(5)]
    assert await first.release_conversation(KEY, "t2", base, kept=0)
    assert await second.conversation(KEY) == base
    assert await _rows(first, KEY) == list(range(len(base)))
    # The next turn adds to the base, and another process continues it.
    claim = await second.claim_conversation(KEY, "t3")
    assert claim.messages == base
    after = [*base, *_turn(6)]
    written = await _release_counted(second, KEY, "t3", after, kept=len(base))
    assert written < 2 * len(json.dumps(_turn(6)))
    assert await first.conversation(KEY) == after


async def test_dropping_the_oldest_turns_rewrites_none(stores: Stores) -> None:  # noqa: F811
    store = await stores.open()
    history = [m for n in range(10) for m in _turn(n)]
    await store.claim_conversation(KEY, "t1")
    await store.release_conversation(KEY, "t1", history)
    claim = await store.claim_conversation(KEY, "t2")
    assert claim.messages == history
    rest = [*history[6:], *_turn(10)]
    kept = kept_messages(claim.messages, rest, dropped=6)
    assert kept == len(history) - 6
    written = await _release_counted(store, KEY, "t2", rest, kept=kept, dropped=6)
    assert written < 2 * len(json.dumps(_turn(10)))
    assert await store.conversation(KEY) == rest
    assert await _rows(store, KEY) == list(range(6, 6 + len(rest)))
    # A compaction after a drop starts the numbering again.
    claim = await store.claim_conversation(KEY, "t3")
    assert claim.messages == rest
    assert await store.release_conversation(KEY, "t3", rest[-2:], kept=0)
    assert await store.conversation(KEY) == rest[-2:]
    assert await _rows(store, KEY) == [0, 1]


async def test_a_release_without_the_hold_or_with_a_kept_beyond_the_store(
    stores: Stores,  # noqa: F811
) -> None:
    store = await stores.open()
    await store.claim_conversation(KEY, "t1")
    await store.release_conversation(KEY, "t1", _turn(0))
    # Not held by this turn: nothing changes.
    assert not await store.release_conversation(KEY, "t1", _turn(1), kept=2)
    assert await store.conversation(KEY) == _turn(0)
    # A kept larger than what is stored writes the rest; no gap is left.
    await store.claim_conversation(KEY, "t2")
    messages = [*_turn(0), *_turn(1), *_turn(2)]
    assert await store.release_conversation(KEY, "t2", messages, kept=4)
    assert await store.conversation(KEY) == messages
    # Deleting and pruning take the rows too.
    assert await store.delete_conversation(KEY)
    assert await _rows(store, KEY) == []
    await store.claim_conversation("api:o:s", "t")
    await store.release_conversation("api:o:s", "t", _turn(0))
    assert await store.prune_conversations("api:", max_age=1e9, max_count=0) == 1
    assert await _rows(store, "api:o:s") == []


def test_kept_is_the_claimed_start_unless_compacted_or_changed() -> None:
    claimed = [m for n in range(3) for m in _turn(n)]
    grown = [*claimed, *_turn(3)]
    assert kept_messages(claimed, grown) == 6
    assert kept_messages(claimed, grown, compacted=True) == 0
    assert kept_messages(claimed, grown[2:], dropped=2) == 4
    # The start replaced (a compaction that did not say so, a list edited).
    assert kept_messages(claimed, [{"role": "user", "content": "summary"}, *grown[2:]]) == 0
    assert kept_messages(claimed, grown[:4]) == 0
    assert kept_messages([], grown) == 0


# -- schema 7 to 8 ----------------------------------------------------------------

V7_CONVERSATIONS = [
    ("chat:telegram:5:", [m for n in range(4) for m in _turn(n)], None),
    ("api:owner:empty", [], None),
    ("api:owner:held", _turn(9), "elsewhere/boot:4242:dead"),
]


def _write_v7(where: str) -> None:
    """A store as version 7 left it, conversations as one JSON list each."""
    insert = "INSERT INTO conversations VALUES (?, ?, ?, ?, ?)"
    rows = [(k, json.dumps(m), 1_700_000_000.0, r, r and "t") for k, m, r in V7_CONVERSATIONS]
    if where.startswith("postgresql://"):
        with psycopg.connect(where, autocommit=True) as conn:
            conn.execute("CREATE TABLE hermes_schema (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO hermes_schema VALUES (7)")
            v7 = [m for m in schema.POSTGRES_MIGRATIONS if m[0] <= 7]
            schema.migrate_from(0, v7, conn.execute, _PgDb(conn))  # type: ignore[arg-type]
            with conn.cursor() as cursor:
                cursor.executemany(insert.replace("?", "%s"), rows)
        return
    conn = sqlite3.connect(where, isolation_level=None)
    try:
        v7 = [m for m in schema.SQLITE_MIGRATIONS if m[0] <= 7]
        schema.migrate_from(0, v7, conn.execute, conn)  # type: ignore[arg-type]
        conn.executemany(insert, rows)
        conn.execute("PRAGMA user_version=7")
    finally:
        conn.close()


async def test_a_version_7_store_is_migrated_to_message_rows(
    backend: str,  # noqa: F811
    stores: Stores,  # noqa: F811
) -> None:
    await trio.to_thread.run_sync(_write_v7, backend)
    store = await stores.open()
    for key, messages, _ in V7_CONVERSATIONS:
        assert await store.conversation(key) == messages
        assert await _rows(store, key) == list(range(len(messages)))
    # The migrated conversation continues: a turn adds its own rows.
    key, messages, _ = V7_CONVERSATIONS[0]
    claim = await store.claim_conversation(key, "next")
    assert claim.messages == messages
    grown = [*messages, *_turn(4)]
    written = await _release_counted(store, key, "next", grown, kept=len(messages))
    assert written < 2 * len(json.dumps(_turn(4)))
    assert await store.conversation(key) == grown
    # The one a dead process held is free.
    assert (await store.claim_conversation("api:owner:held", "mine")).messages == _turn(9)
