"""Load generator for bench/load.py: N concurrent streaming clients of the
chat route or the Responses route (``--route``).

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

# route -> (path, body, the first token's frame, the stream's last frame)
ROUTES: dict[str, tuple[str, bytes, re.Pattern[bytes], bytes]] = {
    "chat": (
        "/chat/completions",
        json.dumps(
            {
                "model": "m",
                "stream": True,
                "messages": [{"role": "user", "content": "Tell me a story."}],
            }
        ).encode(),
        re.compile(rb'"content":"[^"]'),
        b"data: [DONE]",
    ),
    "responses": (
        "/responses",
        json.dumps({"model": "m", "stream": True, "input": "Tell me a story."}).encode(),
        re.compile(rb'"delta":"[^"]'),
        b"response.completed",
    ),
}


_DELTA = re.compile(rb'"delta":"[^"]*"')


def _count(data: bytes, token: re.Pattern[bytes], route: str) -> int:
    if route == "chat":
        return len(token.findall(data))
    return sum(len(token.findall(delta)) for delta in _DELTA.findall(data))


async def one_request(
    host: str, port: int, path: str, token: re.Pattern[bytes], route: str
) -> dict[str, object]:
    endpoint, body, first_frame, last_frame = ROUTES[route]
    stream = await trio.open_tcp_stream(host, port)
    request = (
        f"POST {path}{endpoint} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + body
    started = time.perf_counter()
    first: float | None = None
    tokens = 0
    tail = b""
    head = b""
    ended = False
    async with stream:
        await stream.send_all(request)
        while True:
            data = await stream.receive_some(65536)
            if not data:
                break
            head = head or data[:64]
            window = tail + data
            if first is None and first_frame.search(window):
                first = time.perf_counter()
            # Count the scripted tokens themselves, not frames: a server that
            # coalesces several tokens into one frame must not look slower.
            # On the Responses route only inside deltas: its closing events
            # repeat the whole text.
            tokens += _count(window, token, route) - _count(tail, token, route)
            tail = window[-4096:]
            if last_frame in window:
                ended = True
                break
    ok = head.startswith(b"HTTP/1.1 200") and ended
    return {
        "ttft": (first - started) if first else None,
        "tokens": tokens,
        "ok": ok,
        "status": head[9:12].decode(errors="replace"),
    }


async def main(url: str, concurrency: int, requests: int, pattern: str, route: str) -> None:
    token = re.compile(pattern.encode())
    parts = urlsplit(url)
    host, port, path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path.rstrip("/")
    results: list[dict[str, object]] = []
    queue = iter(range(requests))

    async def worker() -> None:
        for _ in queue:
            try:
                results.append(await one_request(host, port, path, token, route))
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
    parser.add_argument("--route", choices=sorted(ROUTES), default="chat")
    args = parser.parse_args()
    trio.run(
        main,
        args.url,
        args.concurrency,
        args.requests or max(4 * args.concurrency, 60),
        args.token_pattern,
        args.route,
    )
