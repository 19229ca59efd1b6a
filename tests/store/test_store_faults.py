"""The response store under faults, driven through the real ``hermes-trio``
command: a data directory in use by another server, one that cannot hold a
store, and a disk that fills up under a running response."""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sqlite3
import subprocess
from typing import Any

import httpx
import trio
from support import (
    api_stack,
    clean_env,
    gateway_process,
    http_for,
    make_config,
    run_cli,
    start_serve,
)

from hermes_trio.config import StoreConfig
from hermes_trio.server.run import open_api_server
from hermes_trio.store import DB_FILENAME, SQLiteStore, owner_scope
from hermes_trio.testing import TextReply, open_scripted_server
from hermes_trio.wire.sse import SSEDecoder, SSEEvent
from tests.server.responses.test_responses_crash import _hold_write_lock
from tests.server.responses.test_responses_helpers import parse_sse, payloads

KEY = "test-client-key"
HEADERS = {"Authorization": f"Bearer {KEY}"}
TERMINAL = {"response.completed", "response.failed", "response.incomplete"}


def one_line(result: subprocess.CompletedProcess[bytes]) -> str:
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1, result.stderr.decode()
    return lines[0]


def without_root_override() -> None:
    """In the child, before exec: root loses the right to write where the
    permission bits say no, as any other user (a no-op for other users)."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop, cap_dac_override, cap_dac_read_search = 24, 1, 2
    for cap in (cap_dac_override, cap_dac_read_search):
        if libc.prctl(pr_capbset_drop, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


async def read_stream(
    http: httpx.AsyncClient, body: dict[str, Any], seen: list[dict[str, Any]], started: trio.Event
) -> None:
    decoder = SSEDecoder()
    async with http.stream("POST", "/responses", json=body) as reply:
        assert reply.status_code == 200
        async for piece in reply.aiter_bytes():
            seen += [json.loads(e.data) for e in decoder.feed(piece) if isinstance(e, SSEEvent)]
            if any(e["type"] == "response.output_text.delta" for e in seen):
                started.set()


async def test_a_second_serve_on_the_same_data_dir_shares_the_store(tmp_path) -> None:
    """Two servers on one data directory: the second leaves the first's
    running response alone (no recovery of a live process's work), follows
    it live, and the gateway starts beside them too."""
    data_dir = tmp_path / "data"
    tokens = [f"t{i} " for i in range(50)]
    async with open_scripted_server([TextReply(tokens=tokens, delay=0.04)]) as model:
        env = clean_env(HERMES_MODEL_BASE_URL=model.base_url, HERMES_DATA_DIR=str(data_dir))
        async with trio.open_nursery() as nursery:
            first = await start_serve(nursery, env, tmp_path)
            seen: list[dict[str, Any]] = []
            started = trio.Event()
            async with httpx.AsyncClient(base_url=first.base_url, headers=HEADERS) as http:
                with trio.fail_after(20):
                    async with trio.open_nursery() as streams:
                        body = {"model": "m", "input": "go", "stream": True}
                        streams.start_soon(read_stream, http, body, seen, started)
                        await started.wait()
                        second = await start_serve(nursery, env, tmp_path)
                        rid = seen[0]["response"]["id"]
                        async with httpx.AsyncClient(
                            base_url=second.base_url, headers=HEADERS
                        ) as other:
                            # Still running: the second server followed it live.
                            followed = payloads(
                                parse_sse(
                                    (await other.get(f"/responses/{rid}?stream=true")).content
                                )
                            )
                    replay = payloads(
                        parse_sse((await http.get(f"/responses/{rid}?stream=true")).content)
                    )
            gateway_env = dict(env, API_SERVER_ENABLED="1", API_SERVER_PORT="0")
            async with gateway_process(gateway_env, tmp_path) as (gateway, out, _):
                with trio.fail_after(15):
                    await out.wait_for(b"running api server")
                assert gateway.poll() is None
            nursery.cancel_scope.cancel()
    assert not any("incomplete" in line for line in second.output), second.output
    # The first server's response went on untouched: one ending, no gap.
    assert [e["type"] for e in seen if e["type"] in TERMINAL] == ["response.completed"]
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    assert replay == seen
    assert followed == seen


async def test_a_data_dir_that_is_a_file_is_one_line(tmp_path) -> None:
    data_dir = tmp_path / "data"
    data_dir.write_text("not a directory\n")
    env = clean_env(HERMES_MODEL_BASE_URL="http://127.0.0.1:9/v1", HERMES_DATA_DIR=str(data_dir))
    result = await run_cli(["serve", "--port", "0"], env, tmp_path)
    assert result.returncode == 1
    line = one_line(result)
    assert line == (
        f"hermes-trio serve: store.data_dir {data_dir} is not a directory "
        "(set store.data_dir or HERMES_DATA_DIR to a writable directory)"
    )


async def test_a_read_only_data_dir_is_one_line(tmp_path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    data_dir.chmod(0o555)
    env = clean_env(HERMES_MODEL_BASE_URL="http://127.0.0.1:9/v1", HERMES_DATA_DIR=str(data_dir))
    try:
        result = await run_cli(
            ["serve", "--port", "0"], env, tmp_path, preexec_fn=without_root_override
        )
    finally:
        data_dir.chmod(0o755)
    assert result.returncode == 1
    line = one_line(result)
    assert line.startswith(f"hermes-trio serve: store.data_dir {data_dir} cannot be written")
    assert "Permission denied" in line


# What the child may write per file: room for the store and a few responses,
# not for the last write of a long one (RLIMIT_FSIZE needs no privileges).
FILE_SIZE_LIMIT = 1_500_000


def small_disk() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


async def test_a_full_disk_at_the_end_fails_the_response_for_everyone(tmp_path) -> None:
    data_dir = tmp_path / "data"
    # Each token is large, so the last write (the whole text several times
    # over) is what overflows.
    tokens = [f"{i:04d}" + "x" * 9_996 for i in range(30)]
    script = [TextReply("A short answer."), TextReply(tokens=tokens)]
    async with open_scripted_server(script) as model:
        env = clean_env(HERMES_MODEL_BASE_URL=model.base_url, HERMES_DATA_DIR=str(data_dir))
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path, preexec_fn=small_disk)
            async with httpx.AsyncClient(base_url=served.base_url, headers=HEADERS) as http:
                with trio.fail_after(20):
                    short = await http.post("/responses", json={"model": "m", "input": "hi"})
                    reply = await http.post(
                        "/responses", json={"model": "m", "input": "long", "stream": True}
                    )
                    events = payloads(parse_sse(reply.content))
                    rid = events[0]["response"]["id"]
                    fetched = await http.get(f"/responses/{rid}")
                    replay = payloads(
                        parse_sse((await http.get(f"/responses/{rid}?stream=true")).content)
                    )
                    earlier = await http.get(f"/responses/{short.json()['id']}")
            nursery.cancel_scope.cancel()
        # The next start, with room again, settles the row the full disk left.
        config = make_config(model.base_url, store=StoreConfig(data_dir=str(data_dir)))
        with trio.fail_after(15):
            async with open_api_server(config, port=0):
                pass
        store = SQLiteStore(data_dir / DB_FILENAME)
        await store.open()
        try:
            row = await store.get(rid, owner_scope(KEY))
        finally:
            await store.aclose()
    assert short.status_code == 200 and earlier.status_code == 200
    types = [e["type"] for e in events]
    # The client never hears "completed" for a response the store refused.
    assert "response.completed" not in types
    assert types[-2:] == ["error", "response.failed"]
    error = events[-2]
    assert error["code"] in {"store_full", "store_io_error"}
    assert "could not be stored" in error["message"]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    # This process remembers what its client saw.
    assert fetched.status_code == 200
    assert fetched.json()["status"] == "failed"
    assert replay == events
    # The store never claims it is still running.
    assert row is not None and row.status == "incomplete"
    # One log line names the store failure and its cause; no traceback.
    output = "\n".join(served.output)
    assert "Traceback" not in output
    assert sum("response store" in line and "disk" in line for line in served.output) == 1


# -- in process: the same server object, its store made to fail on purpose --


async def _pragma(store: SQLiteStore, statement: str) -> Any:
    """Run ``statement`` on the server's own store connection, between its
    other uses (a test hook: SQLite's own limits stand in for a sick disk)."""

    def run(conn: sqlite3.Connection) -> Any:
        return conn.execute(statement).fetchone()

    return await store._run(run, write=False)


def error_of(reply: httpx.Response) -> dict[str, Any]:
    body = reply.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    return error


async def test_store_failures_are_503_with_a_code_and_logged_once(tmp_path, caplog) -> None:
    script = [TextReply("kept")]
    async with api_stack(script) as (api, _), http_for(api) as http:
        store = api.state.store
        assert isinstance(store, SQLiteStore)
        with trio.fail_after(15):
            kept = (await http.post("/responses", json={"model": "m", "input": "a"})).json()
            body = {"model": "m", "input": "b"}

            await _pragma(store, "PRAGMA query_only=1")
            read_only = [await http.post("/responses", json=body) for _ in range(2)]
            # Reads still work while writes are refused.
            fetched = await http.get(f"/responses/{kept['id']}")
            await _pragma(store, "PRAGMA query_only=0")

            (pages,) = await _pragma(store, "PRAGMA page_count")
            await _pragma(store, f"PRAGMA max_page_count={pages}")
            full = await http.post("/responses", json={"model": "m", "input": "x" * 200_000})
            await _pragma(store, "PRAGMA max_page_count=1073741823")

            blocker = await trio.to_thread.run_sync(_hold_write_lock, store.path)
            try:
                await _pragma(store, "PRAGMA busy_timeout=50")
                busy = await http.delete(f"/responses/{kept['id']}")
            finally:
                await trio.to_thread.run_sync(blocker.close)
                await _pragma(store, "PRAGMA busy_timeout=10000")
    assert fetched.status_code == 200
    for reply, code, words in (
        (read_only[0], "store_read_only", "read-only"),
        (read_only[1], "store_read_only", "read-only"),
        (full, "store_full", "full"),
        (busy, "store_busy", "locked"),
    ):
        assert reply.status_code == 503, reply.text
        error = error_of(reply)
        assert error["code"] == code
        assert error["type"] == "server_error"
        assert words in error["message"]
        assert "OperationalError" not in error["message"]
    records = [r for r in caplog.records if r.name == "hermes_trio.server.store"]
    failures = [r for r in records if r.levelname == "ERROR"]
    # One line per outage (two refused requests while read-only: one line),
    # each with SQLite's own words; no traceback from the request handler.
    assert len(failures) == 3
    assert "attempt to write a readonly database" in failures[0].getMessage()
    assert all(r.exc_info is None for r in failures)
    assert not [r for r in caplog.records if "unexpected error" in r.getMessage()]


async def test_a_refused_final_write_fails_the_non_streamed_response(tmp_path) -> None:
    script = [TextReply("the answer", first_token_delay=0.3)]
    async with api_stack(script) as (api, model), http_for(api) as http:
        store = api.state.store
        assert isinstance(store, SQLiteStore)
        with trio.fail_after(15):
            replies: list[httpx.Response] = []
            async with trio.open_nursery() as nursery:

                async def post() -> None:
                    body = {"model": "m", "input": "go"}
                    replies.append(await http.post("/responses", json=body))

                nursery.start_soon(post)
                await model.wait_request(1)
                # Between the response's first write and its last.
                await _pragma(store, "PRAGMA query_only=1")
            (rid,) = await _pragma(store, "SELECT id FROM responses")
            fetched = await http.get(f"/responses/{rid}")
            await _pragma(store, "PRAGMA query_only=0")
    reply = replies[0]
    assert reply.status_code == 503
    error = error_of(reply)
    assert error["code"] == "store_read_only"
    assert "could not be stored" in error["message"]
    # What the client was told is what a later GET says.
    assert fetched.status_code == 200
    assert fetched.json()["status"] == "failed"


async def test_a_refused_event_write_fails_the_stream_after_what_is_stored() -> None:
    tokens = [f"t{i} " for i in range(60)]
    async with api_stack([TextReply(tokens=tokens, delay=0.02)]) as (api, _):
        store = api.state.store
        assert isinstance(store, SQLiteStore)
        async with http_for(api) as http:
            with trio.fail_after(15):
                seen: list[dict[str, Any]] = []
                decoder = SSEDecoder()
                body = {"model": "m", "input": "go", "stream": True}
                async with http.stream("POST", "/responses", json=body) as reply:
                    async for piece in reply.aiter_bytes():
                        for e in decoder.feed(piece):
                            if isinstance(e, SSEEvent):
                                seen.append(json.loads(e.data))
                        deltas = [e for e in seen if e["type"] == "response.output_text.delta"]
                        if len(deltas) == 3:
                            await _pragma(store, "PRAGMA query_only=1")
                rid = seen[0]["response"]["id"]
                fetched = await http.get(f"/responses/{rid}")
                stored = await store.events_after(rid, -1)
                await _pragma(store, "PRAGMA query_only=0")
    assert [e["type"] for e in seen[-2:]] == ["error", "response.failed"]
    assert seen[-2]["code"] == "store_read_only"
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    # Up to its ending the client saw exactly what the store holds.
    assert [e.payload() for e in stored] == seen[:-2]
    assert len(seen) < len(tokens)
    assert fetched.json()["status"] == "failed"
