"""``hermes-trio serve --workers 2`` as a user runs it: real processes on one
port, a worker killed and replaced, SIGTERM to the supervisor, a supervisor
killed, a worker that cannot start. And the ``X-Hermes-Worker`` header on
every kind of answer a worker gives."""

from __future__ import annotations

import json
import os
import re
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import trio
from support import (
    SHORT_SHUTDOWN,
    ServeProcess,
    child_patches,
    clean_env,
    make_config,
    run_cli,
    start_serve,
)

from hermes_trio.cli.serve_shared import STOP_GRACE
from hermes_trio.config import ApiServerConfig
from hermes_trio.listener import listening_socket
from hermes_trio.server.run import open_api_server
from hermes_trio.testing import ScriptedModelServer, TextReply, open_scripted_server
from tests.listener.test_connections import Reader, eof, request_bytes

WORDS = [f"w{i} " for i in range(20)]
CHAT = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}]}


def workers_env(model: ScriptedModelServer, tmp_path: Path) -> dict[str, str]:
    # max_concurrent is per worker: 2 x 150 turns at once; all from this
    # one address, which may hold every connection a worker has.
    (tmp_path / "config.yaml").write_text(
        "api_server: {max_concurrent: 150, max_connections_per_client: 256}\n"
    )
    return clean_env(
        HERMES_MODEL_BASE_URL=model.base_url,
        HERMES_DATA_DIR=str(tmp_path / "data"),
        API_SERVER_WORKERS="2",
        # Streams end with their last words when the workers stop, whatever
        # the grace: these tests are about who stops, not how long it waits.
        **child_patches(SHORT_SHUTDOWN),
    )


def worker_pids(served: ServeProcess) -> dict[int, int]:
    """Worker index -> pid, from the line the supervisor printed at start and
    the ones it logged for each replacement since."""
    pids: dict[int, int] = {}
    for line in served.output:
        if m := re.search(r"serve: \d+ workers \((.*)\)", line):
            for index, pid in re.findall(r"(\d+): pid (\d+)", m.group(1)):
                pids[int(index)] = int(pid)
        elif m := re.search(r"worker (\d+) serves \(pid (\d+)\)", line):
            pids[int(m.group(1))] = int(m.group(2))
    return pids


def children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(p) for p in (task / "children").read_text().split()}
    return found


def running(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def streamed_chat(http: httpx.AsyncClient) -> tuple[str, str]:
    """(the worker that answered, the text it streamed)."""
    text = []
    async with http.stream("POST", "/chat/completions", json=CHAT) as reply:
        assert reply.status_code == 200, await reply.aread()
        worker = reply.headers["X-Hermes-Worker"]
        async for line in reply.aiter_lines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:])["choices"]:
                    text.append(choice["delta"].get("content") or "")
    return worker, "".join(text)


async def test_two_hundred_streams_are_shared_by_both_workers(tmp_path: Path) -> None:
    reply = TextReply(tokens=WORDS, delay=0.005)
    async with open_scripted_server(default=reply, record=False) as model:
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, workers_env(model, tmp_path), tmp_path)
            assert sorted(worker_pids(served)) == [0, 1]
            assert sum("listening on" in line for line in served.output) == 1
            answered: Counter[str] = Counter()
            limits = httpx.Limits(max_connections=200, max_keepalive_connections=0)
            async with httpx.AsyncClient(
                base_url=served.base_url, limits=limits, timeout=60
            ) as http:

                async def one() -> None:
                    worker, text = await streamed_chat(http)
                    assert text == "".join(WORDS)
                    answered[worker] += 1

                with trio.fail_after(90):
                    async with trio.open_nursery() as clients:
                        for _ in range(200):
                            clients.start_soon(one)
                # One scrape, whichever worker answers it, counts every worker's.
                scraped = (await http.get(http.base_url.copy_with(path="/metrics"))).text
            nursery.cancel_scope.cancel()
    assert sum(answered.values()) == 200
    assert set(answered) == {"0", "1"}, answered
    route = 'hermes_requests_total{route="/v1/chat/completions",status="200"}'
    assert f"{route} 200.0" in scraped


# How long a thread of trio's cache may idle before it ends: 10 s, shortened
# in the supervisor (and its workers) so that the test need not sit it out.
THREAD_IDLE = 0.5


def supervisor_threads(pid: int) -> int:
    """How many threads the process runs, its main thread included."""
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


async def test_a_killed_worker_is_replaced(tmp_path: Path) -> None:
    async with open_scripted_server(default=TextReply(tokens=WORDS)) as model:
        env = workers_env(model, tmp_path)
        idle = {"trio._core._thread_cache": {"IDLE_TIMEOUT": THREAD_IDLE}}
        env.update(child_patches({**SHORT_SHUTDOWN, **idle}))
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path)
            before = worker_pids(served)
            # Still the same workers once the threads trio started them from
            # have idled long enough to end: nothing of theirs depends on
            # those threads (as PR_SET_PDEATHSIG would).
            with trio.fail_after(THREAD_IDLE + 10):
                while supervisor_threads(served.process.pid) > 1:  # noqa: ASYNC110 (another process)
                    await trio.sleep(0.05)
            assert children(served.process.pid) == set(before.values())
            os.kill(before[1], signal.SIGKILL)
            with trio.fail_after(20):
                line = await served.wait_for("worker 1 serves")
            logged = "\n".join(served.output)
            assert re.search(r"worker 1 \(pid \d+\) ended after .* \(killed by SIGKILL\)", logged)
            after = worker_pids(served)
            assert after[0] == before[0] and after[1] != before[1], line
            assert children(served.process.pid) == set(after.values())
            seen: set[str] = set()
            async with httpx.AsyncClient(base_url=served.base_url, timeout=20) as http:
                with trio.fail_after(30):
                    while seen != {"0", "1"}:
                        async with httpx.AsyncClient(base_url=served.base_url, timeout=20) as one:
                            worker, text = await streamed_chat(one)
                        assert text == "".join(WORDS)
                        seen.add(worker)
                models = await http.get("/models")
            assert models.status_code == 200
            nursery.cancel_scope.cancel()


async def test_sigterm_stops_every_worker_within_the_bound(tmp_path: Path) -> None:
    slow = TextReply(tokens=[f"s{i} " for i in range(400)], delay=0.05)
    async with open_scripted_server(default=slow) as model:
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, workers_env(model, tmp_path), tmp_path)
            pids = worker_pids(served)
            ended: list[bool] = []
            streaming = trio.Event()

            async def stream_until_cut() -> None:
                async with httpx.AsyncClient(base_url=served.base_url, timeout=20) as http:
                    async with http.stream("POST", "/chat/completions", json=CHAT) as reply:
                        async for line in reply.aiter_lines():
                            streaming.set()
                            if "the server is shutting down" in line:
                                ended.append(True)

            async with trio.open_nursery() as clients:
                clients.start_soon(stream_until_cut)
                await streaming.wait()
                began = trio.current_time()
                served.process.send_signal(signal.SIGTERM)
                with trio.fail_after(STOP_GRACE + 2):
                    code = await served.process.wait()
            took = trio.current_time() - began
            nursery.cancel_scope.cancel()
    assert code == 0
    assert took < STOP_GRACE + 1
    assert ended == [True], "the open stream did not get its last words"
    assert not any(running(pid) for pid in pids.values())
    assert any("serve: SIGTERM received, stopping" in line for line in served.output)


async def test_workers_stop_when_the_supervisor_is_killed(tmp_path: Path) -> None:
    async with open_scripted_server(default=TextReply("hi")) as model:
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, workers_env(model, tmp_path), tmp_path)
            pids = worker_pids(served)
            served.process.kill()
            with trio.fail_after(STOP_GRACE + 2):
                while any(running(pid) for pid in pids.values()):  # noqa: ASYNC110 (no event to wait on)
                    await trio.sleep(0.05)
            nursery.cancel_scope.cancel()


def metrics_dir(pid: int) -> Path:
    """The directory a worker writes its figures to (set by its supervisor)."""
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    for entry in environ:
        if entry.startswith(b"PROMETHEUS_MULTIPROC_DIR="):
            return Path(entry.split(b"=", 1)[1].decode())
    raise AssertionError("the worker has no metrics directory")


async def last_frames_when_stopped(
    served: ServeProcess, stop: Callable[[], None], streams: int
) -> list[list[str]]:
    """Open ``streams`` chat streams, each on its own connection; once all
    stream, ``stop()``; every stream's data frames, to its end."""
    frames: list[list[str]] = [[] for _ in range(streams)]
    started = 0
    all_streaming = trio.Event()

    async def stream(index: int) -> None:
        nonlocal started
        async with httpx.AsyncClient(base_url=served.base_url, timeout=20) as http:
            async with http.stream("POST", "/chat/completions", json=CHAT) as reply:
                assert reply.status_code == 200
                try:
                    async for line in reply.aiter_lines():
                        if not line.startswith("data: "):
                            continue
                        if not frames[index]:
                            started += 1
                            if started == streams:
                                all_streaming.set()
                        frames[index].append(line[6:])
                except httpx.RemoteProtocolError as exc:
                    frames[index].append(f"(cut off: {exc})")

    with trio.fail_after(STOP_GRACE + 10):
        async with trio.open_nursery() as clients:
            for index in range(streams):
                clients.start_soon(stream, index)
            await all_streaming.wait()
            stop()
    return frames


SHUTTING_DOWN = {
    "error": {
        "message": "the server is shutting down",
        "type": "interrupted",
        "param": None,
        "code": "interrupted",
    }
}


def ended_as_on_shutdown(frames: list[str]) -> bool:
    """The stream's last words: the "shutting down" error frame, after text."""
    last = frames[-1] if len(frames) > 1 else ""
    return last.startswith("{") and json.loads(last) == SHUTTING_DOWN


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
async def test_a_stopped_supervisor_leaves_streams_their_last_words_and_no_files(
    tmp_path: Path, how: signal.Signals
) -> None:
    # SIGKILL: the supervisor can do nothing. Its workers end their streams
    # as on SIGTERM, and the last of them removes the figures' directory.
    slow = TextReply(tokens=[f"s{i} " for i in range(400)], delay=0.05)
    async with open_scripted_server(default=slow) as model:
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, workers_env(model, tmp_path), tmp_path)
            pids = worker_pids(served)
            figures = metrics_dir(pids[0])
            assert figures.is_dir() and metrics_dir(pids[1]) == figures
            frames = await last_frames_when_stopped(
                served, lambda: served.process.send_signal(how), streams=6
            )
            with trio.fail_after(STOP_GRACE + 2):
                await served.process.wait()
                while any(running(pid) for pid in pids.values()):  # noqa: ASYNC110 (no event to wait on)
                    await trio.sleep(0.05)
            nursery.cancel_scope.cancel()
    cut = [i for i, stream in enumerate(frames) if not ended_as_on_shutdown(stream)]
    assert not cut, [frames[i][-3:] for i in cut]
    assert not figures.exists(), sorted(p.name for p in figures.iterdir())


async def test_a_worker_that_cannot_start_ends_the_supervisor_in_one_line(
    tmp_path: Path,
) -> None:
    # Python runs sitecustomize before anything else: here it stands for
    # whatever makes a worker, and only a worker, fail at start-up.
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import os, sys\n"
        "if '--worker-index' in sys.argv:\n"
        "    print('hermes-trio serve worker 0: no room for this worker', file=sys.stderr)\n"
        "    os._exit(1)\n"
    )
    env = clean_env(
        HERMES_MODEL_BASE_URL="http://127.0.0.1:9/v1",
        HERMES_DATA_DIR=str(tmp_path / "data"),
        PYTHONPATH=str(hook),
    )
    result = await run_cli(["serve", "--port", "0", "--workers", "3"], env, tmp_path)
    assert result.returncode == 1
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert re.fullmatch(
        r"hermes-trio serve: worker \d could not start: no room for this worker", lines[0]
    )
    assert b"listening on" not in result.stdout


async def test_a_bad_store_is_one_line_from_the_supervisor(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("a file, not a directory")
    env = clean_env(
        HERMES_MODEL_BASE_URL="http://127.0.0.1:9/v1",
        HERMES_DATA_DIR=str(tmp_path / "data"),
        API_SERVER_WORKERS="2",
    )
    result = await run_cli(["serve", "--port", "0"], env, tmp_path)
    assert result.returncode == 1
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "store.data_dir" in lines[0], lines


async def test_bad_worker_counts_name_the_setting(tmp_path: Path) -> None:
    env = clean_env(HERMES_MODEL_BASE_URL="http://127.0.0.1:9/v1")
    for args in (["--workers", "0"], ["--workers", "65"]):
        result = await run_cli(["serve", *args], env, tmp_path)
        assert result.returncode == 2
        assert "api_server.workers: expected an integer from 1 to 64" in result.stderr.decode()


async def test_every_answer_of_a_worker_names_it() -> None:
    # In process: a server on a socket it was given, as a worker's is.
    async with open_scripted_server() as model:
        config = make_config(model.base_url, api_server=ApiServerConfig(max_connections=1))
        sock = listening_socket("127.0.0.1", 0)
        headers = {"X-Hermes-Worker": "3"}
        async with open_api_server(config, listening=sock, headers=headers) as api:
            host = f"127.0.0.1:{api.port}"
            # The listener's own answers: a connection too many...
            held = await trio.open_tcp_stream("127.0.0.1", api.port)
            async with held:
                await held.send_all(request_bytes("GET", "/health", host))
                response, _ = await Reader(held).response()
                assert (b"x-hermes-worker", b"3") in response.headers
                extra = await trio.open_tcp_stream("127.0.0.1", api.port)
                async with extra:
                    await extra.send_all(request_bytes("GET", "/health", host))
                    with trio.fail_after(5):
                        raw = await eof(extra)
            assert raw.startswith(b"HTTP/1.1 503") and b"x-hermes-worker: 3" in raw.lower()
            async with httpx.AsyncClient(base_url=api.url) as http:
                # Until the listener has counted the held connection out.
                for _ in range(250):
                    health = await http.get("/health")
                    if health.status_code != 503:
                        break
                    await trio.sleep(0.02)
                answers = [
                    health,
                    await http.get("/v1/nowhere"),
                    # The gate's refusal, before any route.
                    await http.post(
                        "/v1/chat/completions",
                        content=b"{}",
                        headers={"Origin": "https://elsewhere.example"},
                    ),
                ]
            assert [a.status_code for a in answers] == [200, 404, 403]
            assert all(a.headers["X-Hermes-Worker"] == "3" for a in answers)
            # ...and HTTP it cannot parse.
            for _ in range(250):
                stream = await trio.open_tcp_stream("127.0.0.1", api.port)
                async with stream:
                    await stream.send_all(b"NOT HTTP AT ALL\r\n\r\n")
                    with trio.fail_after(5):
                        raw = await eof(stream)
                if not raw.startswith(b"HTTP/1.1 503"):
                    break
                await trio.sleep(0.02)
            assert raw.startswith(b"HTTP/1.1 400") and b"x-hermes-worker: 3" in raw.lower()


async def test_one_process_has_no_worker_header(tmp_path: Path) -> None:
    async with open_scripted_server() as model:
        env = clean_env(HERMES_MODEL_BASE_URL=model.base_url, HERMES_DATA_DIR=str(tmp_path))
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path)
            async with httpx.AsyncClient() as http:
                reply = await http.get(served.base_url.removesuffix("/v1") + "/health")
            assert reply.status_code == 200
            assert "X-Hermes-Worker" not in reply.headers
            nursery.cancel_scope.cancel()
