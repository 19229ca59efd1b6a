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
import json
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import load  # noqa: E402  (bench/load.py, beside this file)

from hermes_trio.testing import TextReply, open_scripted_server  # noqa: E402


@asynccontextmanager
async def serve(model_url: str, profile: str | None) -> AsyncIterator[tuple[str, int]]:
    with tempfile.TemporaryDirectory() as tmp:
        config = (
            f"model: {{base_url: '{model_url}', name: scripted}}\n"
            "api_server: {port: 0, max_concurrent: 8}\n"
            f"store: {{data_dir: '{tmp}'}}\n"
        )
        await trio.Path(tmp, "config.yaml").write_text(config)
        prefix = ["-m", "cProfile", "-o", profile] if profile else []
        process = await trio.lowlevel.open_process(
            [sys.executable, *prefix, "-m", "hermes_trio.cli", "serve"],
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            preexec_fn=load.pin_server,
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
            with trio.move_on_after(20):
                await process.wait()
            process.kill()


async def generate(url: str, requests: int, route: str) -> dict:
    result = await trio.run_process(
        [
            sys.executable,
            str(HERE / "loadgen.py"),
            "--url",
            url,
            "--concurrency",
            "1",
            "--requests",
            str(requests),
            "--route",
            route,
        ],
        capture_stdout=True,
    )
    return json.loads(result.stdout)


async def main(requests: int, route: str, profile: str | None) -> None:
    load.pin_here()
    async with open_scripted_server(default=TextReply(tokens=[" w0"]), record=False) as model:
        async with serve(model.base_url, profile) as (url, pid):
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
