"""How long a big request body stalls the other streams of ``hermes-trio serve``.

One client streams a long answer (a token every 2 ms from the scripted model
server, both in their own processes) while another posts ~10 MB bodies to the
same server. Prints the longest gap between two chunks of the stream while
each body was handled, next to the longest gap without one.

Bodies: one 10 MB message (refused after parsing, so only the parse and the
checks count), 10 MB of 80,000 small messages (refused the same way), and
one 10 MB message that runs a whole turn (its model request is 10 MB too).

    python bench/big_body.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _model_server import model_server_process
from load import hermes_serve

MB = 1024 * 1024


def bodies() -> dict[str, bytes]:
    big_text = "x" * (10 * MB - 200)
    many = [{"role": "user", "content": "word " * 18} for _ in range(80_000)]
    return {
        "one 10 MB message, refused after parse": json.dumps(
            {"model": "m", "n": 2, "messages": [{"role": "user", "content": big_text}]}
        ).encode(),
        "80k small messages (10 MB), refused after parse": json.dumps(
            {"model": "m", "n": 2, "messages": many}
        ).encode(),
        "one 10 MB message, whole turn": json.dumps(
            {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": big_text}]}
        ).encode(),
    }


async def watch_stream(url: str, arrivals: list[float], started: trio.Event) -> None:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    async with (
        httpx.AsyncClient(timeout=60) as client,
        client.stream("POST", f"{url}/chat/completions", json=body) as reply,
    ):
        async for _ in reply.aiter_raw():
            arrivals.append(trio.current_time())
            started.set()


def longest_gap(arrivals: list[float], start: float, end: float) -> float:
    inside = [t for t in arrivals if start <= t <= end]
    return max((b - a for a, b in itertools.pairwise(inside)), default=0.0)


async def main(rounds: int) -> None:
    payloads = bodies()
    async with model_server_process(tokens=20_000, delay=0.002) as model_url:
        async with hermes_serve(model_url) as (url, _pid):
            for name, payload in payloads.items():
                worst: list[float] = []
                base: list[float] = []
                for _ in range(rounds):
                    arrivals: list[float] = []
                    started = trio.Event()
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(watch_stream, url, arrivals, started)
                        await started.wait()
                        await trio.sleep(0.5)
                        quiet = trio.current_time()
                        await trio.sleep(0.5)
                        begin = trio.current_time()
                        async with httpx.AsyncClient(timeout=60) as client:
                            reply = await client.post(
                                f"{url}/chat/completions",
                                content=payload,
                                headers={"Content-Type": "application/json"},
                            )
                        end = trio.current_time()
                        await trio.sleep(0.2)
                        nursery.cancel_scope.cancel()
                    worst.append(longest_gap(arrivals, begin, end))
                    base.append(longest_gap(arrivals, quiet, begin))
                print(
                    f"{name}: status {reply.status_code}, handled in {end - begin:.2f} s; "
                    f"longest stream gap {max(worst) * 1000:.0f} ms "
                    f"(without it {max(base) * 1000:.0f} ms)"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    trio.run(main, parser.parse_args().rounds)
