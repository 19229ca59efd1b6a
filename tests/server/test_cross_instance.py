"""Two ``hermes-trio serve`` instances on one store (a shared SQLite data
directory, or one PostgreSQL) behave as one server: a session interrupt, a
cancel and a live resume each cross from one instance to the other."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from support import clean_env, start_serve

from hermes_trio.testing import TextReply, open_scripted_server
from hermes_trio.wire.sse import SSEDecoder, SSEEvent
from tests.server.responses.test_responses_helpers import parse_sse, payloads
from tests.store.test_store_backends import pg_url  # noqa: F401 (a fixture)

KEY = "cross-key"
HEADERS = {"Authorization": f"Bearer {KEY}"}
SLOW = [f"w{i} " for i in range(150)]


@pytest.fixture(params=["sqlite", "postgres"])
def store_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    if request.param == "postgres":
        yield {"HERMES_STORE_URL": request.getfixturevalue("pg_url")}
    else:
        yield {"HERMES_DATA_DIR": str(tmp_path / "data")}


@asynccontextmanager
async def two_instances(
    script: list[Any], store_env: dict[str, str], cwd: Path
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient, Any]]:
    async with open_scripted_server(script) as model, trio.open_nursery() as nursery:
        env = clean_env(HERMES_MODEL_BASE_URL=model.base_url, API_SERVER_KEY=KEY, **store_env)
        one = await start_serve(nursery, env, cwd)
        two = await start_serve(nursery, env, cwd)
        async with (
            httpx.AsyncClient(base_url=one.base_url, headers=HEADERS, timeout=15) as a,
            httpx.AsyncClient(base_url=two.base_url, headers=HEADERS, timeout=15) as b,
        ):
            yield a, b, model
        nursery.cancel_scope.cancel()


async def _stream(
    http: httpx.AsyncClient,
    path: str,
    body: dict[str, Any],
    into: list[dict[str, Any]],
    headers: dict[str, str] | None = None,
    started: trio.Event | None = None,
) -> None:
    decoder = SSEDecoder()
    async with http.stream("POST", path, json=body, headers=headers) as reply:
        assert reply.status_code == 200, await reply.aread()
        async for piece in reply.aiter_bytes():
            for event in decoder.feed(piece):
                if isinstance(event, SSEEvent) and event.data != "[DONE]":
                    into.append(json.loads(event.data))
            if started is not None and len(into) >= 10:
                started.set()


async def test_a_session_turn_is_interrupted_from_the_other_instance(
    store_env: dict[str, str], tmp_path: Path
) -> None:
    script = [TextReply(tokens=SLOW, delay=0.02), TextReply("the newer answer")]
    async with two_instances(script, store_env, tmp_path) as (a, b, model):
        chunks: list[dict[str, Any]] = []
        started = trio.Event()
        session = {"X-Session-ID": "shared"}
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                body = {
                    "model": "m",
                    "stream": True,
                    "messages": [{"role": "user", "content": "a long one"}],
                }
                nursery.start_soon(_stream, a, "/chat/completions", body, chunks, session, started)
                await started.wait()
                began = trio.current_time()
                newer = await b.post(
                    "/chat/completions",
                    json={"model": "m", "messages": [{"role": "user", "content": "newer"}]},
                    headers=session,
                )
                took = trio.current_time() - began
    assert newer.status_code == 200, newer.text
    assert newer.json()["choices"][0]["message"]["content"] == "the newer answer"
    # The interrupted stream says so, as when both requests reach one process.
    (ending,) = [c for c in chunks if "choices" not in c]
    assert ending["error"]["code"] == "interrupted", ending
    streamed = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")
    )
    assert 0 < len(streamed) < len("".join(SLOW))
    # The newer turn continued from the interrupted one, as one session.
    sent = [m for m in model.model_requests[-1].json["messages"] if m["role"] != "system"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[0]["content"] == "a long one" and sent[2]["content"] == "newer"
    assert sent[1]["content"].startswith(streamed.strip()[:20])
    assert took < 5


async def test_a_background_response_is_cancelled_from_the_other_instance(
    store_env: dict[str, str], tmp_path: Path
) -> None:
    script = [TextReply(tokens=SLOW, delay=0.02)]
    async with two_instances(script, store_env, tmp_path) as (a, b, _):
        with trio.fail_after(20):
            created = await a.post(
                "/responses", json={"model": "m", "input": "go", "background": True}
            )
            rid = created.json()["id"]
            # Some output first, stored by the instance that runs it.
            await _until_output(b, rid)
            cancelled = await b.post(f"/responses/{rid}/cancel")
            after = (await a.get(f"/responses/{rid}")).json()
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    assert after["status"] == "cancelled"
    assert len(after["output_text"]) < len("".join(SLOW))


async def _until_output(http: httpx.AsyncClient, rid: str) -> None:
    for _ in range(500):
        if (await http.get(f"/responses/{rid}")).json()["output_text"]:
            return
        await trio.sleep(0.02)
    raise AssertionError("no output stored")


async def test_a_stream_resumes_live_on_the_other_instance(
    store_env: dict[str, str], tmp_path: Path
) -> None:
    script = [TextReply(tokens=SLOW, delay=0.01)]
    async with two_instances(script, store_env, tmp_path) as (a, b, _):
        seen: list[dict[str, Any]] = []
        started = trio.Event()
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                body = {"model": "m", "input": "go", "stream": True}
                nursery.start_soon(_stream, a, "/responses", body, seen, None, started)
                await started.wait()
                rid = seen[0]["response"]["id"]
                after = seen[5]["sequence_number"]
                resumed = payloads(
                    parse_sse(
                        (
                            await b.get(f"/responses/{rid}?stream=true&starting_after={after}")
                        ).content
                    )
                )
    assert resumed[-1]["type"] == "response.completed"
    assert resumed == seen[6:]
