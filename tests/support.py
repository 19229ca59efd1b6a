"""Shared helpers for tests: configs pointed at a scripted model server and a
way to run one agent turn and keep every event."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import trio

from hermes_trio import turn
from hermes_trio.agent import Agent, open_agent
from hermes_trio.config import AgentConfig, Config, ModelConfig, StoreConfig, TimeoutsConfig
from hermes_trio.events import StreamEvent
from hermes_trio.tools import ToolContext, ToolRegistry, ToolResult
from hermes_trio.turn import TurnResult

if TYPE_CHECKING:
    import httpx
    import openai

    from hermes_trio.server.run import ApiServer
    from hermes_trio.testing import ModelDouble, ScriptedModelServer
    from hermes_trio.tools import ApprovalCallback

# Every store make_config creates lives under here, removed when the test run
# exits; the object must stay referenced until then.
_STORES = tempfile.TemporaryDirectory(prefix="hermes-test-")

# hermes-trio takes settings from variables with these prefixes; a child
# process under test must see only the ones its test sets.
_SETTING_PREFIXES = ("HERMES_", "OPENAI_", "API_SERVER_", "TELEGRAM_", "DISCORD_", "SLACK_")

# child_hooks/sitecustomize.py sets these module constants in every process
# started with clean_env's environment: pacing no test measures, which the
# end-to-end tests would otherwise sit out. A process running nothing looks
# for another's signals (an approval answered on another worker) once a
# second; ``--demo`` streams its canned answer at a readable 30 ms a word
# (two seconds for each answer a test reads).
_CHILD_HOOKS = Path(__file__).resolve().parent / "child_hooks"
CHILD_PATCHES: dict[str, dict[str, Any]] = {
    "hermes_trio.store.signals": {"IDLE_POLL": 0.1},
    "hermes_trio.cli.demo": {"WORD_DELAY": 0.001},
}
# For a test whose streams are open at a stop but which is not about how
# long the server's grace is: 0.5 s instead of 2 s before the last words.
SHORT_SHUTDOWN: dict[str, dict[str, Any]] = {"hermes_trio.server.run": {"SHUTDOWN_GRACE": 0.5}}


#: The context window tests give the model unless they are about it: large
#: enough that nothing is compacted.
TEST_WINDOW = 1_000_000


def make_config(
    base_url: str,
    *,
    model: dict[str, Any] | None = None,
    agent: dict[str, Any] | None = None,
    **sections: Any,
) -> Config:
    """A config for tests: fast retries, short timeouts, no config file read."""
    model_fields: dict[str, Any] = {
        "base_url": base_url,
        "api_key": "test-key",
        "name": "scripted-model",
        "max_retries": 2,
        "backoff_base": 0.001,
        "backoff_max": 0.01,
        "timeouts": TimeoutsConfig(connect=2, first_token=5, idle=5, request=5),
        # Given, so that the model server is asked only what a test scripts
        # (tests of the window and of compaction set their own).
        "context_window": TEST_WINDOW,
    }
    for key, value in (model or {}).items():
        if key == "timeouts" and isinstance(value, dict):
            value = dataclasses.replace(model_fields["timeouts"], **value)
        model_fields[key] = value
    agent_fields: dict[str, Any] = {"long_tool_hint": 0}
    agent_fields.update(agent or {})
    # Never the user's ~/.hermes-trio: each config gets its own store.
    sections.setdefault(
        "store", StoreConfig(data_dir=tempfile.mkdtemp(prefix="store-", dir=_STORES.name))
    )
    return Config(
        model=ModelConfig(**model_fields),
        agent=dataclasses.replace(AgentConfig(), **agent_fields),
        **sections,
    )


async def run_turn(
    agent: Agent, messages: list[dict[str, Any]] | str, **kwargs: Any
) -> tuple[list[StreamEvent], TurnResult]:
    """One turn through the turn primitive, keeping every event."""
    events: list[StreamEvent] = []

    async def collect(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
        async for event in receive:
            events.append(event)

    result = await turn.run_turn(agent, messages, collect, **kwargs)
    return events, result


class CrashingTools(ToolRegistry):
    """A registry with a bug: running any tool raises outside the tool's own
    error handling, so the exception escapes the agent (a crashing turn)."""

    async def execute(self, name: str, raw_args: str, ctx: ToolContext) -> ToolResult:
        raise RuntimeError(f"tool bug in {name}")


class _Probe:
    name = "probe"
    description = "Looks at something."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    def preview(self, args: dict[str, Any]) -> str:
        return "probe"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(True, "fine")


def crashing_tools() -> CrashingTools:
    """Tools whose one tool, ``probe``, crashes the turn that calls it."""
    return CrashingTools([_Probe()])


__all__ = [
    "SHORT_SHUTDOWN",
    "CrashingTools",
    "ServeProcess",
    "agent_on_double",
    "api_stack",
    "child_patches",
    "clean_env",
    "client_for",
    "client_on",
    "crashing_tools",
    "http_for",
    "make_config",
    "open_agent",
    "ready_gateway",
    "run_turn",
    "serve_before",
    "start_serve",
]


@asynccontextmanager
async def agent_on_double(
    script: ModelDouble | Any = (),
    *,
    model: dict[str, Any] | None = None,
    agent: dict[str, Any] | None = None,
    tools: ToolRegistry | None = None,
    approve: ApprovalCallback | None = None,
    **sections: Any,
) -> AsyncIterator[tuple[Agent, ModelDouble]]:
    """An agent whose model server is an in-process ``ModelDouble`` (given,
    or made from ``script``): no socket, so it runs on ``MockClock``."""
    from hermes_trio.testing import ModelDouble

    double = script if isinstance(script, ModelDouble) else ModelDouble(script)
    config = make_config(double.base_url, model=model, agent=agent, **sections)
    async with open_agent(config, tools=tools, approve=approve, transport=double) as opened:
        yield opened, double


@asynccontextmanager
async def api_stack(
    script: Any = (),
    *,
    model: dict[str, Any] | None = None,
    agent: dict[str, Any] | None = None,
    api: dict[str, Any] | None = None,
) -> AsyncIterator[tuple[ApiServer, ScriptedModelServer]]:
    """The real API server on a loopback port in front of a scripted model server."""
    from hermes_trio.config import ApiServerConfig
    from hermes_trio.server.run import open_api_server
    from hermes_trio.testing import open_scripted_server

    async with open_scripted_server(script) as model_server:
        config = make_config(
            model_server.base_url,
            model=model,
            agent=agent,
            api_server=ApiServerConfig(**(api or {})),
        )
        async with open_api_server(config, port=0) as api_server:
            yield api_server, model_server


@asynccontextmanager
async def client_for(api: ApiServer, **kwargs: Any) -> AsyncIterator[openai.AsyncOpenAI]:
    """An openai SDK client for ``api``, closed when the block exits: left
    open, its idle keep-alive connection holds up the server's shutdown."""
    import openai

    kwargs.setdefault("api_key", "test-client-key")
    async with openai.AsyncOpenAI(base_url=api.base_url, max_retries=0, **kwargs) as client:
        yield client


def http_for(api: ApiServer, key: str = "test-client-key") -> httpx.AsyncClient:
    import httpx

    return httpx.AsyncClient(
        base_url=api.base_url,
        headers={"Authorization": f"Bearer {key}"},
        timeout=httpx.Timeout(10.0),
    )


@functools.cache
def _patchable(module: str) -> None:
    # A child only patches a module it imports: one moved or renamed would
    # silently stop being patched (a name it lacks fails the child loudly).
    if importlib.util.find_spec(module) is None:
        raise LookupError(f"child patches name {module}, which does not exist")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any setting hermes-trio reads, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SETTING_PREFIXES)}
    # No probing of this machine's ports for a model server unless a test asks.
    env["HERMES_LOCAL_SERVERS"] = ""
    # No questions to the model server about its window unless a test asks
    # (HERMES_CONTEXT_WINDOW="" to let the model server, or a config file
    # the test writes, say it: the environment wins over the file).
    env["HERMES_CONTEXT_WINDOW"] = str(TEST_WINDOW)
    # No .env file of this machine's (the data directory's, often the
    # developer's own ~/.hermes-trio) unless a test asks (it deletes this).
    env["HERMES_DOTENV"] = "0"
    # A child may cache the bytecode it compiles (Python's default): with
    # PYTHONDONTWRITEBYTECODE set, every process a test starts compiled
    # hermes_trio from source again, about a quarter second of CPU each.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(child_patches({}))
    hooks = env["PYTHONPATH"]
    env.update(extra)
    if "PYTHONPATH" in extra:
        # A test's own path goes first (its sitecustomize, if any, is the one
        # Python runs); the child patches stay on the path behind it.
        env["PYTHONPATH"] = os.pathsep.join([extra["PYTHONPATH"], hooks])
    return env


def child_patches(patches: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The environment entries that make a child process (and its own
    children) set ``{"module": {"NAME": value}}`` as each module is imported,
    besides ``CHILD_PATCHES``."""
    for module in (*CHILD_PATCHES, *patches):
        _patchable(module)
    return {
        "PYTHONPATH": str(_CHILD_HOOKS),
        "HERMES_TEST_PATCHES": json.dumps({**CHILD_PATCHES, **patches}),
    }


class ServeProcess:
    """A real ``hermes-trio serve`` process and the lines it printed."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.base_url = ""
        self.output: list[str] = []
        self._changed = trio.Event()

    def add(self, line: str) -> None:
        self.output.append(line)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, text: str) -> str:
        while True:
            for line in self.output:
                if text in line:
                    return line
            await self._changed.wait()


async def _kill(process: trio.Process) -> None:
    process.kill()


async def start_serve(
    nursery: trio.Nursery,
    env: dict[str, str],
    cwd: Any,
    *,
    preexec_fn: Callable[[], None] | None = None,
    args: Sequence[str] = (),
) -> ServeProcess:
    """Start ``hermes-trio serve --port 0``; returns once it printed where it
    listens and which model server it uses. The process is killed when
    ``nursery`` is cancelled, so it never outlives the test. ``preexec_fn``
    runs in the child before it starts (resource limits)."""
    process: trio.Process = await nursery.start(
        partial(
            trio.run_process,
            [sys.executable, "-m", "hermes_trio.cli", "serve", "--port", "0", *args],
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            check=False,
            deliver_cancel=_kill,
            preexec_fn=preexec_fn,
        )
    )
    served = ServeProcess(process)

    async def read() -> None:
        buffer = b""
        assert process.stdout is not None
        async for piece in process.stdout:
            buffer += piece
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                served.add(line.decode())

    nursery.start_soon(read)
    with trio.fail_after(15):
        listening = await served.wait_for("listening on")
        await served.wait_for("serve: model server")
    served.base_url = listening.split("listening on ")[1].split()[0]
    return served


class ProcessOutput:
    """Everything a child process wrote to one pipe, with a way to wait for text."""

    def __init__(self) -> None:
        self.data = bytearray()
        self._changed = trio.Event()

    async def collect(self, stream: trio.abc.ReceiveStream) -> None:
        try:
            async for chunk in stream:
                self.data.extend(chunk)
                self._changed.set()
                self._changed = trio.Event()
        finally:
            self._changed.set()

    async def wait_for(self, needle: bytes) -> None:
        while needle not in self.data:
            await self._changed.wait()

    def text(self) -> str:
        return self.data.decode(errors="replace")


@asynccontextmanager
async def gateway_process(
    env: dict[str, str], cwd: os.PathLike[str] | str
) -> AsyncIterator[tuple[trio.Process, ProcessOutput, ProcessOutput]]:
    """A real ``hermes-trio gateway`` process with what it writes to stdout
    and stderr; killed on leaving if it is still running."""
    out, err = ProcessOutput(), ProcessOutput()
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(
            partial(
                trio.run_process,
                [sys.executable, "-m", "hermes_trio.cli", "gateway"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=cwd,
                check=False,
            )
        )
        assert process.stdout is not None and process.stderr is not None
        nursery.start_soon(out.collect, process.stdout)
        nursery.start_soon(err.collect, process.stderr)
        try:
            yield process, out, err
        finally:
            if process.poll() is None:
                process.kill()


@asynccontextmanager
async def ready_gateway(
    env: dict[str, str],
    cwd: os.PathLike[str] | str,
    ready_line: bytes,
    ready: Callable[[], Awaitable[object]] | None = None,
) -> AsyncIterator[trio.Process]:
    """``gateway_process`` once it printed ``ready_line`` (and ``ready``,
    a wait on the fake platform, returned), within 15 s; stopped with
    SIGTERM on leaving, as an operator would."""
    async with gateway_process(env, cwd) as (process, out, err):
        with trio.move_on_after(15) as waiting:
            await out.wait_for(ready_line)
            if ready is not None:
                await ready()
        assert not waiting.cancelled_caught, f"not ready; stderr: {err.text()}"
        try:
            yield process
        finally:
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(10):
                await process.wait()


@asynccontextmanager
async def client_on(
    base_url: str, worker: str, headers: dict[str, str]
) -> AsyncIterator[httpx.AsyncClient]:
    """A client sending ``headers`` whose one kept-alive connection was
    accepted by serve's ``worker``: every request it sends is answered there."""
    import httpx

    for _ in range(100):
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx.AsyncClient(
            base_url=base_url, headers=headers, timeout=30, limits=limits
        ) as client:
            probe = await client.get("/models")
            if probe.headers.get("X-Hermes-Worker") == worker:
                yield client
                return
    raise AssertionError(f"no connection reached worker {worker}")


async def run_cli(
    args: list[str], env: dict[str, str], cwd: Any, *, within: float = 30, **options: Any
) -> subprocess.CompletedProcess[bytes]:
    """Run ``hermes-trio ARGS`` to its end, its output captured; one still
    running after ``within`` seconds (it started instead of refusing) fails the test."""
    with trio.fail_after(within):
        return await trio.run_process(
            [sys.executable, "-m", "hermes_trio.cli", *args],
            env=env,
            cwd=cwd,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            **options,
        )


@asynccontextmanager
async def serve_before(
    model_url: str, cwd: Any, config_yaml: str = ""
) -> AsyncIterator[tuple[ServeProcess, httpx.AsyncClient]]:
    """A real ``hermes-trio serve`` in front of the model server at
    ``model_url``, with ``config_yaml`` as its config file, and an httpx
    client for its ``/v1``; the process is killed on leaving."""
    import httpx

    await trio.Path(cwd, "config.yaml").write_text(config_yaml)
    env = clean_env(HERMES_DATA_DIR=str(Path(cwd, "data")), HERMES_MODEL_BASE_URL=model_url)
    async with trio.open_nursery() as nursery:
        served = await start_serve(nursery, env, cwd)
        async with httpx.AsyncClient(base_url=served.base_url, timeout=20) as http:
            yield served, http
        nursery.cancel_scope.cancel()
