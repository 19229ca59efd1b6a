"""Store.find_items: stored items by id, for ``item_reference``
inputs; and the pure input helpers around it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hermes_trio.server.parsing.errors import APIError
from hermes_trio.server.responses.input import item_references, resolve_references
from hermes_trio.store import DB_FILENAME, SQLiteStore, StoredResponse, owner_scope

OWNER = owner_scope("key-a")


def _message(item_id: str, text: str, role: str = "assistant") -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {
        "id": item_id,
        "type": "message",
        "role": role,
        "status": "completed",
        "content": [{"type": kind, "text": text}],
    }


def _row(rid: str, created_at: float, output: list[Any], inputs: list[Any], owner: str = OWNER):
    return StoredResponse(
        id=rid,
        owner=owner,
        status="completed",
        created_at=created_at,
        response={"id": rid, "status": "completed", "output": output},
        input_items=inputs,
    )


async def test_find_items_in_inputs_and_outputs_newest_first(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / DB_FILENAME)
    await store.open()
    try:
        await store.create(
            _row("resp_1", 1.0, [_message("msg_a", "old answer")], [_message("in_1", "q", "user")])
        )
        # The client sent the same input item id again: the newest one wins.
        await store.create(
            _row("resp_2", 2.0, [_message("msg_b", "answer")], [_message("in_1", "q2", "user")])
        )
        await store.create(
            _row("resp_3", 3.0, [_message("msg_c", "theirs")], [], owner=owner_scope("key-b"))
        )
        # Many ids at once stay within SQLite's bound on parameters.
        wanted = ["msg_a", "msg_b", "in_1", "msg_c"] + [f"none_{n}" for n in range(1200)]
        found = await store.find_items(OWNER, wanted)
        assert await store.find_items(OWNER, []) == {}
    finally:
        await store.aclose()
    assert set(found) == {"msg_a", "msg_b", "in_1"}
    assert found["msg_a"]["content"][0]["text"] == "old answer"
    assert found["in_1"]["content"][0]["text"] == "q2"


def test_references_are_listed_and_replaced_in_place() -> None:
    value = [
        {"role": "user", "content": "hi"},
        {"type": "item_reference", "id": "msg_a"},
        {"type": "item_reference", "id": "msg_b"},
    ]
    assert item_references(value) == ["msg_a", "msg_b"]
    assert item_references("just text") == [] and item_references([1, None]) == []
    stored = {"msg_a": _message("msg_a", "A"), "msg_b": _message("msg_b", "B")}
    assert resolve_references(value, stored) == [value[0], stored["msg_a"], stored["msg_b"]]
    with pytest.raises(APIError) as unknown:
        resolve_references(value, {"msg_a": stored["msg_a"]})
    assert unknown.value.status == 400 and "msg_b" in str(unknown.value.body())
    assert unknown.value.body()["error"]["param"] == "input[2]"
    for bad_id in (None, "", 7):
        with pytest.raises(APIError) as malformed:
            item_references([{"type": "item_reference", "id": bad_id}])
        assert malformed.value.body()["error"]["param"] == "input[0].id"
