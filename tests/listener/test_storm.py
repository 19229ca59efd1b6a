"""A storm of clients that ask again at once when refused, Retry-After or
not, against the real ``hermes-trio serve`` (issue 36): the stream already
admitted goes on to its end; the storm's refusals come at the pace of the
listener's refusal budget (``listener/holding.py``), not as fast as the
clients ask; every refusal carries Retry-After and the JSON error; a
request that is no turn request is served, not refused, meanwhile; and a
client that honours Retry-After gets in once room frees.

The budget is made small here (a burst of 4, then 10 a second) so that a
bounded storm shows it; the figures under a real storm are bench/storm.py's.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import trio
from support import child_patches, clean_env, start_serve

from hermes_trio.testing import TextReply, open_scripted_server

BURST, PACE = 4, 10.0
TOKENS = [f"w{i} " for i in range(20)]
CHAT = json.dumps(
    {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}]}
).encode()


async def ask(
    host: str, port: int, method: str = "POST", path: str = "/v1/chat/completions"
) -> tuple[int, dict[str, str], bytes]:
    """One request on its own connection: status, headers, whole body."""
    body = CHAT if method == "POST" else b""
    request = (
        f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + body
    answer = b""
    async with await trio.open_tcp_stream(host, port) as stream:
        await stream.send_all(request)
        while data := await stream.receive_some(65536):
            answer += data
    head, _, rest = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, rest


def streamed_whole(body: bytes) -> bool:
    text = body.decode(errors="replace")
    return all(token.strip() in text for token in TOKENS) and "data: [DONE]" in text


async def test_a_storm_is_refused_at_the_budgets_pace_while_the_admitted_stream_goes_on(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.yaml").write_text(
        "api_server: {max_concurrent: 1, max_connections_per_client: 256}\n"
    )
    patches = {
        "hermes_trio.listener.holding": {"REFUSALS_PER_SECOND": PACE, "REFUSAL_BURST": BURST}
    }
    refusals: list[tuple[float, int, dict[str, str], bytes]] = []
    async with open_scripted_server(
        default=TextReply(tokens=TOKENS, delay=0.1), record=False
    ) as model:
        env = clean_env(
            HERMES_MODEL_BASE_URL=model.base_url,
            HERMES_DATA_DIR=str(tmp_path / "data"),
            **child_patches(patches),
        )
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path)
            url = urlsplit(served.base_url)
            host, port = url.hostname or "127.0.0.1", url.port or 80
            admitted_done = trio.Event()
            admitted: list[tuple[int, bytes]] = []

            async def admitted_stream() -> None:
                status, _, body = await ask(host, port)
                admitted.append((status, body))
                admitted_done.set()

            async def naive(count: list[int]) -> None:
                # Refused, it asks again at once, until the admitted stream ends.
                while not admitted_done.is_set() and count[0] < 200:
                    count[0] += 1
                    status, headers, body = await ask(host, port)
                    if status != 200:
                        refusals.append((trio.current_time(), status, headers, body))

            with trio.fail_after(60):
                nursery.start_soon(admitted_stream)
                await trio.sleep(0.5)  # the admitted stream holds the only slot
                started = trio.current_time()
                count = [0]
                async with trio.open_nursery() as storm:
                    for _ in range(20):
                        storm.start_soon(naive, count)
                    # Meanwhile a request that starts no turn is served.
                    health, _, _ = await ask(host, port, "GET", "/health")
                    assert health == 200
                ended = trio.current_time()
                # A client that honours Retry-After gets in once room frees.
                while True:
                    status, headers, body = await ask(host, port)
                    if status == 200:
                        assert streamed_whole(body)
                        break
                    refusals.append((trio.current_time(), status, headers, body))
                    await trio.sleep(float(headers["retry-after"]))
            nursery.cancel_scope.cancel()

    assert admitted and admitted[0][0] == 200 and streamed_whole(admitted[0][1])
    assert refusals
    for _, status, headers, body in refusals:
        assert status in (429, 503)
        assert headers["retry-after"] == "1"
        assert json.loads(body)["error"]["code"] in (
            "rate_limit_exceeded",
            "server_overloaded",
        )
    # The storm's clients asked as fast as they were answered; they were
    # answered at the budget's pace (a client asks again only once its
    # answer came, so this counts answers, not requests).
    during = sum(started <= at <= ended for at, *_ in refusals)
    assert during <= BURST + PACE * (ended - started) + 5, (during, ended - started)
