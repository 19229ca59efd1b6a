"""SIGKILL of a real ``hermes-trio serve`` process in the middle of a streamed
response: the store stays readable, earlier responses stay intact, and the
next start marks the interrupted one incomplete."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

import httpx
import trio
from support import clean_env, client_for, http_for, make_config, start_serve

from hermes_trio.config import StoreConfig
from hermes_trio.llm.http_body import open_body
from hermes_trio.server.run import open_api_server
from hermes_trio.store import DB_FILENAME, SQLiteStore, owner_scope
from hermes_trio.testing import TextReply, open_scripted_server
from hermes_trio.wire.sse import SSEDecoder, SSEEvent
from tests.server.responses.test_responses_helpers import parse_sse, payloads

TOKENS = [f"w{i} " for i in range(200)]
TOKENS_TEXT = "".join(TOKENS)
KEY = "test-client-key"


async def test_sigkill_mid_stream_leaves_a_readable_store(tmp_path) -> None:
    data_dir = tmp_path / "data"
    script = [
        TextReply("The earlier answer."),
        TextReply(tokens=TOKENS, delay=0.02),
        TextReply("Continued after the crash."),
    ]
    async with open_scripted_server(script) as model:
        env = clean_env(HERMES_MODEL_BASE_URL=model.base_url, HERMES_DATA_DIR=str(data_dir))
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path)
            base_url = served.base_url
            headers = {"Authorization": f"Bearer {KEY}"}
            async with httpx.AsyncClient(base_url=base_url, headers=headers) as http:
                with trio.fail_after(15):
                    earlier = (
                        await http.post("/responses", json={"model": "m", "input": "first"})
                    ).json()
                    decoder = SSEDecoder()
                    seen: list[dict[str, object]] = []
                    body = {
                        "model": "m",
                        "input": "long one",
                        "stream": True,
                        "previous_response_id": earlier["id"],
                    }
                    async with http.stream("POST", "/responses", json=body) as reply:
                        async with open_body(reply) as pieces:
                            async for piece in pieces:
                                events = decoder.feed(piece)
                                seen += [
                                    json.loads(e.data) for e in events if isinstance(e, SSEEvent)
                                ]
                                deltas = sum(
                                    e["type"] == "response.output_text.delta" for e in seen
                                )
                                if deltas >= 10:
                                    served.process.send_signal(signal.SIGKILL)
                                    break
                    assert await served.process.wait() == -signal.SIGKILL
            nursery.cancel_scope.cancel()
        crashed_id = str(seen[0]["response"]["id"])  # type: ignore[index]

        # Straight after the crash, before any restart: the file is sound.
        path = data_dir / DB_FILENAME
        check = sqlite3.connect(path)
        try:
            assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        finally:
            check.close()
        store = SQLiteStore(path)
        await store.open()
        try:
            first = await store.get(earlier["id"], owner_scope(KEY))
            crashed = await store.get(crashed_id, owner_scope(KEY))
            stored_events = await store.events_after(crashed_id, -1)
        finally:
            await store.aclose()
        assert first is not None and first.status == "completed"
        assert first.response == earlier
        assert crashed is not None and crashed.status in ("in_progress", "incomplete")
        numbers = [e.sequence_number for e in stored_events]
        assert numbers == list(range(len(numbers))) and len(numbers) >= 2

        # A restarted server finishes the record and still continues the chain.
        config = make_config(model.base_url, store=StoreConfig(data_dir=str(data_dir)))
        with trio.fail_after(15):
            async with (
                open_api_server(config, port=0) as api,
                client_for(api, api_key=KEY) as client,
            ):
                recovered = await client.responses.retrieve(crashed_id)
                async with http_for(api, KEY) as http:
                    replay = payloads(
                        parse_sse((await http.get(f"/responses/{crashed_id}?stream=true")).content)
                    )
                again = await client.responses.create(
                    model="m", input="and now?", previous_response_id=earlier["id"]
                )
    assert recovered.status == "incomplete"
    assert replay[-1]["type"] == "response.incomplete"
    # The stored events without a gap, the ending right after them.
    numbers = [e["sequence_number"] for e in replay]
    assert numbers == list(range(len(replay)))
    assert replay[: len(seen)] == seen
    assert again.output_text == "Continued after the crash."
    assert model.requests[-1].json["messages"][1:] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "The earlier answer."},
        {"role": "user", "content": "and now?"},
    ]


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    """Another program's write transaction on the store file: the server's
    writes wait behind it."""
    conn = sqlite3.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    return conn
