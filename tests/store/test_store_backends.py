"""The store's contract, run against both backends: the SQLite file and a
real PostgreSQL (each test in a schema of its own, dropped after)."""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio

from hermes_trio.config import Config, StoreConfig
from hermes_trio.events import MessageChunk, MessageStop, TurnFinished
from hermes_trio.store import (
    PostgresStore,
    Signal,
    SQLiteStore,
    StoredResponse,
    StoreOpenError,
    open_store,
    owner_scope,
)
from hermes_trio.store.runners import Runner
from hermes_trio.store.shared import SQLStore
from hermes_trio.wire.responses_out import ResponseBuilder

PG_BASE = "postgresql://postgres@127.0.0.1:5432/test"
OWNER = owner_scope("key-a")
OTHER = owner_scope("key-b")
# A runner on another machine that never wrote a heartbeat: dead.
GONE = "elsewhere/boot:4242:dead"


def _pg_available() -> bool:
    try:
        with psycopg.connect(PG_BASE, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


@pytest.fixture
def pg_url() -> Iterator[str]:
    if not _pg_available():
        pytest.fail(f"PostgreSQL is not running at {PG_BASE} (.ci/run starts it)")
    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(PG_BASE, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")  # type: ignore[arg-type]
    try:
        yield f"{PG_BASE}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(PG_BASE, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")  # type: ignore[arg-type]


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("pg_url")
        return url
    return str(tmp_path / "store.sqlite3")


def make_store(where: str, **kwargs: Any) -> SQLStore:
    if where.startswith("postgresql://"):
        return PostgresStore(where, **kwargs)
    return SQLiteStore(where, **kwargs)


async def opened(where: str, **kwargs: Any) -> SQLStore:
    store = make_store(where, **kwargs)
    await store.open()
    return store


def record(
    rid: str, *, status: str = "completed", owner: str = OWNER, **kwargs: Any
) -> StoredResponse:
    return StoredResponse(
        id=rid,
        owner=owner,
        status=status,
        created_at=1_700_000_000.0,
        response={"id": rid, "status": status, "output": []},
        messages=[{"role": "user", "content": f"hello {rid}"}],
        input_items=[{"id": f"msg_{rid}", "type": "message", "role": "user", "content": []}],
        **kwargs,
    )


class Stores:
    """Two processes' stores on one database."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.opened: list[SQLStore] = []

    async def open(self, **kwargs: Any) -> SQLStore:
        store = await opened(self.where, **kwargs)
        self.opened.append(store)
        return store

    async def aclose(self) -> None:
        for store in self.opened:
            await store.aclose()


@pytest.fixture
async def stores(backend: str) -> AsyncIterator[Stores]:
    both = Stores(backend)
    try:
        yield both
    finally:
        await both.aclose()


async def test_responses_round_trip_per_owner(stores: Stores) -> None:
    store = await stores.open()
    await store.create(record("resp_1"))
    assert await store.get("resp_1", OWNER) == record("resp_1")
    assert await store.get("resp_1", OTHER) is None
    assert await store.find_items(OWNER, ["msg_resp_1", "nope"]) == {
        "msg_resp_1": record("resp_1").input_items[0]
    }
    assert await store.find_items(OTHER, ["msg_resp_1"]) == {}
    assert not await store.delete("resp_1", OTHER)
    assert await store.delete("resp_1", OWNER)
    assert await store.get("resp_1", OWNER) is None
    assert await store.find_items(OWNER, ["msg_resp_1"]) == {}


async def test_events_finish_and_what_another_process_reads(stores: Stores) -> None:
    runner, reader = await stores.open(), await stores.open()
    builder = ResponseBuilder("resp_e", created_at=1, model="m")
    events = builder.start() + builder.feed(MessageChunk("Hello"))
    live = record("resp_e", status="in_progress")
    live.response = builder.snapshot()
    await runner.create(live, events=events[:1])
    await runner.append_events("resp_e", events[1:])
    # Another process sees the running response with its output so far.
    seen = await reader.get("resp_e", OWNER)
    assert seen is not None and seen.status == "in_progress" and seen.runner == runner.runner.id
    assert seen.response["output"][0]["content"][0]["text"] == "Hello"
    assert [e.sequence_number for e in await reader.events_after("resp_e", 0)] == [
        e.sequence_number for e in events[1:]
    ]
    ending = builder.feed(MessageStop(final=True)) + builder.feed(
        TurnFinished("Hello", None, "stop")
    )
    await runner.finish(
        "resp_e",
        status="completed",
        response=builder.snapshot(),
        messages=[{"role": "assistant", "content": "Hello"}],
        events=ending,
    )
    done = await reader.get("resp_e", OWNER)
    assert done is not None and done.status == "completed" and done.runner is None
    assert (await reader.events_after("resp_e", -1))[-1].type == "response.completed"
    # Finished: a live process's recovery leaves nothing to do.
    assert await reader.recover_interrupted() == 0


async def test_recovery_ends_only_what_dead_processes_ran(stores: Stores) -> None:
    alive, other = await stores.open(), await stores.open()
    await alive.create(record("resp_mine", status="in_progress"))
    builder = ResponseBuilder("resp_dead", created_at=1, model="m")
    started = builder.start()
    await alive.create(record("resp_dead", status="in_progress", runner=GONE), events=started)
    assert await other.recover_interrupted() == 1
    mine, dead = await other.get("resp_mine", OWNER), await other.get("resp_dead", OWNER)
    assert mine is not None and mine.status == "in_progress"
    assert dead is not None and dead.status == "incomplete"
    # Clients saw only stored events: the ending comes right after them.
    ending = await other.events_after("resp_dead", len(started) - 1)
    assert [(e.sequence_number, e.type) for e in ending] == [(len(started), "response.incomplete")]
    # Once this process is gone (closed: it retired), its work is recovered.
    await alive.aclose()
    stores.opened.remove(alive)
    assert await other.recover_interrupted() == 1
    mine = await other.get("resp_mine", OWNER)
    assert mine is not None and mine.status == "incomplete"


async def test_retention(stores: Stores) -> None:
    clock = [1_700_000_000.0 + 40 * 86400]
    store = await stores.open(max_rows=2, max_age_days=30.0, clock=lambda: clock[0])
    old = record("resp_old")
    old.created_at = 1_700_000_000.0
    await store.create(old)
    for n in range(3):
        fresh = record(f"resp_{n}")
        fresh.created_at = clock[0] - 10 + n
        await store.create(fresh)
    assert await store.prune() == 2
    assert await store.get("resp_old", OWNER) is None
    assert await store.get("resp_0", OWNER) is None
    assert await store.get("resp_2", OWNER) is not None


async def test_a_conversation_is_held_by_one_turn_at_a_time(stores: Stores) -> None:
    first, second = await stores.open(), await stores.open()
    claim = await first.claim_conversation("api:o:s", "turn-1")
    assert claim.granted and claim.messages == []
    busy = await second.claim_conversation("api:o:s", "turn-2")
    assert busy.messages is None and busy.busy == first.runner.id
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert await first.release_conversation("api:o:s", "turn-1", history)
    claim = await second.claim_conversation("api:o:s", "turn-2")
    assert claim.messages == history
    # The first process's late write of an older turn changes nothing.
    assert not await first.release_conversation("api:o:s", "turn-1", [])
    assert await second.release_conversation("api:o:s", "turn-2", None)
    assert await first.conversation("api:o:s") == history
    assert await first.delete_conversation("api:o:s")
    assert await second.conversation("api:o:s") is None


async def test_a_dead_process_does_not_hold_a_conversation(stores: Stores, backend: str) -> None:
    store = await stores.open()
    ghost = make_store(backend, runner=Runner(GONE, "elsewhere/boot", 4242))
    await ghost.open()
    assert (await ghost.claim_conversation("chat:t:1:", "lost")).granted
    # The ghost dies without a word (no retire): its heartbeat is never renewed.
    await trio.to_thread.run_sync(_close_silently, ghost)
    busy_for = await store.claim_conversation("chat:t:1:", "mine")
    # A heartbeat this fresh is still alive on another machine...
    assert busy_for.busy == GONE
    # ...until it is stale.
    store.clock = lambda: 4_000_000_000.0
    assert (await store.claim_conversation("chat:t:1:", "mine")).granted


def _close_silently(store: SQLStore) -> None:
    if isinstance(store, SQLiteStore):
        assert store._conn is not None and store._reader is not None
        store._conn.close()
        store._reader.close()
        store._conn = store._reader = None
    elif isinstance(store, PostgresStore):
        assert store._pool is not None
        store._pool.close()
        store._pool = None


async def test_conversation_retention(stores: Stores) -> None:
    clock = [1_000.0]
    store = await stores.open(clock=lambda: clock[0])
    for n in range(4):
        clock[0] += 10
        await store.claim_conversation(f"api:o:s{n}", "t")
        await store.release_conversation(f"api:o:s{n}", "t", [{"n": n}])
    await store.claim_conversation("chat:x:1:", "t")
    await store.release_conversation("chat:x:1:", "t", [])
    # Count: the two newest stay; age: older than 25 s goes; other prefixes stay.
    assert await store.prune_conversations("api:", max_age=1e9, max_count=2) == 2
    assert await store.conversation("api:o:s1") is None
    assert await store.conversation("api:o:s2") == [{"n": 2}]
    clock[0] += 20
    assert await store.prune_conversations("api:", max_age=25.0, max_count=100) == 1
    assert await store.conversation("api:o:s3") == [{"n": 3}]
    assert await store.conversation("chat:x:1:") == []


async def test_signals_reach_their_process_once(stores: Stores) -> None:
    first, second = await stores.open(), await stores.open()
    await first.send_signal(second.runner.id, Signal("stop", "api:o:s"))
    await first.send_signal(second.runner.id, Signal("cancel_response", "resp_1"))
    assert await first.take_signals() == []
    assert await second.take_signals() == [
        Signal("stop", "api:o:s"),
        Signal("cancel_response", "resp_1"),
    ]
    assert await second.take_signals() == []


async def test_live_runners_are_the_other_processes_alive(stores: Stores, backend: str) -> None:
    first, second = await stores.open(), await stores.open()
    assert await first.live_runners() == [second.runner.id]
    assert await second.live_runners() == [first.runner.id]
    ghost = make_store(backend, runner=Runner(GONE, "elsewhere/boot", 4242))
    await ghost.open()
    await trio.to_thread.run_sync(_close_silently, ghost)
    # Another machine's fresh heartbeat counts as alive, until it is stale.
    assert set(await first.live_runners()) == {second.runner.id, GONE}
    first.clock = lambda: 4_000_000_000.0
    assert await first.live_runners() == []


async def test_chat_settings_are_shared_and_outlive_the_process(stores: Stores) -> None:
    first, second = await stores.open(), await stores.open()
    assert await first.chat_setting("hinted:telegram:7") is None
    await first.put_chat_setting("hinted:telegram:7", "1")
    await first.put_chat_setting("verbose:chat:telegram:31:", "on")
    await second.put_chat_setting("verbose:chat:telegram:31:", "off")
    await first.aclose()
    stores.opened.remove(first)
    again = await stores.open()
    assert await again.chat_setting("hinted:telegram:7") == "1"
    assert await again.chat_setting("verbose:chat:telegram:31:") == "off"


async def test_a_newer_schema_is_refused_in_one_line(backend: str, tmp_path: Any) -> None:
    store = await opened(backend)
    await store.aclose()
    if backend.startswith("postgresql://"):
        with psycopg.connect(backend, autocommit=True) as conn:
            conn.execute("UPDATE hermes_schema SET version = 99")
        config = Config(store=StoreConfig(url=backend))
        setting = "store.url"
    else:
        data_dir = tmp_path / "data"
        _newer_copy(Path(backend), data_dir)
        config = Config(store=StoreConfig(data_dir=str(data_dir)))
        setting = "store.data_dir"
    with pytest.raises(StoreOpenError) as refused:
        async with open_store(config):
            pass
    line = str(refused.value)
    assert line.startswith(setting) and "newer version of hermes-trio" in line
    assert "\n" not in line


def _newer_copy(path: Path, data_dir: Path) -> None:
    data_dir.mkdir()
    copy = data_dir / "responses.sqlite3"
    copy.write_bytes(path.read_bytes())
    conn = sqlite3.connect(copy)
    conn.execute("PRAGMA user_version=99")
    conn.close()


async def test_an_unreachable_database_is_one_line() -> None:
    url = "postgresql://hermes:s3cret@127.0.0.1:9/none"
    with pytest.raises(StoreOpenError) as refused:
        async with open_store(Config(store=StoreConfig(url=url))):
            pass
    line = str(refused.value)
    assert line.startswith("store.url postgresql://") and "cannot use the database" in line
    assert "s3cret" not in line and "\n" not in line


async def test_held_approvals_are_answered_once_by_any_process_and_go_with_their_response(
    stores: Stores,
) -> None:
    from hermes_trio.store import HeldApproval

    one, two = await stores.open(), await stores.open()
    await one.create(record("resp_held"))
    held = HeldApproval("mcpr_1", OWNER, "resp_held", "call_1", "rebooting", 1_700_000_300.0)
    await one.hold_approvals([held, HeldApproval("mcpr_2", OWNER, "resp_held", "call_2", "", 1.0)])
    assert await two.held_approval("mcpr_1") == held
    assert await two.held_approval("mcpr_nope") is None
    # Both processes answer at once: one of them wins.
    won: list[bool] = []

    async def take(store: SQLStore, by: str) -> None:
        won.append(await store.take_approval("mcpr_1", by))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(take, one, "resp_a")
        nursery.start_soon(take, two, "resp_b")
    assert sorted(won) == [False, True]
    answered = await one.held_approval("mcpr_1")
    assert answered is not None and answered.answered_by in ("resp_a", "resp_b")
    assert await one.delete("resp_held", OWNER)
    assert await two.held_approval("mcpr_1") is None
    assert await two.held_approval("mcpr_2") is None


async def test_the_store_knows_which_process_asked_an_approval(
    stores: Stores, backend: str
) -> None:
    clock = [1_000.0]
    first = await stores.open(clock=lambda: clock[0])
    second = await stores.open(clock=lambda: clock[0])
    assert await second.approval_holder("mcpr_1") is None
    await first.note_approval("mcpr_1", expires_at=1_300.0)
    await first.note_approval("mcpr_1", expires_at=9_999.0)  # noted once
    assert await second.approval_holder("mcpr_1") == first.runner.id
    # An hour past its deadline it is forgotten (at the next reap)...
    clock[0] = 1_300.0 + 3_599.0
    await first.heartbeat()
    await second.reap()
    assert await second.approval_holder("mcpr_1") == first.runner.id
    clock[0] = 1_300.0 + 3_601.0
    await first.heartbeat()
    await second.reap()
    assert await second.approval_holder("mcpr_1") is None
    # ...and at once when its process leaves or dies.
    await first.note_approval("mcpr_2", expires_at=1e12)
    await first.aclose()
    assert await second.approval_holder("mcpr_2") is None
    ghost = make_store(backend, runner=Runner(GONE, "elsewhere/boot", 4242), clock=lambda: clock[0])
    await ghost.open()
    await ghost.note_approval("mcpr_3", expires_at=1e12)
    await trio.to_thread.run_sync(_close_silently, ghost)
    await second.reap()
    assert await second.approval_holder("mcpr_3") == GONE  # fresh: maybe alive elsewhere
    clock[0] += 60
    await second.reap()
    assert await second.approval_holder("mcpr_3") is None
