"""What one request costs the server (issue 26: at most 1 ms of server CPU
before its first token, and under 1.5 ms of added time to first token at
p50): one-token answers, one request at a time, direct and through
``hermes-trio serve`` (pinned as bench/load.py pins). Prints the server's
CPU per request and time to first token p50/p95, direct and through.

With ``--profile FILE`` the server runs under cProfile and writes its
profile to FILE when it ends (``python -m pstats FILE``).

    python bench/request_cost.py [--requests 400] [--route chat] [--profile out.prof]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import trio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import load  # noqa: E402  (bench/load.py, beside this file)
import paced  # noqa: E402  (bench/paced.py)

from hermes_trio.testing import TextReply, open_scripted_server  # noqa: E402


async def generate(url: str, requests: int, route: str) -> dict:
    return await load.loadgen(url, 1, route, requests)


async def main(requests: int, route: str, profile: str | None) -> None:
    load.pin_here()
    async with open_scripted_server(default=TextReply(tokens=[" w0"]), record=False) as model:
        async with paced.hermes(model.base_url, 1, "8", profile) as (url, pid):
            await generate(url, 40, route)  # warm: imports, first connections
            direct = load.summarize(await generate(model.base_url, requests, route))
            before = load.cpu_seconds(pid)
            through = load.summarize(await generate(url, requests, route))
            cpu = load.cpu_seconds(pid) - before
    print(
        f"{route}: c=1, one-token answers, {requests} requests: server CPU "
        f"{cpu / requests * 1e3:.2f} ms per request; TTFT p50 {direct['p50']:.2f} direct / "
        f"{through['p50']:.2f} through (+{through['p50'] - direct['p50']:.2f} ms), p95 "
        f"{direct['p95']:.2f} / {through['p95']:.2f}; failed {through['failed']}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--route", default="chat", choices=("chat", "responses"))
    parser.add_argument("--profile", default=None, help="write the server's cProfile here")
    args = parser.parse_args()
    profile = str(Path(args.profile).resolve()) if args.profile else None
    trio.run(main, args.requests, args.route, profile)
