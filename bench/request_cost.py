"""What one request costs the server (issue 26: at most 1 ms of server CPU
before its first token, and under 1.5 ms of added time to first token at
p50): one-token answers, one request at a time, direct and through
``hermes-trio serve`` (pinned as bench/load.py pins). Prints the server's
CPU per request and time to first token p50/p95, direct and through.

With ``--profile FILE`` the server runs under cProfile and writes its
profile to FILE when it ends (``python -m pstats FILE``).

``--targets baseline --baseline PYTHON`` measures another checkout's
hermes-trio (its venv's python) beside this one. ``--targets`` adds the
floors of bench/relay_floor.py, measured the same way: ``raw`` (trio
sockets), ``pooled`` (httpx through the project's pool), ``hypercorn`` (a
bare ASGI relay on hypercorn, the HTTP server hermes-trio is built on),
``quart`` (the same relay as a quart-trio route): what a request costs
before any of the project's code runs.

    python bench/request_cost.py [--requests 400] [--route chat] [--profile out.prof]
                                 [--targets hermes,raw,pooled,hypercorn,quart] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import trio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import load  # noqa: E402  (bench/load.py, beside this file)
import paced  # noqa: E402  (bench/paced.py)

from hermes_trio.testing import TextReply, open_scripted_server  # noqa: E402


async def generate(url: str, requests: int, route: str) -> dict:
    return await load.loadgen(url, 1, route, requests)


def _server(
    target: str, model_url: str, profile: str | None, baseline: str
) -> AbstractAsyncContextManager:
    if target in ("hermes", "baseline"):
        python = baseline if target == "baseline" else sys.executable
        return paced.hermes(model_url, 1, "8", profile, python)
    command = [sys.executable, str(HERE / "relay_floor.py"), "--serve", target]
    return load.serve_process([*command, "--upstream", model_url])


async def measure(
    target: str, model_url: str, requests: int, route: str, profile: str | None, baseline: str
) -> tuple[float, float, float, dict]:
    """(server CPU ms per request, TTFT p50 direct, through, through's summary)."""
    async with _server(target, model_url, profile, baseline) as (url, pid):
        await generate(url, 40, route)  # warm: imports, first connections
        direct = load.summarize(await generate(model_url, requests, route))
        before = load.cpu_seconds(pid)
        through = load.summarize(await generate(url, requests, route))
        cpu = load.cpu_seconds(pid) - before
    return cpu / requests * 1e3, direct["p50"], through["p50"], through


async def main(
    requests: int,
    route: str,
    profile: str | None,
    targets: list[str],
    rounds: int,
    baseline: str,
) -> None:
    load.pin_here()
    seen: dict[str, list[tuple[float, float, float, dict]]] = {t: [] for t in targets}
    async with open_scripted_server(default=TextReply(tokens=[" w0"]), record=False) as model:
        # Rounds interleave the targets, so that a slower spell of a shared
        # machine falls on all of them; the median round is reported.
        for _ in range(rounds):
            for target in targets:
                seen[target].append(
                    await measure(target, model.base_url, requests, route, profile, baseline)
                )
    for target in targets:
        runs = sorted(seen[target], key=lambda run: run[0])
        cpu, direct, through, summary = runs[len(runs) // 2]
        added = sorted(run[2] - run[1] for run in runs)[len(runs) // 2]
        print(
            f"{route} {target:9}: c=1, one-token answers, {requests} requests, median of "
            f"{rounds}: server CPU {cpu:.2f} ms per request (rounds "
            f"{', '.join(f'{run[0]:.2f}' for run in seen[target])}); TTFT p50 {direct:.2f} "
            f"direct / {through:.2f} through, added p50 {added:+.2f} ms; "
            f"failed {summary['failed']}",
            flush=True,
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--route", default="chat", choices=("chat", "responses"))
    parser.add_argument("--profile", default=None, help="write the server's cProfile here")
    parser.add_argument("--targets", default="hermes", help="hermes, raw, pooled, hypercorn, quart")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds; the median")
    parser.add_argument(
        "--baseline", help="target 'baseline': this python's hermes_trio (another checkout's venv)"
    )
    args = parser.parse_args()
    profile = str(Path(args.profile).resolve()) if args.profile else None
    trio.run(
        main,
        args.requests,
        args.route,
        profile,
        args.targets.split(","),
        args.rounds,
        args.baseline or sys.executable,
    )
