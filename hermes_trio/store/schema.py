"""The whole schema of both backends and how an older one is brought up to
date, in one place: a change to the schema is a new version here, with its
steps for SQLite and for PostgreSQL side by side (``tests/server/
test_store_schema.py`` checks both end with the same tables and columns).

A step is a statement, or a function run on the connection in the same
transaction (rows the new layout stores differently). :mod:`.sqlite` keeps
the version in the file's ``user_version``, :mod:`.postgres` in the row of
``hermes_schema``; each runs the steps above the version it finds.
"""

from __future__ import annotations

from collections.abc import Callable

from . import statements as sql

__all__ = [
    "POSTGRES_MIGRATIONS",
    "SCHEMA_VERSION",
    "SQLITE_MIGRATIONS",
    "Migration",
    "migrate_from",
]

SCHEMA_VERSION = 10
"""2: events, reservations. 3: the item index. 4: runners, conversations,
signals. 5: chat settings. 6: a response's own messages and a reference to the one it
continues (``parent_id``, ``inherited``), instead of the whole conversation
in every row. 7: the approvals a response holds. 8: a conversation's
messages as rows (``conversation_messages``), so a turn writes only its own
messages, not the whole history again. 9: the install's keys (the sealing
key of ``compaction`` items), shared by every process on the store. 10: which process asked
each waiting approval."""

Step = str | Callable[[sql.Db], None]
Migration = tuple[int, list[Step]]
"""A schema version and the steps that bring the one before it there."""


def migrate_from(
    version: int,
    migrations: list[Migration],
    execute: Callable[[str], object],
    db: sql.Db,
) -> None:
    """Run, in order, the steps of every version above ``version``: a
    statement through ``execute``, a function on ``db`` (the same
    connection, in the caller's transaction)."""
    for target, steps in migrations:
        if version < target:
            for step in steps:
                if isinstance(step, str):
                    execute(step)
                else:
                    step(db)


# -- both --------------------------------------------------------------

# Version 9 (8 is the conversation rows'): one row per key of the install.
_INSTALL_KEYS = (
    "CREATE TABLE IF NOT EXISTS install_keys (name TEXT PRIMARY KEY, secret TEXT NOT NULL)"
)


# -- SQLite ------------------------------------------------------------

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

# A conversation's messages, one row each, numbered on from ``first_seq``
# (the ``conversations`` row keeps the claim and how many there are), so
# dropping the oldest turns deletes rows and renumbers none. SQLite drops a
# column only from 3.35 on: the table is built again without ``messages``.
_SCHEMA_V8_BEFORE = """
CREATE TABLE conversation_messages (
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (key, seq)
) WITHOUT ROWID;
ALTER TABLE conversations ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN first_seq INTEGER NOT NULL DEFAULT 0
"""
_SCHEMA_V8_AFTER = """
CREATE TABLE conversations_v8 (
    key TEXT PRIMARY KEY,
    updated_at REAL NOT NULL,
    runner TEXT,
    turn TEXT,
    message_count INTEGER NOT NULL DEFAULT 0,
    first_seq INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO conversations_v8
    SELECT key, updated_at, runner, turn, message_count, first_seq FROM conversations;
DROP TABLE conversations;
ALTER TABLE conversations_v8 RENAME TO conversations;
CREATE INDEX conversations_by_age ON conversations (updated_at)
"""

# Which process asked each approval a turn waits on, so an answer that
# reaches another process goes to that one alone, and an id nobody asked is
# known to be unknown at once.
_SCHEMA_V10 = """
CREATE TABLE approval_holders (
    id TEXT PRIMARY KEY,
    runner TEXT NOT NULL,
    expires_at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX approval_holders_by_expiry ON approval_holders (expires_at);
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

# The SQLite file: version -> the steps that bring it from the one before.
SQLITE_MIGRATIONS: list[Migration] = [
    (3, [*_statements(_SCHEMA_V3), *_BACKFILL_ITEMS]),
    (4, [*_statements(_SCHEMA_V4)]),
    (5, [*_statements(_SCHEMA_V5_CHAT_SETTINGS)]),
    (6, [*_statements(_SCHEMA_V6), sql.compact_chains]),
    (7, [*_statements(_SCHEMA_V7)]),
    (
        8,
        [
            *_statements(_SCHEMA_V8_BEFORE),
            sql.split_conversations,
            *_statements(_SCHEMA_V8_AFTER),
        ],
    ),
    (9, [_INSTALL_KEYS]),
    (10, [*_statements(_SCHEMA_V10)]),
]


# -- PostgreSQL --------------------------------------------------------

_POSTGRES_V4 = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    background INTEGER NOT NULL DEFAULT 0,
    response TEXT NOT NULL,
    messages TEXT NOT NULL,
    input_items TEXT NOT NULL,
    runner TEXT
);
CREATE INDEX IF NOT EXISTS responses_by_age ON responses (created_at);
CREATE INDEX IF NOT EXISTS responses_by_status ON responses (status);
CREATE TABLE IF NOT EXISTS response_events (
    response_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (response_id, seq)
);
CREATE TABLE IF NOT EXISTS response_reservations (
    response_id TEXT PRIMARY KEY,
    seq BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS response_items (
    owner TEXT NOT NULL,
    item_id TEXT NOT NULL,
    response_id TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    source INTEGER NOT NULL,
    PRIMARY KEY (owner, item_id, response_id)
);
CREATE INDEX IF NOT EXISTS response_items_by_response ON response_items (response_id);
CREATE TABLE IF NOT EXISTS conversations (
    key TEXT PRIMARY KEY,
    messages TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    runner TEXT,
    turn TEXT
);
CREATE INDEX IF NOT EXISTS conversations_by_age ON conversations (updated_at);
CREATE TABLE IF NOT EXISTS runners (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    seen_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS signals (
    id BIGSERIAL PRIMARY KEY,
    runner TEXT NOT NULL,
    kind TEXT NOT NULL,
    target TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS signals_by_runner ON signals (runner)
"""
# version -> the statements that bring the schema from the one before to it
# (or functions run on the connection). The first PostgreSQL schema started
# at the SQLite file's version 4.
POSTGRES_MIGRATIONS: list[Migration] = [
    (4, [part.strip() for part in _POSTGRES_V4.split(";") if part.strip()]),
    (
        5,
        [
            "CREATE TABLE IF NOT EXISTS chat_settings (key TEXT PRIMARY KEY, "
            "value TEXT NOT NULL, updated_at DOUBLE PRECISION NOT NULL)"
        ],
    ),
    (
        6,
        [
            "ALTER TABLE responses ADD COLUMN parent_id TEXT",
            "ALTER TABLE responses ADD COLUMN inherited INTEGER NOT NULL DEFAULT 0",
            "CREATE INDEX responses_by_parent ON responses (parent_id)",
            sql.compact_chains,
        ],
    ),
    (
        7,
        [
            "CREATE TABLE response_approvals (id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
            "response_id TEXT NOT NULL, call_id TEXT NOT NULL, reason TEXT NOT NULL, "
            "expires_at DOUBLE PRECISION NOT NULL, answered_by TEXT)",
            "CREATE INDEX response_approvals_by_response ON response_approvals (response_id)",
        ],
    ),
    (
        8,
        [
            "CREATE TABLE conversation_messages (key TEXT NOT NULL, seq BIGINT NOT NULL, "
            "message TEXT NOT NULL, PRIMARY KEY (key, seq))",
            "ALTER TABLE conversations ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE conversations ADD COLUMN first_seq BIGINT NOT NULL DEFAULT 0",
            sql.split_conversations,
            "ALTER TABLE conversations DROP COLUMN messages",
        ],
    ),
    (9, [_INSTALL_KEYS]),
    (
        10,
        [
            "CREATE TABLE approval_holders (id TEXT PRIMARY KEY, runner TEXT NOT NULL, "
            "expires_at DOUBLE PRECISION NOT NULL)",
            "CREATE INDEX approval_holders_by_expiry ON approval_holders (expires_at)",
        ],
    ),
]
