"""A retry storm (issue 36): clients that keep a request in flight and,
refused, ask again at once, for a whole minute.

``--clients`` clients (600) each loop for ``--seconds`` (60): send a
streaming chat request (200 tokens ``--interval`` apart, 50 ms), read it
to its end; refused (429/503), send the next one at once (``--pattern
naive``: Retry-After ignored, as naive clients and proxies do), or after
the ``Retry-After`` it was given (``--pattern honour``). ``--pattern
burst`` is bench/paced.py's one burst: every client once, together.
Pinned as bench/paced.py pins: the server on core 0, the model server and
the load generator on core 1.

Per target (``hermes``; ``baseline``: another checkout's hermes-trio,
``--baseline PYTHON``, measured beside it in the same run): requests,
served whole, refused, broken; of the served, time to first token
(p50/p95, from the request's send, a wait to be accepted included) and
the largest gap between two tokens of a stream (p50/p99 over streams);
direct to the model server beside it (``--streams`` streams at once, for
the TTFT the model gives).

The CPU cost of a refusal (``--cost``): the server at its limit
(``max_concurrent: 1``, one stream running), ``--cost-clients`` clients
retrying at once for ``--cost-seconds``; its CPU over the refusals
answered, less its CPU rate before the storm. Beside it, the floor:
bare hypercorn (bench/relay_floor.py ``--serve refuse``) answering every
request with a 429, measured the same way.

    python bench/storm.py [--pattern naive|honour|burst] [--clients 600] [--seconds 60]
                          [--targets hermes,baseline --baseline ../old/.venv/bin/python]
                          [--cost] [--profile FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import trio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import load  # noqa: E402  (bench/load.py, beside this file)
import paced  # noqa: E402  (bench/paced.py)

from hermes_trio.testing import TextReply, open_scripted_server  # noqa: E402


async def client(
    host: str, port: int, path: str, pattern: str, until: float, out: list[dict]
) -> None:
    start = trio.Event()
    start.set()
    while True:
        at = time.perf_counter()
        record = await paced.one_stream(host, port, path, start)
        record["at"] = at - (until - SECONDS[0])
        out.append(record)
        if pattern == "burst" or time.perf_counter() >= until:
            return
        if record.get("status") == "connect":
            await trio.sleep(0.05)  # the backlog is full: not a refusal
        elif pattern == "honour" and record.get("status") in ("429", "503"):
            await trio.sleep(float(record.get("retry_after_s") or 1.0))


SECONDS = [60.0]


async def generate(url: str, clients: int, pattern: str, seconds: float) -> None:
    SECONDS[0] = seconds
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host, port, path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path.rstrip("/")
    results: list[dict] = []
    begun = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(clients):
            nursery.start_soon(client, host, port, path, pattern, begun + seconds, results)
    print(json.dumps({"wall": time.perf_counter() - begun, "results": results}))


async def loadgen(url: str, clients: int, pattern: str, seconds: float) -> dict:
    result = await trio.run_process(
        [
            sys.executable,
            __file__,
            "--generate",
            url,
            "--clients",
            str(clients),
            "--pattern",
            pattern,
            "--seconds",
            str(seconds),
        ],
        capture_stdout=True,
        preexec_fn=load.pin_here,
    )
    return json.loads(result.stdout)


def show(label: str, run: dict, cpu: float | None = None) -> None:
    s = paced.summary(run)
    requests = s["streams"]
    line = (
        f"{label:<16} requests {requests:>6} served {s['served']:>5} "
        f"({s['served'] / max(1, requests):5.1%}) refused {s['refused']:>6} "
        f"(503 {s['refused_503']}, no Retry-After {s['refused_without_retry_after']}, "
        f"p95 {s['refusal_p95_ms']:7.1f} ms) broken {s['broken']:>3} | "
        f"TTFT p50/p95 {s['ttft_p50_ms']:7.1f} / {s['ttft_p95_ms']:7.1f} ms | "
        f"largest gap p50/p99 {s['gap_p50_ms']:6.1f} / {s['gap_p99_ms']:6.1f} ms"
    )
    if cpu is not None:
        line += f" | CPU {cpu / s['wall']:.2f} cores"
    print(line, flush=True)


async def storm(args: argparse.Namespace, model_url: str, target: str) -> None:
    python = args.baseline if target == "baseline" else sys.executable
    async with paced.hermes(model_url, 1, args.max_concurrent, args.profile, python) as (url, pid):
        before = load.cpu_seconds(pid)
        run = await loadgen(url, args.clients, args.pattern, args.seconds)
        show(target, run, load.cpu_seconds(pid) - before)
    if args.dump:
        await trio.Path(f"{args.dump}.{target}.json").write_text(json.dumps(run))


async def _refusal_cost(url: str, pid: int, args: argparse.Namespace, hold: bool) -> str:
    """CPU milliseconds per refusal answered at ``url`` under a storm."""
    async with trio.open_nursery() as nursery:
        if hold:  # one stream takes the only slot first
            nursery.start_soon(paced.one_stream, *_split(url), _set())
            await trio.sleep(1.0)
        idle_from, t0 = load.cpu_seconds(pid), time.perf_counter()
        await trio.sleep(1.0)
        idle_rate = (load.cpu_seconds(pid) - idle_from) / (time.perf_counter() - t0)
        before, t0 = load.cpu_seconds(pid), time.perf_counter()
        run = await loadgen(url, args.cost_clients, "naive", args.cost_seconds)
        spent = load.cpu_seconds(pid) - before - idle_rate * (time.perf_counter() - t0)
        nursery.cancel_scope.cancel()
    refused = sum(r.get("status") in ("429", "503") for r in run["results"])
    return (
        f"{refused:>6} refusals in {run['wall']:.1f} s ({refused / run['wall']:6.0f}/s), "
        f"CPU {spent * 1000 / max(1, refused):.3f} ms a refusal"
    )


def _split(url: str) -> tuple[str, int, str]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80, parts.path.rstrip("/")


def _set() -> trio.Event:
    event = trio.Event()
    event.set()
    return event


async def cost(args: argparse.Namespace, model_url: str) -> None:
    for target in args.targets.split(","):
        python = args.baseline if target == "baseline" else sys.executable
        async with paced.hermes(model_url, 1, "1", args.profile, python) as (url, pid):
            print(f"refusal cost  {target:<10}", await _refusal_cost(url, pid, args, True))
    command = [sys.executable, str(HERE / "relay_floor.py"), "--serve", "refuse"]
    async with load.serve_process([*command, "--upstream", model_url]) as (url, pid):
        print(f"refusal cost  {'floor':<10}", await _refusal_cost(url, pid, args, False))


async def main(args: argparse.Namespace) -> None:
    load.pin_here()
    # The refusal cost's one stream holds its slot past the whole storm.
    interval = 0.25 if args.cost else args.interval
    reply = TextReply(tokens=load.TOKENS, delay=interval)
    async with open_scripted_server(default=reply, record=False) as model:
        if args.cost:
            print(
                f"== refusal cost: {args.cost_clients} clients retrying at once for "
                f"{args.cost_seconds:g} s; {os.cpu_count()} CPUs =="
            )
            await cost(args, model.base_url)
            return
        print(
            f"== storm ({args.pattern}): {args.clients} clients for {args.seconds:g} s, "
            f"200 tokens {args.interval * 1000:.0f} ms apart; max_concurrent "
            f"{args.max_concurrent}; {os.cpu_count()} CPUs =="
        )
        for target in args.targets.split(","):
            show("direct", await paced.loadgen(model.base_url, args.streams))
            await storm(args, model.base_url, target)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=600)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--pattern", choices=("naive", "honour", "burst"), default="naive")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between tokens")
    parser.add_argument("--streams", type=int, default=160, help="direct: streams at once")
    parser.add_argument("--targets", default="hermes", help="hermes, baseline")
    parser.add_argument("--baseline", help="target 'baseline': this python's hermes_trio")
    parser.add_argument("--max-concurrent", default="auto", help="api_server.max_concurrent")
    parser.add_argument("--cost", action="store_true", help="the CPU cost of a refusal")
    parser.add_argument("--cost-clients", type=int, default=50)
    parser.add_argument("--cost-seconds", type=float, default=5.0)
    parser.add_argument("--profile", help="run the server under cProfile, written here")
    parser.add_argument("--dump", help="write each target's records to DUMP.TARGET.json")
    parser.add_argument("--generate", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.profile = str(Path(args.profile).resolve()) if args.profile else None
    if args.generate:
        trio.run(generate, args.generate, args.clients, args.pattern, args.seconds)
    else:
        trio.run(main, args)
