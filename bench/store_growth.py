"""Bytes a chat's turn writes to the store, at turn 10 and at turn 300 (issue
35): each turn claims the conversation, adds a question and an answer of
about 1 KB each, and releases it, as the gateway and ``X-Session-ID``
sessions do. The bytes are those of the statements' parameters in the
release's transaction (the messages' JSON, keys, numbers), counted by a
wrapper around the connection.

Two ways of releasing, on both backends:
- ``rows``: ``kept`` = the claimed history (what the callers pass now);
- ``whole``: ``kept=0``, the whole history written again, as every turn did
  before schema 8 (and as a compaction does, once).

    python bench/store_growth.py [--turns 300] [--store-url postgresql://…]

Without ``--store-url`` PostgreSQL is tried at 127.0.0.1:5432 (database
``test``), in a schema of its own dropped at the end; SQLite runs in a
temporary directory.
"""

from __future__ import annotations

import argparse
import secrets
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import psycopg
import trio

from hermes_trio.store import PostgresStore, SQLiteStore
from hermes_trio.store.shared import SQLStore

PG_BASE = "postgresql://postgres@127.0.0.1:5432/test"
MARKS = (10, 300)


class CountingDb:
    """Counts the bytes of the parameters sent through a connection."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.written = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)

    def execute(self, query: str, params: Sequence[Any] = ()) -> Any:
        self.written += size(params)
        return self.db.execute(query, params)

    def executemany(self, query: str, rows: Iterable[Sequence[Any]]) -> Any:
        rows = list(rows)
        self.written += sum(size(row) for row in rows)
        return self.db.executemany(query, rows)


def size(params: Sequence[Any]) -> int:
    return sum(len(p.encode()) if isinstance(p, str) else 8 for p in params if p is not None)


async def release_counted(store: SQLStore, *args: Any, **kwargs: Any) -> int:
    counted: list[CountingDb] = []
    write = store._write

    async def counting(fn: Any) -> Any:
        def run(db: Any) -> Any:
            counted.append(CountingDb(db))
            return fn(counted[-1])

        return await write(run)

    store._write = counting  # type: ignore[method-assign]
    try:
        await store.release_conversation(*args, **kwargs)
    finally:
        del store._write
    return sum(c.written for c in counted)


def turn(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"question {n:05d} " + "q" * 1000},
        {"role": "assistant", "content": f"answer {n:05d} " + "a" * 1000},
    ]


async def chat(store: SQLStore, key: str, turns: int, whole: bool) -> dict[int, int]:
    """Bytes the release of each marked turn wrote."""
    written: dict[int, int] = {}
    for n in range(1, turns + 1):
        token = f"turn-{n:05d}"
        claim = await store.claim_conversation(key, token)
        assert claim.messages is not None
        messages = [*claim.messages, *turn(n)]
        kept = 0 if whole else len(claim.messages)
        count = await release_counted(store, key, token, messages, kept=kept)
        if n in MARKS or n == turns:
            written[n] = count
    return written


async def measure(name: str, store: SQLStore, turns: int) -> None:
    await store.open()
    try:
        for mode in ("rows", "whole"):
            written = await chat(store, f"chat:bench:{mode}:", turns, whole=mode == "whole")
            figures = ", ".join(f"turn {n}: {b:,} bytes" for n, b in sorted(written.items()))
            print(f"{name:<10} {mode:<6} {figures}")
    finally:
        await store.aclose()


def _pg_schema(base: str) -> str | None:
    try:
        with psycopg.connect(base, autocommit=True, connect_timeout=3) as conn:
            name = f"bench_{secrets.token_hex(6)}"
            conn.execute(f"CREATE SCHEMA {name}")  # type: ignore[arg-type]
            return name
    except psycopg.Error:
        return None


def _drop_schema(base: str, name: str) -> None:
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {name} CASCADE")  # type: ignore[arg-type]


async def main(turns: int, store_url: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        await measure("sqlite", SQLiteStore(Path(tmp) / "store.sqlite3"), turns)
    name = _pg_schema(store_url)
    if name is None:
        print(f"postgres   not reachable at {store_url}: skipped")
        return
    try:
        url = f"{store_url}?options=-csearch_path%3D{name}"
        await measure("postgres", PostgresStore(url), turns)
    finally:
        _drop_schema(store_url, name)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=max(MARKS))
    parser.add_argument("--store-url", default=PG_BASE)
    args = parser.parse_args()
    trio.run(main, args.turns, args.store_url)
