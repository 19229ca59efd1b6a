"""Issue 23, item 10: a ``previous_response_id`` chain stores each message
once (not the whole conversation in every row), on SQLite and PostgreSQL,
older stores included; a long stored stream is replayed a page at a time."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import trio
from support import http_for, make_config
from test_store_backends import OWNER, Stores, backend, pg_url, stores  # noqa: F401

from hermes_trio.config import StoreConfig
from hermes_trio.consumers.responses_sse import PAGE_EVENTS
from hermes_trio.server.run import open_api_server
from hermes_trio.store import StoredResponse, owner_scope, schema, wall_clock
from hermes_trio.store.shared import SQLStore
from hermes_trio.testing import TextReply, open_scripted_server
from hermes_trio.wire.responses_out import ResponseEvent
from tests.server.responses.test_responses_helpers import parse_sse, payloads

BIG = 50_000
CHAIN = 20
# Recent enough for retention's age limit (applied when a store opens).
NOW = wall_clock() - 3600


def _store_config(where: str) -> StoreConfig:
    if where.startswith("postgresql://"):
        return StoreConfig(url=where)
    return StoreConfig(data_dir=str(Path(where).parent / "data"))


async def _stored_size(store: Any) -> tuple[int, int]:
    def size(db: Any) -> tuple[int, int]:
        total, rows = db.execute("SELECT SUM(LENGTH(messages)), COUNT(*) FROM responses").fetchone()
        return int(total), int(rows)

    result: tuple[int, int] = await store._read(size)
    return result


async def test_a_chain_of_twenty_grows_the_store_linearly(backend: str) -> None:  # noqa: F811
    script = [TextReply(f"answer {n}") for n in range(CHAIN + 1)]
    async with open_scripted_server(script) as model:
        config = make_config(model.base_url, store=_store_config(backend))
        async with open_api_server(config, port=0) as api, http_for(api) as http:
            with trio.fail_after(60):
                previous: str | None = None
                sizes: list[int] = []
                for n in range(CHAIN):
                    body: dict[str, Any] = {"model": "m", "input": f"{n} " + "x" * BIG}
                    if previous is not None:
                        body["previous_response_id"] = previous
                    reply = await http.post("/responses", json=body)
                    assert reply.status_code == 200, reply.text
                    previous = reply.json()["id"]
                    sizes.append((await _stored_size(api.state.store))[0])
                follow_up = await http.post(
                    "/responses",
                    json={"model": "m", "input": "and?", "previous_response_id": previous},
                )
    assert follow_up.status_code == 200
    # Each response adds its own input once: every step grows the stored
    # messages by about one request, the last as much as the first.
    steps = [b - a for a, b in zip([0, *sizes], sizes, strict=False)]
    assert max(steps) < 1.2 * BIG, steps
    assert sizes[-1] < 1.2 * CHAIN * BIG
    # The conversation the follow-up continued is the whole chain, in order.
    expected: list[dict[str, Any]] = []
    for n in range(CHAIN):
        expected += [
            {"role": "user", "content": f"{n} " + "x" * BIG},
            {"role": "assistant", "content": f"answer {n}"},
        ]
    expected.append({"role": "user", "content": "and?"})
    assert model.model_requests[-1].json["messages"][1:] == expected


def _record(rid: str, messages: list[dict[str, Any]], **kwargs: Any) -> StoredResponse:
    return StoredResponse(
        id=rid,
        owner=kwargs.pop("owner", OWNER),
        status=kwargs.pop("status", "completed"),
        created_at=kwargs.pop("created_at", NOW),
        response={"id": rid, "output": []},
        messages=messages,
        **kwargs,
    )


def _turn(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": f"a{n}"}]


async def _chain(store: SQLStore, length: int) -> list[list[dict[str, Any]]]:
    """Responses resp_0 … continuing each other; their conversations."""
    conversations: list[list[dict[str, Any]]] = []
    conversation: list[dict[str, Any]] = []
    for n in range(length):
        inherited = len(conversation)
        conversation = conversation + _turn(n)
        parent = f"resp_{n - 1}" if n else None
        await store.create(
            _record(
                f"resp_{n}", conversation, parent=parent, inherited=inherited, created_at=NOW + n
            )
        )
        conversations.append(conversation)
    return conversations


async def test_a_chain_survives_deleting_any_of_it(stores: Stores) -> None:  # noqa: F811
    store = await stores.open()
    conversations = await _chain(store, 5)
    for n, conversation in enumerate(conversations):
        got = await store.get(f"resp_{n}", OWNER)
        assert got is not None and got.messages == conversation
    # Each row holds one turn's messages only.
    total, rows = await _stored_size(store)
    assert rows == 5 and total < 5 * len(json.dumps(_turn(0))) + 5 * 8
    # A middle one, then the first: the rest keep their whole conversation.
    assert await store.delete("resp_2", OWNER)
    assert await store.delete("resp_0", OWNER)
    for n in (1, 3, 4):
        got = await store.get(f"resp_{n}", OWNER)
        assert got is not None and got.messages == conversations[n]
    # Retention may take any of them too.
    store.max_rows = 1
    assert await store.prune() == 2
    last = await store.get("resp_4", OWNER)
    assert last is not None and last.messages == conversations[4] and last.parent is None


async def test_a_running_response_on_a_chain_finishes_whole(stores: Stores) -> None:  # noqa: F811
    store = await stores.open()
    conversations = await _chain(store, 2)
    running = conversations[1] + [{"role": "user", "content": "q2"}]
    await store.create(
        _record("resp_2", running, status="in_progress", parent="resp_1", inherited=4)
    )
    # Its parent goes while it runs: it takes over the parent's messages.
    assert await store.delete("resp_1", OWNER)
    final = [*running, {"role": "assistant", "content": "a2"}]
    await store.finish("resp_2", status="completed", response={"output": []}, messages=final)
    got = await store.get("resp_2", OWNER)
    assert got is not None and got.messages == final


async def test_a_missing_or_foreign_parent_is_not_referenced(stores: Stores) -> None:  # noqa: F811
    store = await stores.open()
    await store.create(_record("resp_a", _turn(0), owner="someone-else"))
    whole = _turn(0) + _turn(1)
    for rid, parent in (("resp_b", "resp_a"), ("resp_c", "resp_gone")):
        await store.create(_record(rid, whole, parent=parent, inherited=2))
        got = await store.get(rid, OWNER)
        assert got is not None
        assert (got.messages, got.parent, got.inherited) == (whole, None, 0)


async def test_events_are_read_a_page_at_a_time(stores: Stores) -> None:  # noqa: F811
    store = await stores.open()
    events = [ResponseEvent.make(n, "t", f'{{"sequence_number":{n}}}') for n in range(7)]
    await store.create(_record("resp_e", []), events=events)
    page = await store.events_after("resp_e", 1, limit=3)
    assert [e.sequence_number for e in page] == [2, 3, 4]
    assert [e.sequence_number for e in await store.events_after("resp_e", 4)] == [5, 6]


# -- a store written before schema 6 -------------------------------------------

OLD_COLUMNS = (
    "id, owner, status, created_at, updated_at, background, response, messages, input_items, runner"
)


def _old_rows(length: int) -> list[tuple[Any, ...]]:
    """A chain as versions before schema 6 stored it: every row holds the
    whole conversation."""
    rows = []
    conversation: list[dict[str, Any]] = []
    for n in range(length):
        conversation = conversation + _turn(n)
        response = {"id": f"resp_{n}", "previous_response_id": f"resp_{n - 1}" if n else None}
        rows.append(
            (
                f"resp_{n}",
                OWNER,
                "completed",
                NOW + n,
                NOW + n,
                0,
                json.dumps(response),
                json.dumps(conversation),
                "[]",
                None,
            )
        )
    return rows


def _write_v4(where: str, rows: list[tuple[Any, ...]]) -> None:
    insert = f"INSERT INTO responses ({OLD_COLUMNS}) VALUES ({', '.join('?' * 10)})"
    if where.startswith("postgresql://"):
        with psycopg.connect(where, autocommit=True) as conn:
            conn.execute("CREATE TABLE hermes_schema (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO hermes_schema VALUES (4)")
            for target, steps in schema.POSTGRES_MIGRATIONS:
                if target <= 4:
                    for step in steps:
                        assert isinstance(step, str)
                        conn.execute(step)  # type: ignore[arg-type]
            with conn.cursor() as cursor:
                cursor.executemany(insert.replace("?", "%s"), rows)  # type: ignore[arg-type]
        return
    conn = sqlite3.connect(where)
    try:
        for target, steps in schema.SQLITE_MIGRATIONS:
            if target <= 4:
                for step in steps:
                    assert isinstance(step, str)
                    conn.execute(step)
        conn.executemany(insert, rows)
        conn.execute("PRAGMA user_version=4")
        conn.commit()
    finally:
        conn.close()


async def test_an_older_store_is_migrated_to_one_copy_per_message(
    backend: str,  # noqa: F811
    stores: Stores,  # noqa: F811
) -> None:
    rows = _old_rows(6)
    await trio.to_thread.run_sync(_write_v4, backend, rows)
    before, _ = (sum(len(row[7]) for row in rows), len(rows))
    store = await stores.open()
    after, count = await _stored_size(store)
    assert count == 6 and after < before / 2
    for n, row in enumerate(rows):
        got = await store.get(f"resp_{n}", OWNER)
        assert got is not None and got.messages == json.loads(row[7])
        assert got.parent == (f"resp_{n - 1}" if n else None)


# -- replay ---------------------------------------------------------------------


async def test_a_long_stored_stream_is_replayed_in_pages(tmp_path: Path) -> None:
    count = 3 * PAGE_EVENTS + 5
    events = [
        ResponseEvent.make(n, "response.output_text.delta", json.dumps({"sequence_number": n}))
        for n in range(count - 1)
    ]
    ending = json.dumps({"type": "response.completed", "sequence_number": count - 1})
    events.append(ResponseEvent.make(count - 1, "response.completed", ending))
    async with open_scripted_server([]) as model:
        config = make_config(model.base_url, store=StoreConfig(data_dir=str(tmp_path / "d")))
        async with open_api_server(config, port=0) as api, http_for(api) as http:
            store = api.state.store
            await store.create(
                StoredResponse("resp_long", owner_scope("test-client-key"), "completed", NOW, {})
            )
            await store.append_events("resp_long", events)
            reads: list[int] = []
            original = store.events_after

            async def counted(*args: Any, **kwargs: Any) -> list[ResponseEvent]:
                found = await original(*args, **kwargs)
                reads.append(len(found))
                return found

            store.events_after = counted  # type: ignore[method-assign]
            with trio.fail_after(30):
                replay = payloads(
                    parse_sse((await http.get("/responses/resp_long?stream=true")).content)
                )
                resumed = payloads(
                    parse_sse(
                        (
                            await http.get(
                                f"/responses/resp_long?stream=true&starting_after={count - 3}"
                            )
                        ).content
                    )
                )
    assert [e["sequence_number"] for e in replay] == list(range(count))
    assert [e["sequence_number"] for e in resumed] == [count - 2, count - 1]
    # Never more than a page of rows per query.
    assert max(reads) <= PAGE_EVENTS
    assert len(reads) >= 4
