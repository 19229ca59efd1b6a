"""Latency across processes sharing one store: how long a session interrupt
takes when the session's turn runs in another process, and how far a
resumed stream in another process lags behind the original one.

Two ``hermes-trio serve`` processes share the store (a SQLite data
directory, or the PostgreSQL of ``--store-url``); with ``--workers``, one
``serve --workers 2`` instead: each client keeps one connection, opened
until the ``X-Hermes-Worker`` header says it reached the worker wanted.

- interrupt: a streamed session turn runs in process A; a new request on
  the same session goes to B. Measured: from sending B's request to A's
  stream receiving its ``interrupted`` ending, and to B's answer.
- resume: a Responses stream (a token every 10 ms) runs in A; B resumes it
  (``starting_after``). Measured: for every event, its arrival on B minus
  its arrival on A.

    python bench/cross_process.py [--rounds 30] [--workers] [--store-url postgresql://…]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio

from hermes_trio.testing import TextReply, open_scripted_server
from hermes_trio.wire.sse import SSEDecoder, SSEEvent

SLOW = [f" w{i}" for i in range(400)]
PACED = [f" p{i}" for i in range(100)]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


@asynccontextmanager
async def serve(env: dict[str, str], cwd: str, extra: list[str]) -> AsyncIterator[str]:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "hermes_trio.cli", "serve", "--port", "0", *extra],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        buffer = b""
        while b"listening on " not in buffer:
            piece = await process.stdout.receive_some()
            if not piece:
                raise RuntimeError("serve exited at start")
            buffer += piece
        url = buffer.split(b"listening on ")[1].split()[0].decode()
        yield url
    finally:
        process.terminate()
        with trio.move_on_after(10):
            await process.wait()
        process.kill()
        await process.wait()


@asynccontextmanager
async def client_on(base_url: str, worker: str | None) -> AsyncIterator[httpx.AsyncClient]:
    """A client with one kept-alive connection, accepted by ``worker`` (any
    when None): every request it sends is answered there."""
    for _ in range(100):
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx.AsyncClient(base_url=base_url, timeout=30, limits=limits) as client:
            probe = await client.get("/models")
            if worker is None or probe.headers.get("X-Hermes-Worker") == worker:
                yield client
                return
    raise RuntimeError(f"no connection reached worker {worker}")


async def interrupt_round(
    a: httpx.AsyncClient, b: httpx.AsyncClient, n: int
) -> tuple[float, float]:
    session = {"X-Session-ID": f"bench-{n}"}
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "long"}]}
    started, interrupted = trio.Event(), trio.Event()
    times: dict[str, float] = {}

    async def stream() -> None:
        decoder = SSEDecoder()
        async with a.stream("POST", "/chat/completions", json=body, headers=session) as reply:
            async for piece in reply.aiter_bytes():
                for event in decoder.feed(piece):
                    if isinstance(event, SSEEvent) and '"interrupted"' in event.data:
                        times["stopped"] = trio.current_time()
                        interrupted.set()
                started.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(stream)
        await started.wait()
        began = trio.current_time()
        reply = await b.post(
            "/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "newer"}]},
            headers=session,
        )
        times["answered"] = trio.current_time()
        assert reply.status_code == 200, reply.text
        with trio.fail_after(10):
            await interrupted.wait()
    return times["stopped"] - began, times["answered"] - began


async def resume_round(a: httpx.AsyncClient, b: httpx.AsyncClient) -> list[float]:
    arrivals_a: dict[int, float] = {}
    arrivals_b: dict[int, float] = {}
    first = trio.Event()
    ids: list[str] = []

    async def read(reply: httpx.Response, into: dict[int, float]) -> None:
        decoder = SSEDecoder()
        async for piece in reply.aiter_bytes():
            now = trio.current_time()
            for event in decoder.feed(piece):
                if isinstance(event, SSEEvent):
                    data = json.loads(event.data)
                    into[data["sequence_number"]] = now
                    if not ids:
                        ids.append(data["response"]["id"])
                    if len(into) > 5:
                        first.set()

    async def original() -> None:
        body = {"model": "m", "input": "go", "stream": True}
        async with a.stream("POST", "/responses", json=body) as reply:
            await read(reply, arrivals_a)

    async def resumed() -> None:
        path = f"/responses/{ids[0]}?stream=true&starting_after=5"
        async with b.stream("GET", path) as reply:
            await read(reply, arrivals_b)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(original)
        await first.wait()
        nursery.start_soon(resumed)
    # Events that already existed when B connected measure the catch-up,
    # not the following: only those produced afterwards count.
    joined = min(arrivals_b.values())
    return [
        arrivals_b[seq] - arrivals_a[seq]
        for seq in arrivals_b
        if seq in arrivals_a and arrivals_a[seq] > joined
    ]


async def main(rounds: int, store_url: str | None, workers: bool) -> None:
    script: list[Any] = []
    for _ in range(rounds):
        script += [TextReply(tokens=SLOW, delay=0.01), TextReply("newer answer")]
    script += [TextReply(tokens=PACED, delay=0.01)] * rounds
    with tempfile.TemporaryDirectory() as tmp:
        async with open_scripted_server(script) as model:
            env = dict(os.environ, HERMES_MODEL_BASE_URL=model.base_url)
            env.pop("API_SERVER_KEY", None)
            if store_url:
                env["HERMES_STORE_URL"] = store_url
            else:
                env["HERMES_DATA_DIR"] = tmp
            extra = ["--workers", "2"] if workers else []
            async with serve(env, tmp, extra) as url_a:
                async with _second(env, tmp, workers) as maybe_b:
                    url_b = url_a if workers else maybe_b
                    # Each client's one connection stays with one process.
                    async with (
                        client_on(url_a, "0" if workers else None) as a,
                        client_on(url_b, "1" if workers else None) as b,
                    ):
                        stops, answers = [], []
                        for n in range(rounds):
                            stop, answer = await interrupt_round(a, b, n)
                            stops.append(stop)
                            answers.append(answer)
                        lags: list[float] = []
                        for _ in range(rounds):
                            lags += await resume_round(a, b)
    where = "PostgreSQL" if store_url else "SQLite"
    how = "serve --workers 2" if workers else "two serve instances"
    print(f"{how}, store {where}, {rounds} rounds")
    for name, values in (
        ("interrupt: request -> other stream stopped", stops),
        ("interrupt: request -> its answer", answers),
        ("resume: event lag behind the original", lags),
    ):
        print(
            f"  {name:45s} p50 {pct(values, 0.5) * 1000:6.1f} ms   "
            f"p95 {pct(values, 0.95) * 1000:6.1f} ms   (n={len(values)})"
        )


@asynccontextmanager
async def _second(env: dict[str, str], cwd: str, workers: bool) -> AsyncIterator[str]:
    if workers:
        yield ""
        return
    async with serve(env, cwd, []) as url:
        yield url


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--store-url", default=None)
    parser.add_argument("--workers", action="store_true", help="one serve --workers 2")
    args = parser.parse_args()
    trio.run(main, args.rounds, args.store_url, args.workers)
