"""``hermes-trio serve --workers 2`` with the real processes, for what the
workers share through the store: a session interrupt, a cancel and a
resume crossing from one worker to the other; a killed worker losing only
its own streams (stored as ``incomplete``) while the other's complete."""

from __future__ import annotations

import json
import operator
import os
import re
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio
from support import ServeProcess, clean_env, client_on, start_serve

from hermes_trio.testing import TextReply, open_scripted_server
from hermes_trio.wire.sse import SSEDecoder, SSEEvent
from tests.server.responses.test_responses_helpers import parse_sse, payloads

KEY = "workers-key"
HEADERS = {"Authorization": f"Bearer {KEY}"}
SLOW = [f"w{i} " for i in range(150)]


@asynccontextmanager
async def workers(
    script: list[Any], tmp_path: Path, **env: str
) -> AsyncIterator[tuple[ServeProcess, httpx.AsyncClient, Any]]:
    async with open_scripted_server(script) as model, trio.open_nursery() as nursery:
        environment = clean_env(
            HERMES_MODEL_BASE_URL=model.base_url,
            HERMES_DATA_DIR=str(tmp_path / "data"),
            API_SERVER_KEY=KEY,
            API_SERVER_WORKERS="2",
            **env,
        )
        # Room for the 200 streams: in a worker's own config.
        (tmp_path / "config.yaml").write_text(
            "api_server: {max_concurrent: 256, max_connections: 512}\n"
        )
        served = await start_serve(nursery, environment, tmp_path)
        limits = httpx.Limits(max_connections=400, max_keepalive_connections=0)
        async with httpx.AsyncClient(
            base_url=served.base_url, headers=HEADERS, timeout=30, limits=limits
        ) as http:
            yield served, http, model
        nursery.cancel_scope.cancel()


class Progress:
    """Wakes whoever waits for a condition whenever something changed."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def changed(self) -> None:
        self._event.set()
        self._event = trio.Event()

    async def until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            await self._event.wait()


def worker_pids(served: ServeProcess) -> dict[str, int]:
    """Worker index -> pid, from the supervisor's start-up line."""
    for line in served.output:
        if found := re.search(r"serve: \d+ workers \((.*)\)", line):
            return dict(re.findall(r"(\d+): pid (\d+)", found.group(1)))  # type: ignore[arg-type]
    raise AssertionError("no workers line")


async def test_interrupt_cancel_and_resume_cross_workers(tmp_path: Path) -> None:
    script = [
        TextReply(tokens=SLOW, delay=0.02),
        TextReply("the newer answer"),
        TextReply(tokens=SLOW, delay=0.02),
        TextReply(tokens=SLOW, delay=0.01),
    ]
    async with workers(script, tmp_path) as (served, http, model):
        with trio.fail_after(30):
            # (1) A session turn on one worker, interrupted from the other.
            chunks: list[dict[str, Any]] = []
            started = trio.Event()
            first: list[str] = []

            async def long_turn() -> None:
                body = {
                    "model": "m",
                    "stream": True,
                    "messages": [{"role": "user", "content": "a long one"}],
                }
                decoder = SSEDecoder()
                async with http.stream(
                    "POST", "/chat/completions", json=body, headers={"X-Session-ID": "x"}
                ) as reply:
                    first.append(reply.headers["X-Hermes-Worker"])
                    async for piece in reply.aiter_bytes():
                        chunks.extend(
                            json.loads(e.data)
                            for e in decoder.feed(piece)
                            if isinstance(e, SSEEvent) and e.data != "[DONE]"
                        )
                        if len(chunks) > 5:
                            started.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(long_turn)
                await started.wait()
                other = "1" if first[0] == "0" else "0"
                async with client_on(served.base_url, other, HEADERS) as there:
                    newer = await there.post(
                        "/chat/completions",
                        json={"model": "m", "messages": [{"role": "user", "content": "newer"}]},
                        headers={"X-Session-ID": "x"},
                    )
                assert newer.headers["X-Hermes-Worker"] == other
            assert newer.json()["choices"][0]["message"]["content"] == "the newer answer"
            assert chunks[-1]["error"]["code"] == "interrupted"
            sent = [m for m in model.model_requests[1].json["messages"] if m["role"] != "system"]
            assert [m["role"] for m in sent] == ["user", "assistant", "user"]

            # (2) A background response cancelled from the other worker.
            created = await http.post(
                "/responses", json={"model": "m", "input": "go", "background": True}
            )
            rid, runner = created.json()["id"], created.headers["X-Hermes-Worker"]
            other = "1" if runner == "0" else "0"
            await trio.sleep(0.3)
            async with client_on(served.base_url, other, HEADERS) as there:
                cancelled = await there.post(f"/responses/{rid}/cancel")
            assert cancelled.headers["X-Hermes-Worker"] == other
            assert cancelled.json()["status"] == "cancelled", cancelled.text

            # (3) A stream resumed live on the other worker.
            seen: list[dict[str, Any]] = []
            begun = trio.Event()
            where: list[str] = []

            async def original() -> None:
                body = {"model": "m", "input": "go", "stream": True}
                decoder = SSEDecoder()
                async with http.stream("POST", "/responses", json=body) as reply:
                    where.append(reply.headers["X-Hermes-Worker"])
                    async for piece in reply.aiter_bytes():
                        seen.extend(
                            json.loads(e.data)
                            for e in decoder.feed(piece)
                            if isinstance(e, SSEEvent)
                        )
                        if len(seen) > 10:
                            begun.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(original)
                await begun.wait()
                rid = seen[0]["response"]["id"]
                other = "1" if where[0] == "0" else "0"
                async with client_on(served.base_url, other, HEADERS) as there:
                    resumed = await there.get(f"/responses/{rid}?stream=true&starting_after=5")
                assert resumed.headers["X-Hermes-Worker"] == other
            assert payloads(parse_sse(resumed.content)) == seen[6:]
            assert seen[-1]["type"] == "response.completed"


async def test_a_killed_worker_loses_only_its_streams_and_is_replaced(tmp_path: Path) -> None:
    script = [TextReply(tokens=SLOW, delay=0.02)] * 24 + [TextReply("after")] * 4
    async with workers(script, tmp_path) as (served, http, _):
        streams: dict[str, list[dict[str, Any]]] = {}
        where: dict[str, str] = {}
        progress = Progress()

        async def stream(name: str) -> None:
            decoder = SSEDecoder()
            events: list[dict[str, Any]] = streams.setdefault(name, [])
            try:
                body = {"model": "m", "input": name, "stream": True}
                async with http.stream("POST", "/responses", json=body) as reply:
                    where[name] = reply.headers["X-Hermes-Worker"]
                    progress.changed()
                    async for piece in reply.aiter_bytes():
                        events.extend(
                            json.loads(e.data)
                            for e in decoder.feed(piece)
                            if isinstance(e, SSEEvent)
                        )
                        progress.changed()
            except httpx.HTTPError:
                pass

        with trio.fail_after(40):
            async with trio.open_nursery() as nursery:
                # New connections until each worker streams at least two.
                for n in range(24):
                    name = f"s{n}"
                    nursery.start_soon(stream, name)
                    await progress.until(partial(operator.contains, where, name))
                    counts = [list(where.values()).count(w) for w in ("0", "1")]
                    if min(counts) >= 2:
                        break
                await progress.until(lambda: all(len(e) >= 5 for e in streams.values()))
                assert set(where.values()) == {"0", "1"}, where
                victim = where["s0"]
                pids = worker_pids(served)
                os.kill(int(pids[victim]), signal.SIGKILL)
            await served.wait_for(f"worker {victim} (pid {pids[victim]}) ended after")
            await served.wait_for(f"worker {victim} serves (pid")
            after = [
                await http.post(
                    "/chat/completions",
                    json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                )
                for _ in range(4)
            ]
            states = {
                name: (await http.get(f"/responses/{events[0]['response']['id']}")).json()["status"]
                for name, events in streams.items()
            }
    for name, events in streams.items():
        if where[name] == victim:
            assert states[name] == "incomplete", (name, states)
        else:
            assert events[-1]["type"] == "response.completed", name
            assert states[name] == "completed"
    assert all(reply.status_code == 200 for reply in after)
