"""The floor under ``hermes-trio serve``'s CPU per token: minimal relays
built from the same libraries, measured exactly as bench/load.py measures
the server (pinned to core 0, the scripted model server and the load
generator on core 1, 200 tokens 2 ms apart or with no delay).

- ``raw``: trio sockets only. Reads the client's request, sends it to the
  model server as it is, and copies the answer's bytes back: one read and
  one write per token, no parsing at all.
- ``httpx``: the upstream request through httpx (``AsyncClient.stream``,
  ``aiter_raw``), the answer's body copied to the client as chunked bytes
  framed by hand: what reading the model the way hermes-trio does costs,
  with a free downstream.
- ``pooled``: the same through the project's own connection pool
  (``llm/pool.py`` ``PooledTransport``, as ``hermes-trio serve`` reads the
  model server).
- ``hypercorn``: the HTTP server hermes-trio is built on, bare: hypercorn's
  own trio ``serve`` and a plain ASGI app that reads the body and relays
  the pooled upstream answer as it comes. What the HTTP framework costs
  before any of the project's code.
- ``quart``: the same relay as a quart-trio route returning a streamed
  response (the web framework hermes-trio's app is written in).
- ``refuse``: bare hypercorn answering every request with a 429 and
  ``Retry-After`` (the floor under a refusal's cost: bench/storm.py).

With ``--paced`` the floors run at issue 26's profile instead (many streams
starting together, a token every 50 ms: bench/paced.py), direct alongside:

    python bench/relay_floor.py --paced [--streams 120] [--modes raw,httpx,pooled]

    python bench/relay_floor.py [--modes raw,httpx] [--levels 50] [--routes chat,responses]

The relay runs as this same file with ``--serve MODE --upstream URL``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import httpx
import trio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import load  # noqa: E402  (bench/load.py, beside this file)

from hermes_trio.llm.pool import PooledTransport  # noqa: E402
from hermes_trio.testing import TextReply, open_scripted_server  # noqa: E402


async def _read_request(stream: trio.SocketStream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        piece = await stream.receive_some(65536)
        if not piece:
            raise EOFError
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        body += await stream.receive_some(65536)
    return head + b"\r\n\r\n" + body


async def _raw(client: trio.SocketStream, host: str, port: int) -> None:
    request = await _read_request(client)
    upstream = await trio.open_tcp_stream(host, port)
    async with upstream:
        await upstream.send_all(request)
        while data := await upstream.receive_some(65536):
            await client.send_all(data)


async def _httpx(client: trio.SocketStream, http: httpx.AsyncClient, base: str) -> None:
    request = await _read_request(client)
    head, _, body = request.partition(b"\r\n\r\n")
    path = head.split(b" ")[1].decode()
    async with http.stream(
        "POST", base + path, content=body, headers={"Content-Type": "application/json"}
    ) as response:
        await client.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        async for data in response.aiter_raw():
            await client.send_all(b"%x\r\n%b\r\n" % (len(data), data))
        await client.send_all(b"0\r\n\r\n")


def _asgi_relay(http: httpx.AsyncClient, base: str) -> object:
    """A bare ASGI app: the request's body to the model server, its answer
    back chunk by chunk."""

    async def app(scope: dict, receive: object, send: object) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":  # type: ignore[operator]
                await send({"type": message["type"] + ".complete"})  # type: ignore[operator]
            await send({"type": "lifespan.shutdown.complete"})  # type: ignore[operator]
            return
        body = b""
        while True:
            message = await receive()  # type: ignore[operator]
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        async with http.stream(
            "POST",
            base + scope["path"],
            content=body,
            headers={"Content-Type": "application/json"},
        ) as response:
            await send(  # type: ignore[operator]
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")],
                }
            )
            async for data in response.aiter_raw():
                await send({"type": "http.response.body", "body": data, "more_body": True})  # type: ignore[operator]
            await send({"type": "http.response.body", "body": b""})  # type: ignore[operator]

    return app


def _quart_relay(http: httpx.AsyncClient, base: str) -> object:
    """The same relay as a quart-trio route with a streamed response."""
    from quart import request
    from quart_trio import QuartTrio

    app = QuartTrio(__name__)

    @app.post("/v1/<path:rest>")
    async def relay(rest: str) -> object:
        body = await request.get_data()
        send, receive = trio.open_memory_channel[bytes](0)

        async def pump() -> None:
            async with (
                send,
                http.stream(
                    "POST",
                    f"{base}/v1/{rest}",
                    content=body,
                    headers={"Content-Type": "application/json"},
                ) as response,
            ):
                async for data in response.aiter_raw():
                    await send.send(data)

        async def chunks() -> object:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pump)
                async for data in receive:
                    yield data

        return chunks(), 200, {"Content-Type": "text/event-stream"}

    return app


def _refuse_all() -> object:
    """A bare ASGI app that refuses every request (429, ``Retry-After``)."""
    body = b'{"error":{"message":"busy","type":"rate_limit_error","param":null,"code":null}}'

    async def app(scope: dict, receive: object, send: object) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":  # type: ignore[operator]
                await send({"type": message["type"] + ".complete"})  # type: ignore[operator]
            await send({"type": "lifespan.shutdown.complete"})  # type: ignore[operator]
            return
        headers = [(b"content-type", b"application/json"), (b"retry-after", b"1")]
        await send({"type": "http.response.start", "status": 429, "headers": headers})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": body})  # type: ignore[operator]

    return app


async def _serve_asgi(app: object) -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None

    async with trio.open_nursery() as nursery:
        binds = await nursery.start(hypercorn_serve, app, config)
        print(f"listening on {binds[0]}/v1", flush=True)


async def serve(mode: str, upstream: str) -> None:
    target = httpx.URL(upstream)
    host, port = target.host, target.port or 80
    base = f"http://{host}:{port}"
    if mode == "refuse":
        await _serve_asgi(_refuse_all())
        return
    if mode in ("hypercorn", "quart"):
        transport = PooledTransport(max_idle=64)
        async with httpx.AsyncClient(timeout=None, transport=transport) as http:
            make = _asgi_relay if mode == "hypercorn" else _quart_relay
            await _serve_asgi(make(http, base))
        return
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    print(f"listening on http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/v1", flush=True)
    if mode == "pooled":
        client = httpx.AsyncClient(timeout=None, transport=PooledTransport(max_idle=64))
    else:
        client = httpx.AsyncClient(timeout=None, limits=httpx.Limits(max_connections=None))
    async with client as http:

        async def handle(client: trio.SocketStream) -> None:
            async with client:
                try:
                    if mode == "raw":
                        await _raw(client, host, port)
                    else:
                        await _httpx(client, http, base)
                except (EOFError, trio.BrokenResourceError, httpx.HTTPError):
                    pass

        await trio.serve_listeners(handle, listeners)


async def measure(modes: list[str], levels: list[int], routes: list[str]) -> None:
    load.pin_here()
    for route in routes:
        for label, delay in (("200 tokens, 2 ms apart", 0.002), ("200 tokens, no delay", 0.0)):
            reply = TextReply(tokens=load.TOKENS, delay=delay)
            async with open_scripted_server(default=reply, record=False) as model:
                for mode in modes:
                    process = await trio.lowlevel.open_process(
                        [sys.executable, __file__, "--serve", mode, "--upstream", model.base_url],
                        stdout=subprocess.PIPE,
                        preexec_fn=load.pin_server,
                    )
                    try:
                        assert process.stdout is not None
                        line = b""
                        while not line.endswith(b"\n"):
                            line += await process.stdout.receive_some(4096)
                        url = line.split(b"listening on ")[1].split()[0].decode()
                        for level in levels:
                            direct = load.summarize(
                                await load.loadgen(model.base_url, level, route)
                            )
                            before = load.cpu_seconds(process.pid)
                            through = load.summarize(await load.loadgen(url, level, route))
                            cpu = load.cpu_seconds(process.pid) - before
                            print(
                                f"{route:9} {label:23} {mode:5} c={level:<3} "
                                f"{cpu / max(1, through['tokens']) * 1e6:5.1f} µs CPU per token, "
                                f"tokens/s {through['tps'] / direct['tps']:4.2f}x direct, "
                                f"failed {through['failed']}/{through['requests']}",
                                flush=True,
                            )
                    finally:
                        process.terminate()
                        await process.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="raw,httpx")
    parser.add_argument("--levels", default="50")
    parser.add_argument("--routes", default="chat,responses")
    parser.add_argument("--paced", action="store_true", help="issue 26's profile (paced.py)")
    parser.add_argument("--streams", type=int, default=120, help="with --paced")
    parser.add_argument(
        "--serve",
        choices=("raw", "httpx", "pooled", "hypercorn", "quart", "refuse"),
        help=argparse.SUPPRESS,
    )
    parser.add_argument("--upstream", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        trio.run(serve, args.serve, args.upstream)
    elif args.paced:
        import paced  # bench/paced.py, beside this file

        modes = args.modes if "--modes" in sys.argv else "raw,httpx,pooled"
        trio.run(
            paced.main,
            argparse.Namespace(
                streams=args.streams,
                interval=0.05,
                targets=modes,
                max_concurrent="auto",
                workers=1,
                scale="",
                profile=None,
            ),
        )
    else:
        trio.run(
            measure,
            args.modes.split(","),
            [int(x) for x in args.levels.split(",")],
            args.routes.split(","),
        )
