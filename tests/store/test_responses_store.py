"""SQLiteStore: rows, owners, events, retention, crash recovery."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

from hermes_trio.config import Config, StoreConfig
from hermes_trio.events import MessageChunk, MessageStop
from hermes_trio.store import (
    DB_FILENAME,
    SQLiteStore,
    Store,
    StoredResponse,
    StoreError,
    StoreOpenError,
    open_store,
    owner_scope,
    store_failure,
)
from hermes_trio.store.shared import PRUNE_EVERY
from hermes_trio.wire.responses_out import ResponseBuilder, ResponseEvent

OWNER = owner_scope("key-a")


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


GONE = "otherhost/boot:4242:dead"


def record(
    rid: str,
    *,
    status: str = "completed",
    created_at: float = 1_700_000_000.0,
    owner: str = OWNER,
    **kwargs: Any,
) -> StoredResponse:
    return StoredResponse(
        id=rid,
        owner=owner,
        status=status,
        created_at=created_at,
        response={"id": rid, "status": status, "output": []},
        messages=[{"role": "user", "content": f"hello {rid}"}],
        input_items=[{"id": "msg_1", "type": "message", "role": "user", "content": []}],
        **kwargs,
    )


def event(seq: int, type_: str = "response.output_text.delta", **fields: Any) -> ResponseEvent:
    return ResponseEvent.make(
        seq, type_, json.dumps({"type": type_, **fields, "sequence_number": seq})
    )


async def opened_store(tmp_path: Path, **kwargs: Any) -> SQLiteStore:
    store = SQLiteStore(tmp_path / "db" / DB_FILENAME, **kwargs)
    await store.open()
    return store


async def test_round_trip_and_owner_scope(tmp_path) -> None:
    store = await opened_store(tmp_path)
    try:
        await store.create(record("resp_1", background=True))
        got = await store.get("resp_1", OWNER)
        assert got == record("resp_1", background=True)
        assert await store.get("resp_1", owner_scope("key-b")) is None
        assert await store.get("resp_missing", OWNER) is None
        assert not await store.delete("resp_1", owner_scope("key-b"))
        assert await store.delete("resp_1", OWNER)
        assert await store.get("resp_1", OWNER) is None
        assert not await store.delete("resp_1", OWNER)
    finally:
        await store.aclose()
    assert owner_scope("key-a") != owner_scope("key-b")
    assert "key-a" not in owner_scope("key-a")
    assert isinstance(store, Store)


async def test_file_is_wal_and_under_the_data_dir(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    config = Config(store=StoreConfig(data_dir="~/nested/data"))
    async with open_store(config) as store:
        await store.create(record("resp_1"))
    path = tmp_path / "nested" / "data" / DB_FILENAME
    assert path.is_file()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT id, status FROM responses").fetchall() == [
            ("resp_1", "completed")
        ]
    finally:
        conn.close()
    with pytest.raises(RuntimeError, match="closed"):
        await store.get("resp_1", OWNER)


async def test_events_append_replay_and_finish(tmp_path) -> None:
    store = await opened_store(tmp_path)
    try:
        await store.create(record("resp_1", status="in_progress"))
        await store.append_events("resp_1", [event(0), event(1)])
        # Writing an event again (a retried batch) changes nothing.
        await store.append_events("resp_1", [event(1, delta="other"), event(2)])
        await store.append_events("resp_1", [])
        assert [e.sequence_number for e in await store.events_after("resp_1", -1)] == [0, 1, 2]
        replay = await store.events_after("resp_1", 0)
        assert [e.sequence_number for e in replay] == [1, 2]
        assert replay[0] == event(1)
        assert replay[0].frame.startswith(b"event: response.output_text.delta\nid: 1\n")
        await store.finish(
            "resp_1",
            status="completed",
            response={"id": "resp_1", "status": "completed"},
            messages=[{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}],
            events=[event(2), event(3, "response.completed")],
        )
        row = await store.get("resp_1", OWNER)
        assert row is not None and row.status == "completed"
        assert row.response == {"id": "resp_1", "status": "completed"}
        assert row.messages[-1] == {"role": "assistant", "content": "y"}
        assert [e.type for e in await store.events_after("resp_1", 2)] == ["response.completed"]
        assert await store.delete("resp_1", OWNER)
        assert await store.events_after("resp_1", -1) == []
    finally:
        await store.aclose()


async def test_concurrent_writers_share_one_connection(tmp_path) -> None:
    store = await opened_store(tmp_path)
    try:
        async with trio.open_nursery() as nursery:
            for n in range(20):
                nursery.start_soon(store.create, record(f"resp_{n}", status="in_progress"))
        async with trio.open_nursery() as nursery:
            for n in range(20):
                nursery.start_soon(store.append_events, f"resp_{n}", [event(0), event(1)])
        for n in range(20):
            assert len(await store.events_after(f"resp_{n}", -1)) == 2
    finally:
        await store.aclose()


async def test_recovery_marks_orphans_incomplete(tmp_path) -> None:
    builder = ResponseBuilder("resp_crash", created_at=1, model="m")
    events = builder.start()
    for piece in ("Half ", "an answer"):
        events += builder.feed(MessageChunk(piece))
    events += builder.feed(MessageStop(final=False))
    events += builder.feed(MessageChunk("still open"))
    store = await opened_store(tmp_path)
    try:
        await store.create(record("resp_done"))
        # Run by a process that is gone (no heartbeat ever).
        crashed = record("resp_crash", status="in_progress", runner=GONE)
        crashed.response = builder.snapshot()
        await store.create(crashed)
        await store.create(record("resp_empty", status="in_progress", runner=GONE))
        await store.append_events("resp_crash", events)
        assert await store.recover_interrupted() == 2
        assert await store.recover_interrupted() == 0
        row = await store.get("resp_crash", OWNER)
        done = await store.get("resp_done", OWNER)
        empty = await store.get("resp_empty", OWNER)
        replay = await store.events_after("resp_crash", -1)
        empty_replay = await store.events_after("resp_empty", -1)
    finally:
        await store.aclose()
    assert done == record("resp_done")
    assert row is not None and row.status == "incomplete"
    assert row.response["status"] == "incomplete"
    # The finished item as it was done; the open one from its deltas.
    output = row.response["output"]
    assert [item["content"][0]["text"] for item in output] == ["Half an answer", "still open"]
    assert [item["status"] for item in output] == ["completed", "incomplete"]
    assert row.response["output_text"] == "Half an answerstill open"
    assert row.messages[-1] == {
        "role": "assistant",
        "content": "Half an answerstill open [interrupted]",
    }
    assert [e.sequence_number for e in replay] == list(range(len(events) + 1))
    last = replay[-1].payload()
    assert last["type"] == "response.incomplete"
    assert last["response"]["status"] == "incomplete"
    assert empty is not None and empty.status == "incomplete"
    assert empty.messages[-1] == {"role": "assistant", "content": "[interrupted]"}
    assert [e.type for e in empty_replay] == ["response.incomplete"]


async def test_retention_by_rows_and_age(tmp_path) -> None:
    clock = Clock()
    store = await opened_store(tmp_path, max_rows=3, max_age_days=1.0, clock=clock)
    try:
        for n in range(5):
            await store.create(record(f"resp_{n}", created_at=clock.now + n))
            await store.append_events(f"resp_{n}", [event(0)])
        await store.create(record("resp_live", status="in_progress", created_at=clock.now - 1e6))
        assert await store.prune() == 2
        kept = [n for n in range(5) if await store.get(f"resp_{n}", OWNER) is not None]
        assert kept == [2, 3, 4]
        assert await store.events_after("resp_0", -1) == []
        assert len(await store.events_after("resp_4", -1)) == 1
        # A running response is never pruned, however old.
        assert await store.get("resp_live", OWNER) is not None
        clock.now += 86400 + 3.5
        assert await store.prune() == 2
        assert await store.get("resp_4", OWNER) is not None
        assert await store.get("resp_3", OWNER) is None
    finally:
        await store.aclose()


async def test_retention_runs_as_rows_arrive(tmp_path) -> None:
    clock = Clock()
    store = await opened_store(tmp_path, max_rows=5, clock=clock)
    try:
        for n in range(PRUNE_EVERY):
            await store.create(record(f"resp_{n}", created_at=clock.now + n))
        assert await store.get(f"resp_{PRUNE_EVERY - 1}", OWNER) is not None
        assert await store.get("resp_0", OWNER) is None
        assert await store.prune() == 0
    finally:
        await store.aclose()


async def test_retention_applies_at_open(tmp_path) -> None:
    clock = Clock()
    store = await opened_store(tmp_path, clock=clock)
    await store.create(record("resp_old", created_at=clock.now - 40 * 86400))
    await store.create(record("resp_new", created_at=clock.now))
    await store.aclose()
    store = await opened_store(tmp_path, max_age_days=30, clock=clock)
    try:
        assert await store.get("resp_old", OWNER) is None
        assert await store.get("resp_new", OWNER) is not None
    finally:
        await store.aclose()


async def test_a_cancelled_write_still_completes(tmp_path) -> None:
    store = await opened_store(tmp_path)
    try:
        with trio.CancelScope() as scope:
            scope.cancel()
            # Cancelled before it starts: nothing is written, nothing breaks.
            await store.create(record("resp_never"))
        assert await store.get("resp_never", OWNER) is None
        await store.create(record("resp_after"))
        assert await store.get("resp_after", OWNER) is not None
    finally:
        await store.aclose()


async def test_recovery_numbers_its_ending_above_an_old_reservation(tmp_path) -> None:
    store = await opened_store(tmp_path)
    try:
        await store.create(record("resp_r", status="in_progress", runner=GONE))
        await store.append_events("resp_r", [event(0), event(1)])

        def reserve(seq: int, response_id: str) -> Any:
            def run(conn: sqlite3.Connection) -> None:
                conn.execute(
                    "INSERT INTO response_reservations VALUES (?, ?)", (response_id, seq)
                )

            return store._write(run)

        # A version before schema 6 ran it: clients may have seen up to 5000.
        await reserve(5000, "resp_r")
        await store.create(record("resp_done", status="in_progress", runner=GONE))
        await reserve(10, "resp_done")
        await store.finish(
            "resp_done", status="completed", response={"id": "resp_done"}, messages=[]
        )
        assert await store.recover_interrupted() == 1
        replay = await store.events_after("resp_r", -1)
        assert [e.sequence_number for e in replay] == [0, 1, 5001]
        assert replay[-1].type == "response.incomplete"
        assert replay[-1].payload()["sequence_number"] == 5001
        # A resume from anything a client saw ends with the ending.
        assert [e.type for e in await store.events_after("resp_r", 4999)] == [
            "response.incomplete"
        ]

        def reservations(conn: sqlite3.Connection) -> list[tuple[str, int]]:
            return conn.execute("SELECT * FROM response_reservations").fetchall()

        # Finished responses keep no reservation.
        assert await store._run(reservations) == []
    finally:
        await store.aclose()


async def test_refusals_are_store_errors_with_a_code(tmp_path, caplog) -> None:
    store = await opened_store(tmp_path)
    try:
        await store.create(record("resp_1", status="in_progress"))

        def pragma(statement: str) -> Any:
            return store._run(lambda conn: conn.execute(statement).fetchone(), write=False)

        (pages,) = await pragma("PRAGMA page_count")
        await pragma(f"PRAGMA max_page_count={pages}")
        big = [event(n, delta="x" * 50_000) for n in range(4)]
        # SQLite ends the transaction itself here: the error is still "full",
        # not a failed ROLLBACK.
        with pytest.raises(StoreError) as full:
            await store.append_events("resp_1", big)
        with pytest.raises(StoreError):
            await store.append_events("resp_1", big)
        await pragma("PRAGMA max_page_count=1073741823")
        await store.append_events("resp_1", big)
        await pragma("PRAGMA query_only=1")
        with pytest.raises(StoreError) as read_only:
            await store.append_events("resp_1", [event(9)])
        # Reads go on.
        assert len(await store.events_after("resp_1", -1)) == 4
        await pragma("PRAGMA query_only=0")
    finally:
        await store.aclose()
    assert (full.value.status, full.value.code) == (503, "store_full")
    assert read_only.value.code == "store_read_only"
    messages = [r.getMessage() for r in caplog.records if r.name == "hermes_trio.server.store"]
    # Two refusals while full: one line; then "works again"; then read-only.
    assert len(messages) == 3, messages
    assert "SQLITE_FULL" in messages[0] and "database or disk is full" in messages[0]
    assert "works again" in messages[1]
    assert "SQLITE_READONLY" in messages[2]


def test_failure_codes_of_real_sqlite_errors(tmp_path) -> None:
    path = tmp_path / "x.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    errors: dict[str, sqlite3.Error] = {}
    ro = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        ro.execute("INSERT INTO t VALUES (1)")
    except sqlite3.Error as exc:
        errors["store_read_only"] = exc
    ro.close()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all\n" * 100)
    bad = sqlite3.connect(garbage)
    try:
        bad.execute("SELECT * FROM sqlite_master")
    except sqlite3.Error as exc:
        errors["store_corrupt"] = exc
    bad.close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    waiter = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        waiter.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        errors["store_busy"] = exc
    holder.close()
    waiter.close()
    assert set(errors) == {"store_read_only", "store_corrupt", "store_busy"}
    for code, exc in errors.items():
        assert store_failure(exc)[0] == code
    assert store_failure(sqlite3.ProgrammingError("closed")) == (
        "store_error",
        "the response store failed",
    )


async def test_open_store_refusals_are_one_line(tmp_path) -> None:
    as_file = tmp_path / "file"
    as_file.write_text("")
    under_file = as_file / "sub"
    for data_dir in (as_file, under_file):
        with pytest.raises(StoreOpenError) as refused:
            async with open_store(Config(store=StoreConfig(data_dir=str(data_dir)))):
                pass
        assert str(refused.value) == (
            f"store.data_dir {data_dir} is not a directory "
            "(set store.data_dir or HERMES_DATA_DIR to a writable directory)"
        )
    config = Config(store=StoreConfig(data_dir=str(tmp_path / "data")))
    # The same directory twice (two workers, two servers): one shared store.
    async with open_store(config) as first, open_store(config) as second:
        await first.create(record("resp_shared"))
        assert await second.get("resp_shared", OWNER) == record("resp_shared")


async def test_a_damaged_store_file_is_one_line(tmp_path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / DB_FILENAME).write_bytes(b"this is not an SQLite database\n" * 200)
    with pytest.raises(StoreOpenError) as refused:
        async with open_store(Config(store=StoreConfig(data_dir=str(data_dir)))):
            pass
    assert str(refused.value) == (
        f"store.data_dir {data_dir}: {DB_FILENAME} is not a SQLite database or is damaged; "
        "move it away to start with an empty store (file is not a database)"
    )
    # The directory is free again for a fixed store.
    (data_dir / DB_FILENAME).unlink()
    async with open_store(Config(store=StoreConfig(data_dir=str(data_dir)))):
        pass
