"""The store's item index (``item_reference`` lookups by key), its migration
from older stores, reads that do not queue behind writes, and the JSON of
whole conversations kept off the event loop."""

from __future__ import annotations

import json
import sqlite3
import threading
import types
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from support import api_stack, http_for, make_config

from hermes_trio.config import StoreConfig
from hermes_trio.server.responses import routes as responses_routes
from hermes_trio.server.responses.input import MAX_ITEM_REFERENCES
from hermes_trio.store import (
    SQLiteStore,
    StoredResponse,
    StoreOpenError,
    open_store,
)
from hermes_trio.store import sqlite as sqlite_module
from hermes_trio.store import statements as store_module
from hermes_trio.testing import TextReply
from tests.server.responses.test_responses_crash import _hold_write_lock

# The schema of a store written before the item index existed.
_OLD_SCHEMA = """
CREATE TABLE responses (
    id TEXT PRIMARY KEY, owner TEXT NOT NULL, status TEXT NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL,
    background INTEGER NOT NULL DEFAULT 0, response TEXT NOT NULL,
    messages TEXT NOT NULL, input_items TEXT NOT NULL
);
CREATE INDEX responses_by_age ON responses (created_at);
CREATE INDEX responses_by_status ON responses (status);
CREATE TABLE response_events (
    response_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (response_id, seq)
) WITHOUT ROWID;
CREATE TABLE response_reservations (
    response_id TEXT PRIMARY KEY, seq INTEGER NOT NULL
) WITHOUT ROWID;
"""


def _item(item_id: str, text: str = "t") -> dict[str, Any]:
    return {"id": item_id, "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]}


def _old_store(path: Path, version: int) -> None:
    with sqlite3.connect(path) as conn:
        conn.executescript(_OLD_SCHEMA)
        for n, (owner, created) in enumerate((("o", 1.0), ("o", 2.0), ("p", 3.0))):
            response = {"id": f"resp_{n}", "output": [_item(f"out_{n}"), _item("shared", f"r{n}")]}
            conn.execute(
                "INSERT INTO responses VALUES (?, ?, 'completed', ?, ?, 0, ?, '[]', ?)",
                (f"resp_{n}", owner, created, created, json.dumps(response),
                 json.dumps([_item(f"in_{n}")])),
            )
        # An event row whose response is gone (left by an older version).
        conn.execute("INSERT INTO response_events VALUES ('resp_gone', 0, 'x', '{}')")
        conn.execute(f"PRAGMA user_version={version}")


@pytest.mark.parametrize("version", [0, 2])
async def test_an_older_store_gets_its_item_index_on_open(tmp_path: Path, version: int) -> None:
    path = tmp_path / "responses.sqlite3"
    _old_store(path, version)
    # Rows from 1970: no retention by age here.
    store = SQLiteStore(path, max_age_days=1e6)
    await store.open()
    try:
        found = await store.find_items("o", ["in_0", "out_1", "shared", "in_2", "nope"])
    finally:
        await store.aclose()
    assert set(found) == {"in_0", "out_1", "shared"}
    # The newest of this owner's responses wins; another owner's never shows.
    assert found["shared"]["content"][0]["text"] == "r1"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == sqlite_module.SCHEMA_VERSION
        indexed = conn.execute("SELECT COUNT(*) FROM response_items").fetchone()[0]
        orphans = conn.execute(
            "SELECT COUNT(*) FROM response_events WHERE response_id = 'resp_gone'"
        ).fetchone()[0]
    assert indexed == 9
    assert orphans == 0


async def test_a_store_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.mkdir()
    with sqlite3.connect(path / "responses.sqlite3") as conn:
        conn.execute("PRAGMA user_version=999")
    config = make_config("http://m", store=StoreConfig(data_dir=str(path)))
    with pytest.raises(StoreOpenError, match="newer"):
        async with open_store(config):
            pass


async def test_the_index_follows_create_finish_delete_and_prune(tmp_path: Path) -> None:
    clock = [1000.0]
    store = SQLiteStore(tmp_path / "r.sqlite3", max_rows=1, clock=lambda: clock[0])
    await store.open()

    def indexed() -> set[tuple[str, str]]:
        with sqlite3.connect(store.path) as conn:
            return set(conn.execute("SELECT item_id, response_id FROM response_items"))

    try:
        await store.create(StoredResponse("r1", "o", "in_progress", 1.0, {"output": []},
                                          input_items=[_item("a")]))
        assert indexed() == {("a", "r1")}
        await store.finish("r1", status="completed",
                           response={"output": [_item("b")]}, messages=[])
        assert indexed() == {("a", "r1"), ("b", "r1")}
        assert set(await store.find_items("o", ["a", "b"])) == {"a", "b"}
        assert await store.find_items("other", ["a", "b"]) == {}
        await store.create(StoredResponse("r2", "o", "completed", 2.0, {"output": []},
                                          input_items=[_item("c")]))
        await store.delete("r2", "o")
        assert indexed() == {("a", "r1"), ("b", "r1")}
        await store.create(StoredResponse("r3", "o", "completed", 3.0, {"output": []},
                                          input_items=[_item("d")]))
        assert await store.prune() == 1
        assert indexed() == {("d", "r3")}
    finally:
        await store.aclose()


async def test_no_event_rows_outlive_a_deleted_response(tmp_path: Path) -> None:
    from hermes_trio.wire.responses_out import ResponseEvent

    store = SQLiteStore(tmp_path / "r.sqlite3")
    await store.open()
    try:
        await store.create(StoredResponse("r1", "o", "in_progress", 1.0, {"output": []}),
                           events=[ResponseEvent.make(0, "w", "{}")])
        assert await store.delete("r1", "o")
        # The turn was still running: its late writes find no row.
        await store.append_events("r1", [ResponseEvent.make(1, "x", "{}")])
        await store.finish("r1", status="incomplete", response={"output": [_item("z")]},
                           messages=[], events=[ResponseEvent.make(1, "y", "{}")])
    finally:
        await store.aclose()
    with sqlite3.connect(store.path) as conn:
        left = {
            table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in ("responses", "response_events", "response_reservations",
                          "response_items")
        }
    assert left == dict.fromkeys(left, 0)


async def test_too_many_references_is_a_400_naming_the_limit() -> None:
    async with api_stack() as (api, model), http_for(api) as http:
        refs = [{"type": "item_reference", "id": f"nope_{n}"} for n in range(20_000)]
        with trio.fail_after(10):
            reply = await http.post("/responses", json={"model": "m", "input": refs})
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["code"] == "too_many_item_references"
    assert error["param"] == "input"
    assert str(MAX_ITEM_REFERENCES) in error["message"]
    assert model.model_requests == []


async def test_reads_do_not_wait_behind_a_write_that_waits() -> None:
    script = [TextReply("kept"), TextReply("later")]
    async with api_stack(script) as (api, _), http_for(api) as http:
        store = api.state.store
        assert isinstance(store, SQLiteStore)
        kept = (await http.post("/responses", json={"model": "m", "input": "a"})).json()
        blocker = await trio.to_thread.run_sync(_hold_write_lock, store.path)
        try:
            async with trio.open_nursery() as nursery:
                # This response's first write waits for the other program.
                nursery.start_soon(
                    partial(http.post, "/responses", json={"model": "m", "input": "b"})
                )
                await trio.sleep(0.2)
                with trio.fail_after(2):
                    fetched = await http.get(f"/responses/{kept['id']}")
                    replay = await http.get(f"/responses/{kept['id']}?stream=true")
                    found = await http.post("/responses", json={
                        "model": "m", "store": False,
                        "input": [{"type": "item_reference", "id": "nope"}]})
                await trio.to_thread.run_sync(blocker.rollback)
        finally:
            await trio.to_thread.run_sync(blocker.close)
    assert fetched.status_code == 200 and fetched.json()["output_text"] == "kept"
    assert replay.status_code == 200 and b"response.completed" in replay.content
    assert found.status_code == 400 and found.json()["error"]["code"] == "item_not_found"


async def test_big_bodies_and_conversations_stay_off_the_event_loop(monkeypatch) -> None:
    on_loop: list[str] = []

    def watch(what: str, size: int) -> None:
        if size > 100_000 and threading.current_thread() is threading.main_thread():
            on_loop.append(what)

    parse = responses_routes.parse_responses_request

    def watched_parse(body: Any, **kwargs: Any) -> Any:
        watch("validate", len(json.dumps(body)))
        return parse(body, **kwargs)

    dumps = store_module.dumps

    def watched_dumps(value: Any) -> str:
        text = dumps(value)
        watch("encode", len(text))
        return text

    def watched_loads(text: str | bytes) -> Any:
        watch("decode", len(text))
        return json.loads(text)

    monkeypatch.setattr(responses_routes, "parse_responses_request", watched_parse)
    monkeypatch.setattr(store_module, "dumps", watched_dumps)
    monkeypatch.setattr(store_module, "json", types.SimpleNamespace(loads=watched_loads))
    items = [{"type": "message", "role": "user", "content": "x" * 300} for _ in range(1000)]
    body = json.dumps({"model": "m", "input": items}).encode()

    async def chunked() -> Any:
        for start in range(0, len(body), 65536):
            yield body[start : start + 65536]

    script = [TextReply("ok"), TextReply("again")]
    async with api_stack(script) as (api, _), http_for(api) as http:
        with trio.fail_after(15):
            reply = await http.post(
                "/responses", content=chunked(), headers={"Content-Type": "application/json"}
            )
            assert reply.status_code == 200, reply.text
            continued = await http.post("/responses", json={
                "model": "m", "input": "more", "previous_response_id": reply.json()["id"]})
    assert continued.status_code == 200, continued.text
    assert on_loop == []
