"""The store's statements, written once for SQLite and PostgreSQL.

Each function runs inside one transaction of the caller's connection (a
worker thread's, never the event loop's). The SQL keeps to what both
databases accept (``?`` placeholders, which the PostgreSQL connection
rewrites; ``INSERT … ON CONFLICT``; no ``%``): the two backends differ in
how they connect, create their schema and name their errors, not in what
they store. Where PostgreSQL runs two transactions side by side and they
touch the same row (a response and the one it continues), the statements
lock that row (:func:`_locking`); SQLite runs one write at a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from ..wire.messages import Message
from ..wire.responses_out import ResponseEvent
from ..wire.responses_replay import output_text, replay_output
from ..wire.responses_types import OutputItem, ResponseObject, ResponseStreamEvent
from .base import Claim, HeldApproval, Signal, StoredItem, StoredResponse, dumps
from .orphans import orphan_end
from .runners import Runner, RunnerRow, is_dead

__all__ = ["Cursor", "Db", "Rows"]

Rows = list[tuple[str, int, str, str]]
"""Stored stream events: (response id, sequence number, type, data)."""

# Where an indexed item is kept: 0 the input items, 1 the response's output.
ITEM_SOURCES = ("input_items", "response")
# No limit, as both databases write it.
_ALL = 2**62
# The longest previous_response_id chain read back (a guard against a
# damaged store, far beyond any real conversation).
MAX_CHAIN = 1_000_000


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Any: ...


class Db(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ...) -> Cursor: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any: ...


INDEX_ITEM = (
    "INSERT INTO response_items VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (owner, item_id, response_id) DO NOTHING"
)
# Output items of a response, indexed under its own owner and age; nothing
# when the row is gone (deleted while its turn ran).
INDEX_OUTPUT = (
    "INSERT INTO response_items "
    "SELECT owner, ?, id, created_at, 1 FROM responses WHERE id = ? "
    "ON CONFLICT (owner, item_id, response_id) DO NOTHING"
)
FORGET_ITEMS = "DELETE FROM response_items WHERE response_id = ?"
INSERT_EVENTS = (
    "INSERT INTO response_events VALUES (?, ?, ?, ?) ON CONFLICT (response_id, seq) DO NOTHING"
)
# Reservations were written by versions before schema 6 (their clients saw
# events before they were stored); recovery still numbers above one.
FORGET_RESERVATION = "DELETE FROM response_reservations WHERE response_id = ?"
FINISH_RESPONSE = (
    "UPDATE responses SET status = ?, updated_at = ?, response = ?, messages = ?, "
    "runner = NULL WHERE id = ?"
)
_ITEM_MARKS = ("response.output_item.added", "response.output_item.done")
# A response's whole conversation: its own messages after those of the
# responses it continues, oldest first.
CHAIN = (
    "WITH RECURSIVE chain (id, parent_id, depth) AS ("
    "SELECT id, parent_id, 0 FROM responses WHERE id = ? "
    "UNION ALL SELECT r.id, r.parent_id, chain.depth + 1 FROM responses r, chain "
    "WHERE r.id = chain.parent_id AND chain.depth < ?) "
    "SELECT r.messages FROM chain, responses r WHERE r.id = chain.id ORDER BY chain.depth DESC"
)


def _locking(db: Db, mode: str) -> str:
    """`` FOR SHARE`` / `` FOR UPDATE`` where the database runs writers
    side by side (PostgreSQL's connection says so), nothing for SQLite."""
    return f" FOR {mode}" if getattr(db, "row_locks", False) else ""


def event_rows(response_id: str, events: Sequence[ResponseEvent]) -> Rows:
    return [(response_id, e.sequence_number, e.type, e.data) for e in events]


def item_ids(items: Any) -> list[str]:
    """The ids of a list of items, skipping anything without a text id."""
    if not isinstance(items, list):
        return []
    return [
        item["id"] for item in items if isinstance(item, dict) and isinstance(item.get("id"), str)
    ]


def exists(db: Db, response_id: str) -> bool:
    return db.execute("SELECT 1 FROM responses WHERE id = ?", (response_id,)).fetchone() is not None


# -- responses ---------------------------------------------------------------


def create(db: Db, record: StoredResponse, now: float, rows: Rows) -> None:
    parent, inherited = None, 0
    if record.parent is not None and record.inherited > 0:
        # Locked until this row is in: a delete of the parent waits, then
        # hands its messages down to this one too (see delete).
        found = db.execute(
            "SELECT 1 FROM responses WHERE id = ? AND owner = ?" + _locking(db, "SHARE"),
            (record.parent, record.owner),
        ).fetchone()
        if found is not None:
            parent, inherited = record.parent, record.inherited
    db.execute(
        "INSERT INTO responses (id, owner, status, created_at, updated_at, background, "
        "response, messages, input_items, runner, parent_id, inherited) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.id,
            record.owner,
            record.status,
            record.created_at,
            now,
            int(record.background),
            dumps(record.response),
            dumps(record.messages[inherited:]),
            dumps(record.input_items),
            record.runner,
            parent,
            inherited,
        ),
    )
    db.executemany(
        INDEX_ITEM,
        [
            (record.owner, item_id, record.id, record.created_at, source)
            for source, ids in (
                (0, item_ids(record.input_items)),
                (1, item_ids(record.response.get("output"))),
            )
            for item_id in ids
        ],
    )
    db.executemany(INSERT_EVENTS, rows)


def append_events(db: Db, response_id: str, rows: Rows) -> None:
    # A response deleted while its turn ran keeps no events.
    if exists(db, response_id):
        db.executemany(INSERT_EVENTS, rows)


def append_grouped_events(db: Db, rows: dict[str, Rows]) -> None:
    for response_id, some in rows.items():
        append_events(db, response_id, some)


def finish(
    db: Db,
    response_id: str,
    *,
    status: str,
    response: ResponseObject,
    messages: list[Message],
    rows: Rows,
    now: float,
    rebase: bool = False,
) -> None:
    # The row first: a response deleted while its turn ran gets no events or
    # items back. Locked: a delete of its parent may hand messages down.
    row = db.execute(
        "SELECT inherited FROM responses WHERE id = ?" + _locking(db, "UPDATE"), (response_id,)
    ).fetchone()
    if row is not None:
        if rebase:
            # A compaction replaced the start of the conversation: it no
            # longer begins with the parent's messages, so it is stored
            # whole, continuing from nothing.
            db.execute(
                "UPDATE responses SET parent_id = NULL, inherited = 0 WHERE id = ?",
                (response_id,),
            )
        own = dumps(messages if rebase else messages[row[0] :])
        db.execute(FINISH_RESPONSE, (status, now, dumps(response), own, response_id))
        db.executemany(INSERT_EVENTS, rows)
        db.executemany(INDEX_OUTPUT, [(i, response_id) for i in item_ids(response.get("output"))])
    db.execute(FORGET_RESERVATION, (response_id,))


def get(db: Db, response_id: str, owner: str) -> StoredResponse | None:
    row = db.execute(
        "SELECT id, owner, status, created_at, response, input_items, "
        "background, runner, parent_id, inherited FROM responses WHERE id = ? AND owner = ?",
        (response_id, owner),
    ).fetchone()
    if row is None:
        return None
    # Written by this module, from typed values.
    response: ResponseObject = json.loads(row[4])
    if row[2] == "in_progress":
        # Run elsewhere: the output so far is in its stored events.
        output = stored_output(db, response_id)
        response.update({"output": output, "output_text": output_text(output)})
    return StoredResponse(
        id=row[0],
        owner=row[1],
        status=row[2],
        created_at=row[3],
        response=response,
        messages=conversation_of(db, response_id),
        input_items=json.loads(row[5]),
        background=bool(row[6]),
        runner=row[7],
        parent=row[8],
        inherited=row[9],
    )


def conversation_of(db: Db, response_id: str) -> list[Message]:
    """The whole conversation of a stored response: one query down its
    chain, each response's own messages decoded once."""
    messages: list[Message] = []
    for (own,) in db.execute(CHAIN, (response_id, MAX_CHAIN)):
        messages += json.loads(own)
    return messages


def find_items(db: Db, owner: str, wanted: list[str]) -> dict[str, StoredItem]:
    # Where each item is: the newest of the owner's responses holding it.
    newest: dict[str, tuple[float, str, int]] = {}
    # Both databases bound the parameters of one statement.
    for start in range(0, len(wanted), 500):
        batch = wanted[start : start + 500]
        marks = ", ".join("?" * len(batch))
        for item_id, response_id, created_at, source in db.execute(
            "SELECT item_id, response_id, created_at, source FROM response_items "
            f"WHERE owner = ? AND item_id IN ({marks})",
            (owner, *batch),
        ):
            place = (created_at, response_id, source)
            if item_id not in newest or place[:2] > newest[item_id][:2]:
                newest[item_id] = place
    # Each response's items are read and decoded once.
    by_place: dict[tuple[str, int], list[str]] = {}
    for item_id, (_, response_id, source) in newest.items():
        by_place.setdefault((response_id, source), []).append(item_id)
    found: dict[str, StoredItem] = {}
    for (response_id, source), ids in by_place.items():
        column = ITEM_SOURCES[source]
        stored = db.execute(
            f"SELECT {column} FROM responses WHERE id = ?", (response_id,)
        ).fetchone()
        if stored is None:
            continue
        value = json.loads(stored[0])
        # Written by this module, from typed items.
        items: list[StoredItem] | None = value if source == 0 else value.get("output")
        by_id = {
            item["id"]: item
            for item in items or []
            if isinstance(item, dict) and isinstance(item.get("id"), str)
        }
        found.update((i, by_id[i]) for i in ids if i in by_id)
    return found


def events_after(
    db: Db, response_id: str, after: int, limit: int | None = None
) -> list[tuple[int, str, str]]:
    return list(
        db.execute(
            "SELECT seq, type, data FROM response_events "
            "WHERE response_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (response_id, after, _ALL if limit is None else limit),
        ).fetchall()
    )


def delete(db: Db, response_id: str, owner: str) -> bool:
    if not _delete_one(db, response_id, owner):
        return False
    _forget_rest(db, [(response_id,)])
    return True


def _delete_one(db: Db, response_id: str, owner: str | None = None) -> bool:
    """Delete one response row; the responses continuing it take over its
    messages and its parent, so their conversations stay whole.

    The row goes first: on PostgreSQL that waits for a response being
    created on top of it (which holds it ``FOR SHARE``), and the children
    are read after, so that one is among them."""
    where, params = (
        ("id = ?", (response_id,))
        if owner is None
        else (
            "id = ? AND owner = ?",
            (response_id, owner),
        )
    )
    row = db.execute(
        f"DELETE FROM responses WHERE {where} RETURNING parent_id, messages", params
    ).fetchone()
    if row is None:
        return False
    parent, own_json = row
    children = db.execute(
        "SELECT id, messages, inherited FROM responses WHERE parent_id = ?"
        + _locking(db, "UPDATE"),
        (response_id,),
    ).fetchall()
    if children:
        own = json.loads(own_json)
        for child, messages, inherited in children:
            db.execute(
                "UPDATE responses SET parent_id = ?, inherited = ?, messages = ? WHERE id = ?",
                (parent, inherited - len(own), dumps(own + json.loads(messages)), child),
            )
    return True


def _forget_rest(db: Db, ids: list[tuple[str]]) -> None:
    db.executemany("DELETE FROM response_events WHERE response_id = ?", ids)
    db.executemany(FORGET_RESERVATION, ids)
    db.executemany(FORGET_ITEMS, ids)
    db.executemany(FORGET_APPROVALS, ids)


# -- approvals held for a later request -----------------------------------------

FORGET_APPROVALS = "DELETE FROM response_approvals WHERE response_id = ?"


def hold_approvals(db: Db, held: Sequence[HeldApproval]) -> None:
    db.executemany(
        "INSERT INTO response_approvals "
        "(id, owner, response_id, call_id, reason, expires_at) VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (id) DO NOTHING",
        [(h.id, h.owner, h.response_id, h.call_id, h.reason, h.expires_at) for h in held],
    )


def held_approval(db: Db, approval_id: str) -> HeldApproval | None:
    row = db.execute(
        "SELECT id, owner, response_id, call_id, reason, expires_at, answered_by "
        "FROM response_approvals WHERE id = ?",
        (approval_id,),
    ).fetchone()
    return None if row is None else HeldApproval(*row)


def sealing_key(db: Db, fresh: bytes) -> bytes:
    """The install's sealing key: the one stored, or ``fresh`` stored now
    (several processes may ask at once; the first write wins)."""
    db.execute(
        "INSERT INTO install_keys (name, secret) VALUES ('sealing', ?) "
        "ON CONFLICT (name) DO NOTHING",
        (fresh.hex(),),
    )
    row = db.execute("SELECT secret FROM install_keys WHERE name = 'sealing'").fetchone()
    return bytes.fromhex(row[0])


def take_approval(db: Db, approval_id: str, answered_by: str) -> bool:
    """Mark the approval answered, unless it was already: only one answer counts."""
    cursor = db.execute(
        "UPDATE response_approvals SET answered_by = ? WHERE id = ? AND answered_by IS NULL",
        (answered_by, approval_id),
    )
    return cursor.rowcount == 1


# -- approvals a turn waits on, by the process that asked -------------------------

APPROVAL_MEMORY = 3600.0
"""Seconds past its deadline a waiting approval's process is still known:
a late answer there hears how it ended, as that process remembers."""


def note_approval(db: Db, approval_id: str, runner: str, expires_at: float) -> None:
    db.execute(
        "INSERT INTO approval_holders (id, runner, expires_at) VALUES (?, ?, ?) "
        "ON CONFLICT (id) DO NOTHING",
        (approval_id, runner, expires_at),
    )


def approval_holder(db: Db, approval_id: str) -> str | None:
    row = db.execute("SELECT runner FROM approval_holders WHERE id = ?", (approval_id,)).fetchone()
    return None if row is None else str(row[0])


def forget_approval_holders(db: Db, gone: Sequence[tuple[str]], now: float) -> None:
    """Forget the approvals of processes that are gone, and those long past
    their deadline."""
    db.executemany("DELETE FROM approval_holders WHERE runner = ?", gone)
    db.execute("DELETE FROM approval_holders WHERE expires_at < ?", (now - APPROVAL_MEMORY,))


def prune(db: Db, cutoff: float, keep: int) -> int:
    # Live responses stay whatever their age: their turn still writes to them.
    old = db.execute(
        "SELECT id FROM responses WHERE status != 'in_progress' AND ("
        "created_at < ? OR id IN (SELECT id FROM responses "
        "ORDER BY created_at DESC LIMIT ? OFFSET ?))",
        (cutoff, _ALL, keep),
    ).fetchall()
    ids = [(row[0],) for row in old]
    for (response_id,) in ids:
        _delete_one(db, response_id)
    _forget_rest(db, ids)
    return len(ids)


def stored_output(db: Db, response_id: str) -> list[OutputItem]:
    """The output items the stored events had built. Deltas are read only
    from the first item still open on: most of a long response stays unread."""
    marks = db.execute(
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
    # Written by ResponseBuilder: the Responses events, and the project's
    # own hermes.* ones, which build no output and are left out here.
    events: list[ResponseStreamEvent] = [
        json.loads(data) for seq, _, data in marks if first_open is None or seq < first_open
    ]
    if first_open is not None:
        events += [
            json.loads(data)
            for type_, data in db.execute(
                "SELECT type, data FROM response_events "
                "WHERE response_id = ? AND seq >= ? ORDER BY seq",
                (response_id, first_open),
            ).fetchall()
            if not type_.startswith("hermes.")
        ]
    return replay_output(events)


def _recover_one(db: Db, response_id: str, response_json: str, now: float) -> None:
    """End one orphaned response as :func:`~.orphans.orphan_end` says, from
    its stored rows (the reservation a version before schema 6 left
    included)."""
    row = db.execute(
        "SELECT messages FROM responses WHERE id = ?" + _locking(db, "UPDATE"), (response_id,)
    ).fetchone()
    if row is None:
        return
    (last,) = db.execute(
        "SELECT MAX(seq) FROM response_events WHERE response_id = ?", (response_id,)
    ).fetchone()
    reservation = db.execute(
        "SELECT seq FROM response_reservations WHERE response_id = ?", (response_id,)
    ).fetchone()
    end = orphan_end(
        json.loads(response_json),
        stored_output(db, response_id),
        json.loads(row[0]),
        last_event=last,
        reservation=None if reservation is None else reservation[0],
    )
    db.execute(INSERT_EVENTS, (response_id, end.seq, "response.incomplete", dumps(end.event)))
    db.execute(
        FINISH_RESPONSE,
        ("incomplete", now, dumps(end.response), dumps(end.messages), response_id),
    )
    db.executemany(INDEX_OUTPUT, [(i, response_id) for i in item_ids(end.response["output"])])
    db.execute(FORGET_RESERVATION, (response_id,))


def compact_chains(db: Db) -> None:
    """Schema 5: responses stored before it hold their whole conversation,
    the previous response's included. Each finished one whose conversation
    starts with its ``previous_response_id``'s keeps only its own part and
    references that one. Newest first, one pair at a time: the previous
    response still holds its whole conversation when it is compared."""
    rows = db.execute(
        "SELECT id, owner FROM responses WHERE parent_id IS NULL AND status != 'in_progress' "
        "ORDER BY created_at DESC, id DESC"
    ).fetchall()
    for response_id, owner in rows:
        (response_json, messages_json) = db.execute(
            "SELECT response, messages FROM responses WHERE id = ?", (response_id,)
        ).fetchone()
        previous = json.loads(response_json).get("previous_response_id")
        if (
            not isinstance(previous, str)
            or not db.execute(
                "SELECT 1 FROM responses WHERE id = ? AND owner = ?", (previous, owner)
            ).fetchone()
        ):
            continue
        before = conversation_of(db, previous)
        messages = json.loads(messages_json)
        if before and messages[: len(before)] == before:
            db.execute(
                "UPDATE responses SET parent_id = ?, inherited = ?, messages = ? WHERE id = ?",
                (previous, len(before), dumps(messages[len(before) :]), response_id),
            )


# -- runners -------------------------------------------------------------------


def _runner_rows(db: Db) -> dict[str, RunnerRow]:
    return {
        row[0]: RunnerRow(row[0], row[1], int(row[2]), float(row[3]))
        for row in db.execute("SELECT id, host, pid, seen_at FROM runners").fetchall()
    }


def dead_runners(
    db: Db, me: Runner, now: float, candidates: Iterable[str | None]
) -> set[str | None]:
    rows = _runner_rows(db)
    return {c for c in candidates if c is None or is_dead(rows.get(c), me, now)}


def live_runners(db: Db, me: Runner, now: float) -> list[str]:
    """The other processes sharing the store that are alive, by id."""
    rows = _runner_rows(db)
    return sorted(i for i, row in rows.items() if i != me.id and not is_dead(row, me, now))


def heartbeat(db: Db, me: Runner, now: float) -> None:
    db.execute(
        "INSERT INTO runners VALUES (?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET seen_at = ?",
        (me.id, me.host, me.pid, now, now),
    )


def retire(db: Db, me: Runner) -> None:
    db.execute("DELETE FROM runners WHERE id = ?", (me.id,))
    db.execute("DELETE FROM signals WHERE runner = ?", (me.id,))
    db.execute("DELETE FROM approval_holders WHERE runner = ?", (me.id,))


def recover(db: Db, me: Runner, now: float) -> int:
    """End the running responses of dead runners; forget those runners."""
    rows = db.execute(
        "SELECT id, response, runner FROM responses WHERE status = 'in_progress'"
    ).fetchall()
    dead = dead_runners(db, me, now, {row[2] for row in rows})
    count = 0
    for response_id, response_json, runner in rows:
        if runner in dead:
            _recover_one(db, response_id, response_json, now)
            count += 1
    gone = [(runner_id,) for runner_id, row in _runner_rows(db).items() if is_dead(row, me, now)]
    db.executemany("DELETE FROM runners WHERE id = ?", gone)
    db.executemany("DELETE FROM signals WHERE runner = ?", gone)
    forget_approval_holders(db, gone, now)
    return count


# -- conversations -----------------------------------------------------------
# A conversation is its ``conversations`` row (the claim, ``message_count``,
# ``first_seq``) and one ``conversation_messages`` row per message, numbered
# on from ``first_seq``: a turn that only added messages writes those, and
# one that dropped the oldest deletes theirs, whatever the history's length.

INSERT_MESSAGE = "INSERT INTO conversation_messages (key, seq, message) VALUES (?, ?, ?)"
FORGET_MESSAGES = "DELETE FROM conversation_messages WHERE key = ?"


def _messages(db: Db, key: str) -> list[Message]:
    rows = db.execute(
        "SELECT message FROM conversation_messages WHERE key = ? ORDER BY seq", (key,)
    ).fetchall()
    return [json.loads(row[0]) for row in rows]


def claim_conversation(db: Db, key: str, me: Runner, turn: str, now: float) -> Claim:
    db.execute(
        "INSERT INTO conversations (key, updated_at, runner, turn, message_count, first_seq) "
        "VALUES (?, ?, NULL, NULL, 0, 0) ON CONFLICT (key) DO NOTHING",
        (key, now),
    )
    (runner,) = db.execute("SELECT runner FROM conversations WHERE key = ?", (key,)).fetchone()
    if runner is not None and runner != me.id and not dead_runners(db, me, now, [runner]):
        return Claim(None, busy=runner)
    # Only if nobody took it meanwhile (PostgreSQL runs claims side by side).
    row = db.execute(
        "UPDATE conversations SET runner = ?, turn = ?, updated_at = ? "
        "WHERE key = ? AND runner IS NOT DISTINCT FROM ? RETURNING key",
        (me.id, turn, now, key, runner),
    ).fetchone()
    if row is None:
        (holder,) = db.execute("SELECT runner FROM conversations WHERE key = ?", (key,)).fetchone()
        return Claim(None, busy=holder or "unknown")
    return Claim(_messages(db, key))


def release_conversation(
    db: Db,
    key: str,
    turn: str,
    messages: list[Message] | None,
    *,
    kept: int,
    dropped: int,
    now: float,
) -> bool:
    """End ``turn``'s hold. With ``messages``, they are the history now:
    the claimed history without its first ``dropped``, of which ``kept``
    stay as they were, then new ones. Only those are written and only the
    dropped are deleted; ``kept=0`` replaces the whole history (a new base)."""
    if messages is None:
        cursor = db.execute(
            "UPDATE conversations SET runner = NULL, turn = NULL, updated_at = ? "
            "WHERE key = ? AND turn = ?",
            (now, key, turn),
        )
        return bool(cursor.rowcount)
    row = db.execute(
        "SELECT first_seq, message_count FROM conversations WHERE key = ? AND turn = ?"
        + _locking(db, "UPDATE"),
        (key, turn),
    ).fetchone()
    if row is None:
        return False
    first, count = int(row[0]), int(row[1])
    dropped = max(0, min(dropped, count))
    kept = max(0, min(kept, count - dropped, len(messages)))
    if kept == 0:
        db.execute(FORGET_MESSAGES, (key,))
        first = 0
    else:
        first += dropped
        db.execute(
            "DELETE FROM conversation_messages WHERE key = ? AND (seq < ? OR seq >= ?)",
            (key, first, first + kept),
        )
    db.executemany(
        INSERT_MESSAGE,
        [(key, seq, dumps(m)) for seq, m in enumerate(messages[kept:], first + kept)],
    )
    db.execute(
        "UPDATE conversations SET first_seq = ?, message_count = ?, runner = NULL, turn = NULL, "
        "updated_at = ? WHERE key = ?",
        (first, len(messages), now, key),
    )
    return True


def conversation(db: Db, key: str) -> list[Message] | None:
    row = db.execute("SELECT 1 FROM conversations WHERE key = ?", (key,)).fetchone()
    return None if row is None else _messages(db, key)


def delete_conversation(db: Db, key: str) -> bool:
    db.execute(FORGET_MESSAGES, (key,))
    return bool(db.execute("DELETE FROM conversations WHERE key = ?", (key,)).rowcount)


def prune_conversations(db: Db, prefix: str, cutoff: float, keep: int) -> int:
    # A prefix compared as text, not with LIKE: a key may hold '%' or '_'.
    where = "substr(key, 1, ?) = ?"
    scope = (len(prefix), prefix)
    old = db.execute(
        f"SELECT key FROM conversations WHERE {where} AND runner IS NULL AND ("
        f"updated_at < ? OR key IN (SELECT key FROM conversations WHERE {where} "
        "ORDER BY updated_at DESC LIMIT ? OFFSET ?))",
        (*scope, cutoff, *scope, _ALL, keep),
    ).fetchall()
    keys = [(row[0],) for row in old]
    db.executemany(FORGET_MESSAGES, keys)
    db.executemany("DELETE FROM conversations WHERE key = ?", keys)
    return len(old)


def split_conversations(db: Db) -> None:
    """Schema 8: a conversation stored before it is one JSON list in
    ``conversations.messages``; its messages become rows. One conversation
    at a time, so a large store is never in memory at once."""
    keys = [row[0] for row in db.execute("SELECT key FROM conversations").fetchall()]
    for key in keys:
        (messages_json,) = db.execute(
            "SELECT messages FROM conversations WHERE key = ?", (key,)
        ).fetchone()
        messages = json.loads(messages_json)
        if not isinstance(messages, list):
            messages = []
        db.executemany(INSERT_MESSAGE, [(key, seq, dumps(m)) for seq, m in enumerate(messages)])
        db.execute("UPDATE conversations SET message_count = ? WHERE key = ?", (len(messages), key))


# -- chat settings ---------------------------------------------------------------


def chat_setting(db: Db, key: str) -> str | None:
    row = db.execute("SELECT value FROM chat_settings WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def put_chat_setting(db: Db, key: str, value: str, now: float) -> None:
    db.execute(
        "INSERT INTO chat_settings VALUES (?, ?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        (key, value, now),
    )


# -- signals -------------------------------------------------------------------


def send_signal(db: Db, runner: str, signal: Signal, now: float) -> None:
    db.execute(
        "INSERT INTO signals (runner, kind, target, created_at) VALUES (?, ?, ?, ?)",
        (runner, signal.kind, signal.target, now),
    )


def pending_signals(db: Db, me: Runner) -> list[tuple[int, str, str]]:
    return list(
        db.execute(
            "SELECT id, kind, target FROM signals WHERE runner = ? ORDER BY id", (me.id,)
        ).fetchall()
    )


def forget_signals(db: Db, ids: list[int]) -> None:
    db.executemany("DELETE FROM signals WHERE id = ?", [(i,) for i in ids])
