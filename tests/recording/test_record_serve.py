"""End to end: a real ``serve --record DIR``, one streamed request that
runs the terminal tool, then ``hermes-trio replay`` on the file it wrote."""

from __future__ import annotations

import json
import signal
import stat

import httpx
import trio
from support import clean_env, run_cli, start_serve

from hermes_trio.testing import TextReply, ToolCallReply, open_scripted_server

MODEL_KEY = "sk-e2e-model-key-0123456789abcdef"
SERVER_KEY = "e2e-server-key-0123456789abcdef"


async def _leave_mid_answer(
    base_url: str, body: dict, headers: dict[str, str], *, until: bytes
) -> None:
    url = httpx.URL(base_url)
    payload = json.dumps(body).encode()
    head = (
        f"POST {url.path}/chat/completions HTTP/1.1\r\nHost: {url.host}:{url.port}\r\n"
        f"Authorization: {headers['Authorization']}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    stream = await trio.open_tcp_stream(url.host, url.port or 80)
    async with stream:
        await stream.send_all(head.encode() + payload)
        seen = b""
        with trio.fail_after(10):
            while until not in seen:
                seen += await stream.receive_some(65536)


async def test_serve_records_a_turn_that_replay_reproduces(tmp_path) -> None:
    script = [
        ToolCallReply([("terminal", {"command": "echo recorded-tool-output"})], delay=0.05),
        TextReply("The tool said recorded-tool-output.", delay=0.2),
        TextReply(" ".join(f"w{i}" for i in range(40)), delay=0.05),
    ]
    record = tmp_path / "recordings"
    env = clean_env(
        HERMES_DATA_DIR=str(tmp_path / "data"),
        HERMES_MODEL_API_KEY=MODEL_KEY,
        API_SERVER_KEY=SERVER_KEY,
    )
    async with open_scripted_server(script) as model, trio.open_nursery() as nursery:
        env["HERMES_MODEL_BASE_URL"] = model.base_url
        served = await start_serve(nursery, env, tmp_path, args=["--record", str(record)])
        began = trio.current_time()
        async with httpx.AsyncClient(timeout=30) as http:
            body = {
                "model": "hermes",
                "stream": True,
                "messages": [{"role": "user", "content": "run the echo"}],
            }
            headers = {"Authorization": f"Bearer {SERVER_KEY}"}
            async with http.stream(
                "POST", f"{served.base_url}/chat/completions", json=body, headers=headers
            ) as response:
                assert response.status_code == 200
                streamed = "".join([line async for line in response.aiter_lines()])
        live = trio.current_time() - began
        assert "recorded-tool-output" in streamed
        # A second turn whose client goes away mid-answer (a raw socket:
        # leaving an httpx stream early warns from httpx's internals).
        body["messages"] = [{"role": "user", "content": "count"}]
        await _leave_mid_answer(served.base_url, body, headers, until=b"w3")
        with trio.fail_after(10):
            # Another process writes it, as its turn unwinds: nothing to wait on.
            while len(list(record.iterdir())) < 2:  # noqa: ASYNC110
                await trio.sleep(0.02)
        served.process.send_signal(signal.SIGINT)
        with trio.fail_after(8):
            await served.process.wait()
        nursery.cancel_scope.cancel()
    files = sorted(record.iterdir())
    assert len(files) == 2
    text = files[0].read_text()
    cut = json.loads(files[1].read_text())
    assert cut["outcome"] == "cancelled" and cut["cancelled"]["cause"]
    assert stat.S_IMODE(record.stat().st_mode) == 0o700
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    for secret in (MODEL_KEY, SERVER_KEY):
        assert secret not in text
    done = await run_cli(["replay", *map(str, files)], clean_env(), tmp_path)
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    assert "ToolCallFinished" in out and "recorded-tool-output" in out
    # The replay's own run (on the mock clock) takes a fraction of the live turn.
    took = float(out.split("== ")[1].rsplit(",", 1)[1].split(" s)")[0])
    assert took < live / 2, (took, live)
