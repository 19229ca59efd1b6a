"""``hermes-trio serve --workers N``: N processes serving one port.

The supervisor (the process the user started) binds the listening socket
once, opens the store once (a store that cannot be opened is one line, and
its schema is created or migrated by one process), then starts N workers:
the same command again with hidden arguments (``--worker-index I
--worker-socket FD --worker-control FD``), the socket passed with
``pass_fds``. Each worker serves the app on that socket; the kernel hands
each new connection to one of them. Every answer a worker gives carries
``X-Hermes-Worker: I`` (only under a supervisor: one process has no index).

The supervisor and each worker share a socket pair, the *control* socket:

- the worker writes ``ready`` on it once it serves, so the supervisor tells
  a worker that failed at start-up (it ended before ``ready``) from one that
  died while serving;
- the worker watches it for the end of the stream: the supervisor is gone
  (even by SIGKILL), so the worker stops, the way SIGTERM stops it: its
  streams end with the same last frame. A pipe rather than
  ``PR_SET_PDEATHSIG``: trio starts processes from a worker thread, and that
  signal follows the thread, not the process. The worker's stderr went to
  the supervisor, so from then on it goes nowhere (a write to the closed
  pipe would fail and cut the streams short); and the workers' figures
  directory, which the supervisor removes when it ends, is removed by the
  last worker to end (:class:`FiguresShare`).

Workers run in their own session, so a Ctrl-C in the terminal reaches the
supervisor only, which forwards one SIGTERM to each worker; whatever still
runs :data:`~hermes_trio.cli.serve_shared.STOP_GRACE` seconds after the first
signal is killed (a worker gives itself a little less, so it normally ends
on its own). A worker that dies is started again
(:mod:`.worker_restarts` decides when, or that the supervisor gives up
with the worker's one line and exit code 1).

A worker's stderr goes through the supervisor: its lines are passed on as
they come once it serves; until then they are held, so a worker that fails
at start-up shows its one line once, in the supervisor's message.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial

import trio

from .. import metrics
from ..config import Config
from ..listener import listening_socket
from ..server.run import open_api_server, startup_problem
from ..store import open_store
from .demo import agent_for
from .process import Failure, Shell
from .serve_shared import (
    STOP_GRACE,
    check_model_server,
    reload_keys_on_sighup,
    say_listening,
    serve_failures,
    shell,
)
from .worker_restarts import RestartPlan

__all__ = [
    "READY",
    "WORKER_GRACE",
    "WORKER_HEADER",
    "Ended",
    "FiguresShare",
    "Supervisor",
    "WorkerFailed",
    "describe_exit",
    "run_workers",
]

log = logging.getLogger("hermes_trio.server")

WORKER_HEADER = "X-Hermes-Worker"
READY = b"ready\n"
# A worker's own bound on stopping, under the supervisor's, so that it ends
# by itself rather than by SIGKILL.
WORKER_GRACE = STOP_GRACE - 0.5
# What a worker writes after its end reaches the supervisor just after it.
_LAST_WORDS = 1.0
_SHELL_PREFIX = re.compile(r"^hermes-trio [\w -]+: ")


class WorkerFailed(Exception):
    """A worker that cannot start; ``str()`` is the line for the user."""


@dataclass(frozen=True)
class Ended:
    """How one worker process ended."""

    code: int
    """Its exit code; minus the signal's number when a signal ended it."""
    served: bool
    """It had said ``ready``."""
    last_line: str = ""
    """The last line it wrote to stderr."""


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


# launch(index, ready, stopping) runs worker ``index`` until it ends: calls
# ready(pid) once it serves, sends it SIGTERM once ``stopping`` is set, and
# kills it when cancelled.
Launch = Callable[[int, Callable[[int], None], trio.Event], Awaitable[Ended]]


class Supervisor:
    """Keeps ``count`` workers running until ``stop`` is set."""

    def __init__(
        self,
        count: int,
        launch: Launch,
        *,
        grace: float = STOP_GRACE,
        plan: RestartPlan | None = None,
        on_launched: Callable[[dict[int, int]], None] = lambda pids: None,
    ) -> None:
        self.count = count
        self.launch = launch
        self.grace = grace
        self.plan = plan or RestartPlan(count)
        self.on_launched = on_launched
        self.pids: dict[int, int] = {}
        self.stopping = trio.Event()
        self.failure: WorkerFailed | None = None
        self._scope = trio.CancelScope()

    async def run(self, stop: trio.Event) -> None:
        """Until ``stop`` is set and every worker has ended; raises
        :class:`WorkerFailed` after stopping the others when one cannot
        start."""
        with self._scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._stop_on, stop)
                async with trio.open_nursery() as workers:
                    for index in range(self.count):
                        workers.start_soon(self._keep, index)
                nursery.cancel_scope.cancel()
        if self.failure is not None:
            raise self.failure

    async def _stop_on(self, stop: trio.Event) -> None:
        await stop.wait()
        self.stopping.set()

    async def _keep(self, index: int) -> None:
        while not self.stopping.is_set():
            began = trio.current_time()
            ended = await self.launch(index, partial(self._ready, index), self.stopping)
            if self.stopping.is_set():
                return
            ran = trio.current_time() - began
            delay = self.plan.ended(index, ran=ran, served=ended.served)
            how = describe_exit(ended.code)
            pid = self.pids.pop(index, None)
            if pid is not None:
                metrics.process_gone(pid)
            if delay is None:
                self._give_up(index, ended)
                return
            if ended.served:
                log.warning(
                    "worker %d (pid %s) ended after %.1f s (%s); starting it again in %g s",
                    index,
                    pid,
                    ran,
                    how,
                    delay,
                )
            else:
                log.warning(
                    "worker %d could not start (%s: %s); trying again in %g s",
                    index,
                    how,
                    _shell_line(ended.last_line),
                    delay,
                )
            with trio.move_on_after(delay):
                await self.stopping.wait()

    def _ready(self, index: int, pid: int) -> None:
        self.pids[index] = pid
        if self.plan.served(index):
            self.on_launched(dict(self.pids))
        elif self.plan.launched:
            log.info("worker %d serves (pid %d)", index, pid)

    def _give_up(self, index: int, ended: Ended) -> None:
        if self.failure is None:
            why = _shell_line(ended.last_line) or describe_exit(ended.code)
            self.failure = WorkerFailed(f"worker {index} could not start: {why}")
        # The others stop as on SIGTERM, within the same bound.
        self.stopping.set()
        self._scope.deadline = min(self._scope.deadline, trio.current_time() + self.grace)


def _shell_line(line: str) -> str:
    """A worker's line without the ``hermes-trio serve worker I:`` its shell put first."""
    return _SHELL_PREFIX.sub("", line.strip())


class WorkerOutput:
    """A worker's stderr on its way to the supervisor's: held until the
    worker serves, then passed on line by line."""

    def __init__(self, write: Callable[[bytes], None]) -> None:
        self._write = write
        self._held: list[bytes] = []
        self._partial = b""
        self.serving = False
        self.last_line = ""
        self.done = trio.Event()

    def feed(self, data: bytes | bytearray) -> None:
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            self._line(line + b"\n")

    def _line(self, line: bytes) -> None:
        if line.strip():
            self.last_line = line.decode(errors="replace").strip()
        if self.serving:
            self._write(line)
        else:
            self._held.append(line)

    def served(self) -> None:
        self.serving = True
        held, self._held = self._held, []
        for line in held:
            self._write(line)

    def ended(self) -> None:
        """The stream ended. What a worker that never served wrote is passed
        on but for its last line, which the supervisor's own message quotes."""
        if self._partial:
            self._line(self._partial)
            self._partial = b""
        held, self._held = self._held, []
        if not self.serving:
            while held and not held[-1].strip():
                held.pop()
            held = held[:-1]
        for line in held:
            self._write(line)
        self.done.set()

    async def read(self, stream: trio.abc.ReceiveStream) -> None:
        try:
            async for data in stream:
                self.feed(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.ended()


def _write_stderr(line: bytes) -> None:
    sys.stderr.buffer.write(line)
    sys.stderr.flush()


async def launch_worker(
    command: Sequence[str],
    listening: socket.socket,
    index: int,
    ready: Callable[[int], None],
    stopping: trio.Event,
) -> Ended:
    """Run worker ``index`` (``command`` and its hidden arguments) to its end."""
    ours, theirs = socket.socketpair()
    with trio.socket.from_stdlib_socket(ours) as control:
        with theirs:
            process = await trio.lowlevel.open_process(
                [
                    *command,
                    "--worker-index",
                    str(index),
                    "--worker-socket",
                    str(listening.fileno()),
                    "--worker-control",
                    str(theirs.fileno()),
                ],
                pass_fds=(listening.fileno(), theirs.fileno()),
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        output = WorkerOutput(_write_stderr)
        stderr = process.stderr
        assert stderr is not None

        async def await_ready() -> None:
            if (await control.recv(len(READY))).startswith(READY):
                output.served()
                ready(process.pid)

        async def forward_stop() -> None:
            await stopping.wait()
            process.send_signal(signal.SIGTERM)

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(output.read, stderr)
                nursery.start_soon(await_ready)
                nursery.start_soon(forward_stop)
                await process.wait()
                with trio.move_on_after(_LAST_WORDS):
                    await output.done.wait()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()
                await process.wait()
                await stderr.aclose()
    code = process.returncode
    assert code is not None
    return Ended(code, output.serving, output.last_line)


def run_workers(config: Config, args: argparse.Namespace) -> int:
    """``serve`` with ``api_server.workers`` above 1: the supervisor, or,
    with the hidden arguments, one of its workers."""
    if args.worker_index is not None:
        return _run_worker(config, args)
    return shell.run(
        _supervise,
        config,
        [sys.executable, "-m", "hermes_trio.cli", *args.argv],
        problem=startup_problem(config),
        failures=[*serve_failures(config), Failure((WorkerFailed,))],
    )


async def _supervise(config: Config, command: list[str]) -> int:
    api = config.api_server
    count = api.workers
    # Every worker writes its figures here; a scrape of any adds them up.
    figures = tempfile.mkdtemp(prefix="hermes-trio-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = figures
    try:
        return await _supervise_with(config, command, count)
    finally:
        shutil.rmtree(figures, ignore_errors=True)


async def _supervise_with(config: Config, command: list[str], count: int) -> int:
    api = config.api_server
    with listening_socket(api.host, api.port, api.write_timeout) as sock:
        async with open_store(config):
            pass
        host = f"[{api.host}]" if ":" in api.host else api.host
        base_url = f"http://{host}:{sock.getsockname()[1]}/v1"

        def launched(pids: dict[int, int]) -> None:
            listed = ", ".join(f"{index}: pid {pids[index]}" for index in sorted(pids))
            shell.say(f"{count} workers ({listed})")
            say_listening(config, base_url, sock.getsockname()[1])

        supervisor = Supervisor(count, partial(launch_worker, command, sock), on_launched=launched)

        async def run(stop: trio.Event) -> None:
            async with trio.open_nursery() as nursery:
                await nursery.start(_pass_on_hangups, supervisor)
                await supervisor.run(stop)
                nursery.cancel_scope.cancel()

        return await shell.until_stop_signal(run, grace=STOP_GRACE)


async def _pass_on_hangups(
    supervisor: Supervisor, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """SIGHUP (reload the API keys) goes to every worker."""
    with trio.open_signal_receiver(signal.SIGHUP) as hangups:
        task_status.started()
        async for _ in hangups:
            for pid in list(supervisor.pids.values()):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGHUP)


class FiguresShare:
    """A worker's hold on the figures directory the workers share
    (``PROMETHEUS_MULTIPROC_DIR``): a shared ``flock`` on a file in it for
    the worker's life. Once the supervisor is gone nobody else removes the
    directory, so the last worker to leave does: the one that can take the
    lock alone after letting go of its own."""

    LOCK = "workers.lock"

    def __init__(self, directory: str | None) -> None:
        self.directory = directory
        self._fd: int | None = None
        if directory:
            with contextlib.suppress(OSError):
                self._fd = os.open(os.path.join(directory, self.LOCK), os.O_RDWR | os.O_CREAT)
                fcntl.flock(self._fd, fcntl.LOCK_SH)

    def leave(self, *, remove: bool) -> None:
        """Let go; with ``remove``, the last to leave removes the directory."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
            if remove and self.directory:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return  # another worker still runs: it removes it
                shutil.rmtree(self.directory, ignore_errors=True)
        finally:
            os.close(fd)


def _run_worker(config: Config, args: argparse.Namespace) -> int:
    index: int = args.worker_index
    fmt = f"%(asctime)s %(levelname)s %(name)s [worker {index}]%(request_id)s: %(message)s"
    for handler in logging.getLogger().handlers:
        handler.setFormatter(logging.Formatter(fmt, datefmt="%H:%M:%S"))
    worker_shell = Shell(f"serve worker {index}")
    listening = socket.socket(fileno=args.worker_socket)
    control = socket.socket(fileno=args.worker_control)
    figures = FiguresShare(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
    orphaned = _Orphaned()
    try:
        return worker_shell.run(
            _serve_as_worker,
            config,
            index,
            listening,
            control,
            worker_shell,
            orphaned,
            problem=startup_problem(config),
            failures=serve_failures(config),
        )
    finally:
        figures.leave(remove=orphaned.gone)


class _Orphaned:
    """Whether this worker's supervisor is gone."""

    gone = False


async def _serve_as_worker(
    config: Config,
    index: int,
    listening: socket.socket,
    control_socket: socket.socket,
    worker_shell: Shell,
    orphaned: _Orphaned,
) -> int:
    listening.setblocking(False)
    with trio.socket.from_stdlib_socket(control_socket) as control:

        async def serve(stop: trio.Event) -> None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_stop_without_supervisor, control, orphaned)
                async with (
                    agent_for(config) as agent,
                    open_api_server(
                        config,
                        agent=agent,
                        shutdown=stop,
                        listening=listening,
                        headers={WORKER_HEADER: str(index)},
                    ) as server,
                ):
                    # SIGHUP is caught before the worker says it serves.
                    await nursery.start(reload_keys_on_sighup, config, server.state.keys)
                    await control.send(READY)
                    if index == 0:
                        nursery.start_soon(check_model_server, server.state.agent)
                    await stop.wait()
                nursery.cancel_scope.cancel()

        return await worker_shell.until_stop_signal(serve, grace=WORKER_GRACE)


async def _stop_without_supervisor(control: trio.socket.SocketType, orphaned: _Orphaned) -> None:
    """Stop this worker, as SIGTERM does, once the supervisor is gone."""
    while await control.recv(64):
        pass
    orphaned.gone = True
    # stderr was a pipe to the supervisor: a line written to it now (the
    # signal's own) would fail, and that failure would end the worker at
    # once, cutting its streams off without their last frame.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stderr.fileno())
    os.close(devnull)
    os.kill(os.getpid(), signal.SIGTERM)
