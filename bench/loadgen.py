"""Load generator for bench/load.py: N concurrent streaming chat clients.

Runs in its own process so its CPU does not count against the server under
test. Speaks HTTP/1.1 over raw trio sockets and only scans the bytes for
token frames, to stay as light as possible. Prints one JSON object:
per-request time to first token, tokens, failures, and the wall time.

    python bench/loadgen.py --url http://127.0.0.1:PORT/v1 --concurrency 50 --requests 100
"""

from __future__ import annotations

import argparse
import json
import re
import time
from urllib.parse import urlsplit

import trio

FIRST = re.compile(rb'"content":"[^"]')
BODY = json.dumps(
    {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Tell me a story."}]}
).encode()


async def one_request(
    host: str, port: int, path: str, token: re.Pattern[bytes]
) -> dict[str, object]:
    stream = await trio.open_tcp_stream(host, port)
    request = (
        f"POST {path}/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + BODY
    started = time.perf_counter()
    first: float | None = None
    tokens = 0
    tail = b""
    head = b""
    async with stream:
        await stream.send_all(request)
        while True:
            data = await stream.receive_some(65536)
            if not data:
                break
            head = head or data[:64]
            window = tail + data
            if first is None and FIRST.search(window):
                first = time.perf_counter()
            # Count the scripted tokens themselves, not frames: a server that
            # coalesces several tokens into one frame must not look slower.
            tokens += len(token.findall(window)) - len(token.findall(tail))
            tail = window[-64:]
            if b"data: [DONE]" in window:
                break
    ok = head.startswith(b"HTTP/1.1 200") and b"[DONE]" in tail
    return {
        "ttft": (first - started) if first else None,
        "tokens": tokens,
        "ok": ok,
        "status": head[9:12].decode(errors="replace"),
    }


async def main(url: str, concurrency: int, requests: int, pattern: str) -> None:
    token = re.compile(pattern.encode())
    parts = urlsplit(url)
    host, port, path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path.rstrip("/")
    results: list[dict[str, object]] = []
    queue = iter(range(requests))

    async def worker() -> None:
        for _ in queue:
            try:
                results.append(await one_request(host, port, path, token))
            except OSError as exc:
                results.append({"ttft": None, "tokens": 0, "ok": False, "status": str(exc)})

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)
    wall = time.perf_counter() - started
    print(json.dumps({"wall": wall, "results": results}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument(
        "--requests",
        type=int,
        default=0,
        help="default: 4 × concurrency, at least 60 (a steadier p50 at low concurrency)",
    )
    parser.add_argument(
        "--token-pattern", default=r" w\d+", help="regex matching one token of the scripted reply"
    )
    args = parser.parse_args()
    trio.run(
        main,
        args.url,
        args.concurrency,
        args.requests or max(4 * args.concurrency, 60),
        args.token_pattern,
    )
