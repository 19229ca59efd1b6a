"""Paced load: many streams starting together, each token alone (issue 26).

Real models stream 20–100 tokens per second per stream, so each token
reaches the server on its own and pays a whole wake-up. Here N streams
start at once (``--streams``), each 200 tokens ``--interval`` apart (50 ms:
20 tokens/s), once directly to the scripted model server and once through
each target in the same run:

- ``hermes``: ``hermes-trio serve`` (``--workers``, ``--max-concurrent``);
- ``baseline``: the same, run by ``--baseline PYTHON`` (another checkout's
  venv): an older version measured beside this one;
- ``raw``, ``httpx``, ``pooled``, ``hypercorn``, ``quart``: the floors of bench/relay_floor.py (trio
  sockets only; httpx with a plain ``AsyncClient``; httpx with the
  project's own pool, ``llm/pool.py`` ``PooledTransport``).

Per target: how many streams were served whole, refused (429/503) with and
without ``Retry-After`` and how fast the refusal came, broken (a 200 that
did not end, or a failed connection); of the served, time to first token
(p50, p95) and the largest gap between two tokens of a stream (p50, p99
over the streams); the server's CPU per token delivered. Pinned as
bench/load.py pins (the server on core 0, the model server and the load
generator on core 1).

    python bench/paced.py [--streams 120] [--interval 0.05] [--targets hermes,raw,pooled]
                          [--max-concurrent auto] [--workers 1] [--profile FILE]
    python bench/paced.py --streams 600 --max-concurrent auto   # overload: sheds?
    python bench/paced.py --scale 1,2,4,8 --streams 2000          # 16 cores: workers

``--scale`` runs ``hermes`` once per worker count, direct alongside each,
for a machine with more cores (the server then gets the first half of the
cores, the rest the other half).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
import trio.testing

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import load  # noqa: E402  (bench/load.py, beside this file)

from hermes_trio.testing import TextReply, open_scripted_server  # noqa: E402

BODY = json.dumps(
    {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Tell me a story."}]}
).encode()
TOKEN = b" w"  # every scripted token starts so: " w0", " w1", ...


async def one_stream(host: str, port: int, path: str, start: trio.Event) -> dict[str, object]:
    """One stream's record: status, Retry-After, times (seconds from its
    send), tokens, the largest gap between two tokens, whether it ended."""
    request = (
        f"POST {path}/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + BODY
    try:
        stream = await trio.open_tcp_stream(host, port)
    except OSError as exc:
        return {"status": "connect", "error": str(exc)}
    await start.wait()
    sent = time.perf_counter()
    head = b""
    record: dict[str, object] = {"status": "", "tokens": 0, "ended": False}
    first = last = None
    gap = 0.0
    tokens = 0
    tail = b""
    try:
        async with stream:
            await stream.send_all(request)
            while data := await stream.receive_some(65536):
                now = time.perf_counter()
                if not head:
                    head = data[:512]
                    record["status"] = head[9:12].decode(errors="replace")
                    record["answered"] = now - sent
                    record["retry_after"] = b"\r\nretry-after:" in head.lower()
                window = tail + data
                count = window.count(TOKEN) - tail.count(TOKEN)
                if count:
                    tokens += count
                    if first is None:
                        first = now
                    else:
                        gap = max(gap, now - last)  # type: ignore[operator]
                    last = now
                tail = window[-16:]
                if b"data: [DONE]" in window:
                    record["ended"] = True
                    break
    except OSError as exc:
        record["error"] = str(exc)
    record.update(tokens=tokens, gap=gap, ttft=(first - sent) if first else None)
    return record


async def generate(url: str, streams: int) -> None:
    """The load generator's process: ``streams`` streams sent together,
    once all are connected; prints every record as JSON."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host, port, path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path.rstrip("/")
    start = trio.Event()
    results: list[dict[str, object]] = []

    async def run() -> None:
        results.append(await one_stream(host, port, path, start))

    async with trio.open_nursery() as nursery:
        for _ in range(streams):
            nursery.start_soon(run)
        await trio.testing.wait_all_tasks_blocked(0.2)
        begun = time.perf_counter()
        start.set()
    print(json.dumps({"wall": time.perf_counter() - begun, "results": results}))


async def loadgen(url: str, streams: int) -> dict:
    result = await trio.run_process(
        [sys.executable, __file__, "--generate", url, "--streams", str(streams)],
        capture_stdout=True,
        preexec_fn=load.pin_here,
    )
    return json.loads(result.stdout)


def summary(run: dict) -> dict:
    results = run["results"]
    served = [r for r in results if r.get("status") == "200" and r.get("ended")]
    refused = [r for r in results if r.get("status") in ("429", "503")]
    ttfts = [r["ttft"] for r in served if r.get("ttft") is not None]
    gaps = [r["gap"] for r in served]
    answers = [r["answered"] for r in refused]
    ms = 1000

    def p(values: list[float], q: float) -> float:
        return load.pct(values, q) * ms if values else float("nan")

    return {
        "streams": len(results),
        "served": len(served),
        "refused": len(refused),
        "refused_503": sum(r.get("status") == "503" for r in refused),
        "refused_without_retry_after": sum(not r.get("retry_after") for r in refused),
        "refusal_p95_ms": p(answers, 0.95),
        "refusal_max_ms": max(answers, default=0.0) * ms,
        "broken": len(results) - len(served) - len(refused),
        "ttft_p50_ms": p(ttfts, 0.5),
        "ttft_p95_ms": p(ttfts, 0.95),
        "gap_p50_ms": p(gaps, 0.5),
        "gap_p99_ms": p(gaps, 0.99),
        "tokens": sum(int(r.get("tokens") or 0) for r in results),
        "wall": run["wall"],
    }


def show(label: str, s: dict, cpu: float | None = None) -> None:
    line = (
        f"{label:<22} served {s['served']:>4}/{s['streams']:<4} refused {s['refused']:>4} "
        f"(503 {s['refused_503']}, no Retry-After {s['refused_without_retry_after']}, "
        f"p95 {s['refusal_p95_ms']:6.1f} ms, "
        f"max {s['refusal_max_ms']:6.1f} ms) broken {s['broken']:>3} | "
        f"TTFT p50/p95 {s['ttft_p50_ms']:7.1f} / {s['ttft_p95_ms']:7.1f} ms | "
        f"largest gap p50/p99 {s['gap_p50_ms']:6.1f} / {s['gap_p99_ms']:6.1f} ms"
    )
    if cpu is not None:
        line += (
            f" | CPU {cpu / max(1, s['tokens']) * 1e6:6.1f} µs/token ({cpu / s['wall']:.2f} cores)"
        )
    print(line, flush=True)


@asynccontextmanager
async def hermes(
    model_url: str,
    workers: int,
    max_concurrent: str,
    profile: str | None = None,
    python: str = sys.executable,
) -> AsyncIterator[tuple[str, int]]:
    """``hermes-trio serve`` in front of ``model_url``; ``python``: the
    interpreter whose hermes_trio runs (another checkout's venv, for a
    baseline measured on the same machine in the same run)."""
    with tempfile.TemporaryDirectory() as tmp:
        config = (
            f"model: {{base_url: '{model_url}', name: scripted}}\n"
            f"api_server: {{port: 0, max_concurrent: {max_concurrent}, workers: {workers},"
            " max_connections: 4096, max_connections_per_client: 4096}\n"
            f"store: {{data_dir: '{tmp}'}}\n"
        )
        await trio.Path(tmp, "config.yaml").write_text(config)
        prefix = ["-m", "cProfile", "-o", profile] if profile else []
        command = [python, *prefix, "-m", "hermes_trio.cli", "serve"]
        async with load.serve_process([*command, "--workers", str(workers)], tmp) as found:
            yield found


async def measure_target(url: str, pid: int, label: str, streams: int) -> None:
    before = load.cpu_seconds(pid)
    run = await loadgen(url, streams)
    show(label, summary(run), load.cpu_seconds(pid) - before)


async def main(args: argparse.Namespace) -> None:
    load.pin_here()
    reply = TextReply(tokens=load.TOKENS, delay=args.interval)
    print(
        f"== {args.streams} streams starting together, 200 tokens {args.interval * 1000:.0f} ms "
        f"apart; max_concurrent {args.max_concurrent}; {os.cpu_count()} CPUs =="
    )
    async with open_scripted_server(default=reply, record=False) as model:
        worker_counts = [int(w) for w in args.scale.split(",")] if args.scale else [args.workers]
        for target in args.targets.split(","):
            for workers in worker_counts if target in ("hermes", "baseline") else [1]:
                show("direct", summary(await loadgen(model.base_url, args.streams)))
                if target in ("hermes", "baseline"):
                    python = args.baseline if target == "baseline" else sys.executable
                    async with hermes(
                        model.base_url, workers, args.max_concurrent, args.profile, python
                    ) as (url, pid):
                        await measure_target(
                            url, pid, f"{target} --workers {workers}", args.streams
                        )
                else:
                    command = [
                        sys.executable,
                        str(HERE / "relay_floor.py"),
                        "--serve",
                        target,
                        "--upstream",
                        model.base_url,
                    ]
                    async with load.serve_process(command) as (url, pid):
                        await measure_target(url, pid, f"floor {target}", args.streams)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=120)
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between tokens")
    parser.add_argument(
        "--targets", default="hermes,raw,pooled", help="hermes, baseline, raw, httpx, pooled, ..."
    )
    parser.add_argument(
        "--baseline", help="target 'baseline': this python's hermes_trio (another checkout's venv)"
    )
    parser.add_argument("--max-concurrent", default="auto", help="api_server.max_concurrent")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--scale", default="", help="worker counts, e.g. 1,2,4,8")
    parser.add_argument("--profile", help="run the server under cProfile, written here")
    parser.add_argument("--generate", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.profile = str(Path(args.profile).resolve()) if args.profile else None
    if args.scale and (os.cpu_count() or 1) >= 4:
        half = (os.cpu_count() or 2) // 2
        load.SERVER_CORES = set(range(half))
        load.OTHER_CORES = set(range(half, 2 * half))
    if args.generate:
        trio.run(generate, args.generate, args.streams)
    else:
        trio.run(main, args)
