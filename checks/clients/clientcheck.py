"""Shared helpers for the real-client checks: where the client environments
live, how to run a client script as a bounded subprocess and read the JSON
lines it prints, and a tiny static web server for the browser checks.

Nothing here is imported by the project's own test suite.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PY_SCRIPTS = HERE / "py"
NODE_SCRIPTS = HERE / "node"

CLIENTS_DIR = Path(os.environ.get("HERMES_CLIENTS_DIR", "/work/clients"))
ARTIFACTS = Path(os.environ.get("HERMES_CHECKS_ARTIFACTS", HERE / ".artifacts"))

# The API key every check's server is started with (unless a check runs a
# key-less server on purpose).
API_KEY = "sk-hermes-check"

SETUP_HINT = (
    "see checks/clients/README.md, 'Creating the client environments' (HERMES_CLIENTS_DIR={dir})"
)

# Every environment, what must be in it, and how to create it.
ENVIRONMENTS: dict[str, dict[str, Any]] = {
    "py": {
        "probe": ["bin/python"],
        "create": (
            "python3.11 -m venv {dir}/py && {dir}/py/bin/pip install "
            "'openai==3.54.*' 'openai-agents==0.24.*' 'langchain-openai==1.7.*' "
            "'pydantic-ai-slim[openai]==2.68.*' 'llm==0.36'"
        ),
        "modules": ["openai", "agents", "langchain_openai", "pydantic_ai", "llm"],
    },
    "pyold": {
        "probe": ["bin/python"],
        "create": (
            "python3.11 -m venv {dir}/pyold && "
            "{dir}/pyold/bin/pip install 'openai==1.40.0' 'httpx<0.28'"
        ),
        "modules": ["openai"],
    },
    "node": {
        "probe": [
            "node_modules/ai/package.json",
            "node_modules/@ai-sdk/openai/package.json",
            "node_modules/openai/package.json",
            "node_modules/playwright-core/package.json",
        ],
        "create": (
            "mkdir -p {dir}/node && cd {dir}/node && npm init -y >/dev/null && "
            "npm install ai@6 @ai-sdk/openai@3 openai@6 playwright-core@1"
        ),
        "modules": [],
    },
}

_checked: dict[str, Path] = {}


def environment(name: str) -> Path:
    """The directory of client environment ``name``; fails the check (never
    skips it) with the command that creates it when it is missing."""
    if name in _checked:
        return _checked[name]
    spec = ENVIRONMENTS[name]
    where = CLIENTS_DIR / name
    missing = [p for p in spec["probe"] if not (where / p).exists()]
    if not missing and spec["modules"]:
        # find_spec locates the packages without importing them (imports of
        # these SDKs take seconds).
        probe = subprocess.run(
            [
                str(where / "bin/python"),
                "-c",
                "import importlib.util as u, sys\n"
                "print(' '.join(m for m in sys.argv[1:] if u.find_spec(m) is None))",
                *spec["modules"],
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if probe.returncode != 0 or probe.stdout.strip():
            missing = [f"no module {m}" for m in probe.stdout.split()] or [probe.stderr.strip()]
    if missing:
        pytest.fail(
            f"client environment '{name}' is missing or incomplete at {where} "
            f"({', '.join(missing)}). Create it with:\n    "
            + spec["create"].format(dir=CLIENTS_DIR)
            + "\n"
            + SETUP_HINT.format(dir=CLIENTS_DIR),
            pytrace=False,
        )
    _checked[name] = where
    return where


def chromium() -> str:
    path = os.environ.get("HERMES_CHROMIUM", "/usr/bin/chromium")
    if not Path(path).exists():
        pytest.fail(
            f"chromium not found at {path}: install Debian's 'chromium' package "
            "(apt-get install chromium) or set HERMES_CHROMIUM",
            pytrace=False,
        )
    return path


def client_env(**extra: str) -> dict[str, str]:
    """A clean environment for a client process: no settings hermes-trio or the
    SDKs read from the user's shell, no proxies (every check is loopback-only)."""
    drop = ("HERMES_", "OPENAI_", "API_SERVER_", "ANTHROPIC_", "LLM_", "LANGCHAIN_", "LANGSMITH_")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(drop) and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env["PYTHONUNBUFFERED"] = "1"
    env["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    env["HERMES_CLIENTS_DIR"] = str(CLIENTS_DIR)
    env.update(extra)
    return env


@dataclass
class ClientRun:
    """What one client process did: its exit status, the JSON lines it
    printed (``events``), and everything else it wrote."""

    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    # When each piece of stdout arrived (seconds after start) and its size:
    # shows whether a CLI printed its answer progressively.
    stdout_reads: list[tuple[float, int]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for line in self.stdout.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    self.events.append(json.loads(line))
                except ValueError:
                    pass

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == kind]

    def last(self, kind: str) -> dict[str, Any]:
        """The last ``kind`` line, or ``{}`` if the client printed none."""
        found = self.of(kind)
        return found[-1] if found else {}

    @property
    def failure(self) -> str | None:
        """Why the client process failed, or None if it exited cleanly."""
        if self.timed_out:
            return "the client timed out and was killed"
        if self.returncode != 0:
            error = self.last("exception")
            if error:
                return f"the client raised {error.get('type')}: {error.get('message')}"
            return f"the client exited with status {self.returncode}"
        return None

    def one(self, kind: str) -> dict[str, Any]:
        found = self.of(kind)
        assert len(found) == 1, f"expected one '{kind}' line from the client\n{self.report()}"
        return found[0]

    def report(self) -> str:
        """Everything a reader needs to see why a check failed."""
        status = "timed out (killed)" if self.timed_out else f"exit status {self.returncode}"
        errors = [e for e in self.events if e.get("event") == "exception"]
        text = [f"client {' '.join(Path(a).name for a in self.argv[:2])}: {status}"]
        for e in errors:
            text.append(f"  client raised {e.get('type')}: {e.get('message')}")
        text.append("  stdout (last 40 lines):")
        text += ["    " + line for line in self.stdout.splitlines()[-40:]]
        if self.stderr.strip():
            text.append("  stderr (last 30 lines):")
            text += ["    " + line for line in self.stderr.splitlines()[-30:]]
        return "\n".join(text)

    def assert_ok(self) -> None:
        assert not self.timed_out and self.returncode == 0, self.report()


async def _kill_group(process: trio.Process) -> None:
    """Kill the client and everything it started (a browser, a helper)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:
        if process.returncode is None:
            process.kill()


async def run_client(
    argv: list[str],
    *,
    time_limit: float = 30.0,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> ClientRun:
    """Run one client process to completion, killed (with its whole process
    group: a browser, a helper) after ``time_limit`` seconds and in any case once
    it exits. Never raises for the client's own failure: the caller asserts on
    the returned :class:`ClientRun`."""
    out: list[bytes] = []
    err: list[bytes] = []
    reads: list[tuple[float, int]] = []
    t0 = trio.current_time()

    async def drain(
        stream: trio.abc.ReceiveStream | None, into: list[bytes], times: list | None = None
    ) -> None:
        assert stream is not None
        async for piece in stream:
            into.append(piece)
            if times is not None:
                times.append((round(trio.current_time() - t0, 4), len(piece)))

    process: trio.Process | None = None
    with trio.move_on_after(time_limit) as scope:
        async with trio.open_nursery() as nursery:
            process = await nursery.start(
                partial(
                    trio.run_process,
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    check=False,
                    env=env if env is not None else client_env(),
                    cwd=cwd if cwd is not None else str(HERE),
                    start_new_session=True,
                    deliver_cancel=_kill_group,
                )
            )
            nursery.start_soon(drain, process.stdout, out, reads)
            nursery.start_soon(drain, process.stderr, err)
    if process is not None:
        # A child that exited normally may still have left grandchildren.
        await _kill_group(process)
        with trio.move_on_after(5):
            await process.wait()
    return ClientRun(
        argv,
        None if process is None else process.returncode,
        b"".join(out).decode("utf-8", "replace"),
        b"".join(err).decode("utf-8", "replace"),
        timed_out=scope.cancelled_caught,
        stdout_reads=reads,
    )


async def run_python(
    env_name: str,
    script: str,
    case: str,
    config: dict[str, Any],
    *,
    time_limit: float = 30.0,
    env: dict[str, str] | None = None,
) -> ClientRun:
    """``<env>/bin/python checks/clients/py/<script> <case> <config-json>``."""
    where = environment(env_name)
    argv = [str(where / "bin/python"), str(PY_SCRIPTS / script), case, json.dumps(config)]
    return await run_client(argv, time_limit=time_limit, env=env)


async def run_node(
    script: str,
    case: str,
    config: dict[str, Any],
    *,
    time_limit: float = 30.0,
    env: dict[str, str] | None = None,
) -> ClientRun:
    """``node checks/clients/node/<script> <case> <config-json>``."""
    environment("node")
    argv = ["node", str(NODE_SCRIPTS / script), case, json.dumps(config)]
    return await run_client(argv, time_limit=time_limit, env=env)


# -- a tiny static web server (another loopback origin for the browser) ------


_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".json": "application/json",
}


async def _pipe(source: trio.SocketStream, sink: trio.SocketStream) -> None:
    try:
        async for data in source:
            await sink.send_all(data)
        await sink.send_eof()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass


@asynccontextmanager
async def static_server(
    files: dict[str, tuple[str, bytes]],
    *,
    dirs: dict[str, Path] | None = None,
    proxy_port: int | None = None,
) -> AsyncIterator[str]:
    """A tiny web server on 127.0.0.1 (a random port): ``files`` maps a path to
    ``(content_type, body)``; ``dirs`` maps a URL prefix to a directory served
    read-only. With ``proxy_port``, every other request is passed through,
    bytes unchanged (so the ``Host`` header stays the browser's), to
    127.0.0.1:proxy_port; otherwise it is a 404. Yields the origin
    ``http://127.0.0.1:PORT``."""

    def lookup(path: str) -> tuple[str, bytes] | None:
        if path in files:
            return files[path]
        for prefix, root in (dirs or {}).items():
            if path.startswith(prefix):
                target = (root / path[len(prefix) :]).resolve()
                if target.is_relative_to(root.resolve()) and target.is_file():
                    ctype = _TYPES.get(target.suffix, "application/octet-stream")
                    return ctype, target.read_bytes()
        return None

    async def handle(stream: trio.SocketStream) -> None:
        with trio.move_on_after(20):
            buffer = b""
            while b"\r\n\r\n" not in buffer and len(buffer) < 65536:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    return
                buffer += chunk
            request_line = buffer.split(b"\r\n", 1)[0].decode("latin-1")
            parts = request_line.split()
            path = parts[1].split("?", 1)[0] if len(parts) >= 2 else "/"
            found = lookup(path)
            if found is None and proxy_port is not None:
                upstream = await trio.open_tcp_stream("127.0.0.1", proxy_port)
                async with upstream:
                    await upstream.send_all(buffer)
                    async with trio.open_nursery() as pipes:
                        pipes.start_soon(_pipe, stream, upstream)
                        pipes.start_soon(_pipe, upstream, stream)
                return
            if found is not None:
                (ctype, body), status = found, "200 OK"
            else:
                ctype, body, status = "text/plain", b"not found", "404 Not Found"
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\n"
                "Connection: close\r\n\r\n"
            )
            await stream.send_all(head.encode() + body)
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            nursery.cancel_scope.cancel()


def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


# -- the server under check ---------------------------------------------------


@dataclass
class Stack:
    """The real API server (``api``), the scripted model behind it (``model``)
    and what a client needs to reach it (``client``: base_url and api_key)."""

    api: Any
    model: Any
    client: dict[str, Any]

    def model_messages(self, n: int) -> list[dict[str, Any]]:
        """The ``messages`` of the n-th (1-based) request to the model server."""
        requests = self.model.model_requests
        assert len(requests) >= n, f"the model server got {len(requests)} requests, not {n}"
        return requests[n - 1].json.get("messages", [])


@asynccontextmanager
async def hermes(
    script: Any,
    workdir: Path,
    *,
    key: str | None = API_KEY,
    api: dict[str, Any] | None = None,
    agent: dict[str, Any] | None = None,
) -> AsyncIterator[Stack]:
    """``support.api_stack`` with the checks' defaults: an API key, the agent's
    tools working in ``workdir``."""
    from support import api_stack

    api_fields: dict[str, Any] = {"key": key}
    api_fields.update(api or {})
    agent_fields: dict[str, Any] = {"workdir": str(workdir)}
    agent_fields.update(agent or {})
    async with api_stack(list(script), api=api_fields, agent=agent_fields) as (server, model):
        yield Stack(server, model, {"base_url": server.base_url, "api_key": key or "no-key"})


class Verdict:
    """Collects every unmet expectation of one check, so a failing check
    reports all that is wrong at once (with the client's output)."""

    def __init__(self, run: ClientRun | None = None) -> None:
        self.run = run
        self.failures: list[str] = []
        if run is not None and run.failure:
            self.failures.append(run.failure)

    def expect(self, condition: Any, message: str) -> bool:
        if not condition:
            self.failures.append(message)
        return bool(condition)

    def finish(self) -> None:
        if self.failures:
            text = "\n".join("- " + f for f in self.failures)
            if self.run is not None:
                text += "\n" + self.run.report()
            raise AssertionError(text)
