"""The schema (store/schema.py): the SQLite file and a PostgreSQL database,
each created from nothing by its own migrations, end with the same tables,
columns and indexes — a version that changes one backend must change both."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
from test_store_backends import opened, pg_url  # noqa: F401

from hermes_trio.store import schema

Layout = dict[str, set[str]]

# Where each backend keeps its own bookkeeping: not part of the schema.
_SQLITE_OWN = "sqlite_"
_POSTGRES_OWN = {"hermes_schema"}


def _sqlite_layout(path: Path) -> tuple[Layout, set[str]]:
    conn = sqlite3.connect(path)
    try:
        tables = [
            name
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not name.startswith(_SQLITE_OWN)
        ]
        layout = {t: {row[1] for row in conn.execute(f"PRAGMA table_info({t})")} for t in tables}
        indexes = {
            name
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
            if not name.startswith(_SQLITE_OWN)
        }
        (version,) = conn.execute("PRAGMA user_version").fetchone()
    finally:
        conn.close()
    assert version == schema.SCHEMA_VERSION
    return layout, indexes


def _postgres_layout(url: str) -> tuple[Layout, set[str]]:
    with psycopg.connect(url) as conn:
        (here,) = conn.execute("SELECT current_schema()").fetchone() or ("",)
        layout: Layout = {}
        for table, column in conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = %s",
            (here,),
        ):
            if table not in _POSTGRES_OWN:
                layout.setdefault(table, set()).add(column)
        indexes = {
            name
            for (name,) in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (here,)
            )
            if not name.endswith("_pkey")
        }
        row = conn.execute("SELECT version FROM hermes_schema").fetchone()
    assert row == (schema.SCHEMA_VERSION,)
    return layout, indexes


async def test_both_backends_end_with_the_same_tables_columns_and_indexes(
    tmp_path: Path,
    pg_url: str,  # noqa: F811
) -> None:
    path = tmp_path / "store.sqlite3"
    for where in (str(path), pg_url):
        await (await opened(where)).aclose()
    sqlite_tables, sqlite_indexes = _sqlite_layout(path)
    postgres_tables, postgres_indexes = _postgres_layout(pg_url)
    assert sqlite_tables == postgres_tables
    assert sqlite_indexes == postgres_indexes
    # Every table the statements use is there.
    assert {"responses", "response_events", "conversations", "response_approvals"} <= set(
        sqlite_tables
    )


def test_both_backends_migrate_to_the_same_version() -> None:
    assert schema.SQLITE_MIGRATIONS[-1][0] == schema.SCHEMA_VERSION
    assert schema.POSTGRES_MIGRATIONS[-1][0] == schema.SCHEMA_VERSION
