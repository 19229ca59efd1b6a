"""Load benchmark for ``hermes-trio serve`` (issue 3 targets).

N concurrent streaming clients (a separate load-generator process,
bench/loadgen.py) talk once directly to the scripted model server and once
through ``hermes-trio serve`` in front of it. Replies are 200 tokens, 2 ms
apart and with no delay. Prints, as ratios to direct: time to first token
(p50, p95) and aggregate tokens per second at concurrency 1, 10, 50 and 200;
failed requests; the CPU the server used at each level (cores, per token and
per request, and how busy the whole machine was: a saturated machine explains
a ratio); the server's peak memory; and the time from a client closing
mid-stream to the model server seeing its connection closed, for a fast
stream and a slow one (a token every 250 ms).

Both routes are measured, ``/v1/chat/completions`` and ``/v1/responses``
(``--routes``). On a machine with two cores or more the server runs pinned
to core 0, the model server (this process) and the load generator to core
1: server CPU per token is the figure that holds from machine to machine.

With ``--workers N`` the server runs as ``serve --workers N``; its CPU and
memory are those of the supervisor and all its workers together
(``api_server.max_concurrent`` stays 256, per worker).

    python bench/load.py [--levels 1,10,50,200] [--cancel-rounds 20] [--workers N]
                         [--routes chat,responses]
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
from pathlib import Path

import trio

from hermes_trio.testing import ScriptedModelServer, TextReply, open_scripted_server

HERE = Path(__file__).resolve().parent
TOKENS = [f" w{i}" for i in range(200)]
REQUEST = b'{"model":"m","stream":true,"messages":[{"role":"user","content":"go"}]}'


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


WORKERS = 1


@asynccontextmanager
async def hermes_serve(model_url: str) -> AsyncIterator[tuple[str, int]]:
    """``hermes-trio serve`` (``--workers WORKERS``) as a user starts it;
    yields (base_url, pid)."""
    with tempfile.TemporaryDirectory() as tmp:
        config = (
            f"model: {{base_url: '{model_url}', name: scripted}}\n"
            # The load generator is one client address: it may hold every connection.
            "api_server: {port: 0, max_concurrent: 256, max_connections_per_client: 256}\n"
            f"store: {{data_dir: '{tmp}'}}\n"
        )
        await trio.Path(tmp, "config.yaml").write_text(config)
        command = [sys.executable, "-m", "hermes_trio.cli", "serve", "--workers", str(WORKERS)]
        async with serve_process(command, tmp) as found:
            yield found


@asynccontextmanager
async def serve_process(
    command: list[str], cwd: str | None = None
) -> AsyncIterator[tuple[str, int]]:
    """A server process (pinned: :func:`pin_server`) from its "listening
    on URL" line to its end; yields (base_url, pid)."""
    process = await trio.lowlevel.open_process(
        command,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        preexec_fn=pin_server,
    )
    try:
        assert process.stdout is not None
        buffer = b""
        with trio.fail_after(30):
            while b"listening on " not in buffer or not buffer.endswith(b"\n"):
                buffer += await process.stdout.receive_some(4096)
        yield buffer.split(b"listening on ")[1].split()[0].decode(), process.pid
    finally:
        process.terminate()
        with trio.move_on_after(10):
            await process.wait()
        process.kill()


async def loadgen(url: str, concurrency: int, route: str = "chat", requests: int = 0) -> dict:
    result = await trio.run_process(
        [
            sys.executable,
            str(HERE / "loadgen.py"),
            "--url",
            url,
            "--concurrency",
            str(concurrency),
            "--route",
            route,
            *(["--requests", str(requests)] if requests else []),
        ],
        capture_stdout=True,
    )
    return json.loads(result.stdout)


# The server on a core of its own; the model server (this process) and the
# load generator (its child) on the other: the layout the figures are for.
SERVER_CORES = {0}
OTHER_CORES = {1}


def pin_here() -> None:
    if (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, OTHER_CORES)


def pin_server() -> None:
    # In the server's process before exec; its workers inherit it.
    if (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, SERVER_CORES)


def summarize(run: dict) -> dict:
    results = run["results"]
    ttfts = [r["ttft"] for r in results if r["ttft"] is not None]
    return {
        "p50": pct(ttfts, 0.5) * 1000 if ttfts else float("nan"),
        "p95": pct(ttfts, 0.95) * 1000 if ttfts else float("nan"),
        "tps": sum(r["tokens"] for r in results) / run["wall"],
        "failed": sum(not r["ok"] for r in results),
        "tokens": sum(r["tokens"] for r in results),
        "requests": len(results),
    }


def process_tree(pid: int) -> list[int]:
    """``pid`` and its children (a ``--workers`` supervisor's workers)."""
    tree = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        tree += [int(child) for child in (task / "children").read_text().split()]
    return tree


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process and its children have used so far."""
    total = 0
    for member in process_tree(pid):
        fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def peak_rss_mb(pid: int) -> float:
    """The peak resident memory of the process and its children, added up."""
    total = 0
    for member in process_tree(pid):
        for line in Path(f"/proc/{member}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1])
    return total / 1024


async def throughput(levels: list[int], routes: list[str]) -> None:
    runs = [
        (route, label, delay)
        for route in routes
        for label, delay in (("200 tokens, 2 ms apart", 0.002), ("200 tokens, no delay", 0.0))
    ]
    for route, label, delay in runs:
        print(f"\n== {route}: {label}, serve --workers {WORKERS} ==")
        print(
            f"{'conc':>5} | {'TTFT p50 ms direct/hermes (+added, ratio)':<44} | "
            f"{'TTFT p95 ms direct/hermes':<26} | {'tokens/s direct/hermes (ratio)':<32} | failed"
        )
        reply = TextReply(tokens=TOKENS, delay=delay)
        async with open_scripted_server(default=reply, record=False) as model:
            async with hermes_serve(model.base_url) as (url, pid):
                for level in levels:
                    direct = summarize(await loadgen(model.base_url, level, route))
                    cpu_before, machine_before = cpu_seconds(pid), machine_busy()
                    started = trio.current_time()
                    through = summarize(await loadgen(url, level, route))
                    wall = trio.current_time() - started
                    cpu = cpu_seconds(pid) - cpu_before
                    machine_after = machine_busy()
                    busy = machine_after[0] - machine_before[0]
                    total = machine_after[1] - machine_before[1]
                    added = through["p50"] - direct["p50"]
                    ratio = through["p50"] / direct["p50"]
                    print(
                        f"{level:>5} | {direct['p50']:7.2f} / {through['p50']:7.2f} "
                        f"(+{added:6.2f}, {ratio:5.2f}x)"
                        f"       | {direct['p95']:7.2f} / {through['p95']:7.2f}      "
                        f"   | {direct['tps']:9.0f} / {through['tps']:9.0f} "
                        f"({through['tps'] / direct['tps']:4.2f}x)     "
                        f"| {direct['failed']}/{direct['requests']} direct, "
                        f"{through['failed']}/{through['requests']} hermes"
                    )
                    print(
                        f"      hermes-trio serve used {cpu / wall:4.2f} cores "
                        f"({cpu / max(1, through['tokens']) * 1e6:5.1f} µs CPU per token, "
                        f"{cpu / max(1, through['requests']) * 1e3:5.2f} ms per request, all "
                        f"included); all {os.cpu_count()} CPUs {busy / max(1, total):4.0%} busy"
                    )
                print(f"hermes-trio serve peak memory (VmHWM): {peak_rss_mb(pid):.1f} MB")


async def close_mid_stream(
    host: str, port: int, path: str, model: ScriptedModelServer, tokens_first: int
) -> float:
    """Seconds from our close to the model server seeing its connection closed."""
    stream = await trio.open_tcp_stream(host, port)
    await stream.send_all(
        f"POST {path}/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(REQUEST)}\r\n\r\n".encode()
        + REQUEST
    )
    seen = 0
    while seen < tokens_first:
        data = await stream.receive_some(65536)
        seen += data.count(b'"content":"w') + data.count(b'"content":" w')
    # Not requests[-1]: serve's start-up check (GET /models) may come later.
    connection = model.model_requests[-1].connection_id
    closed_at = trio.current_time()
    await stream.aclose()
    with trio.fail_after(10):
        record = await model.wait_connection_closed(connection)
    assert record.closed_at is not None
    return record.closed_at - closed_at


async def cancellation(rounds: int) -> None:
    print("\n== client closes mid-stream → model server sees its connection closed ==")
    for label, reply in (
        ("fast stream (2 ms/token)", TextReply(tokens=TOKENS * 20, delay=0.002)),
        ("slow stream (250 ms/token)", TextReply(tokens=TOKENS[:40], delay=0.25)),
    ):
        async with open_scripted_server(default=reply) as model:
            async with hermes_serve(model.base_url) as (url, _):
                direct, through = [], []
                for _ in range(rounds):
                    direct.append(await close_mid_stream("127.0.0.1", model.port, "/v1", model, 2))
                    port = int(url.split(":")[2].split("/")[0])
                    through.append(await close_mid_stream("127.0.0.1", port, "/v1", model, 2))
        print(
            f"{label}: direct p50 {pct(direct, 0.5) * 1000:.2f} ms "
            f"p95 {pct(direct, 0.95) * 1000:.2f} ms | "
            f"through hermes p50 {pct(through, 0.5) * 1000:.2f} ms "
            f"p95 {pct(through, 0.95) * 1000:.2f} ms (max {max(through) * 1000:.2f} ms)"
        )


async def main(levels: list[int], rounds: int, routes: list[str]) -> None:
    pin_here()
    await throughput(levels, routes)
    if rounds > 0:
        await cancellation(rounds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,10,50,200")
    parser.add_argument("--cancel-rounds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=1, help="serve --workers N")
    parser.add_argument("--routes", default="chat,responses", help="chat, responses or both")
    args = parser.parse_args()
    WORKERS = args.workers
    trio.run(
        main,
        [int(x) for x in args.levels.split(",")],
        args.cancel_rounds,
        args.routes.split(","),
    )
