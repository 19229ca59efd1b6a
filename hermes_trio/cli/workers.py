"""``hermes-trio serve --workers N``: a supervisor and N worker processes.

The supervisor checks what it can before any worker starts (the config,
the port, the store — each a one-line error, as for one process), binds the
listening socket once and starts N workers: the same ``hermes-trio serve``
command with ``--worker-fd`` (the inherited socket, on which every worker
accepts) and ``--worker-index``. Workers share the store, so whichever one a
request reaches it works the same (see ``hermes_trio.server.store``), and
each answers with ``X-Hermes-Worker: <index>``.

A worker that dies is started again after a backoff (:class:`Restarts`);
one that keeps dying at start-up stops the supervisor with status 1. On
SIGTERM or SIGINT every worker gets SIGTERM and has the usual grace to end
its streams; what is left afterwards is killed. A worker dies with its
supervisor (``PR_SET_PDEATHSIG``), so a killed supervisor leaves no worker
behind. Under ``PROMETHEUS_MULTIPROC_DIR`` (a fresh directory per run) one
scrape of any worker adds up every worker's figures.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import trio

from ..config import Config
from ..serving import listening_socket
from .shell import EXIT_FAILED, EXIT_OK, Shell

__all__ = ["Restarts", "supervise_workers"]

log = logging.getLogger("hermes_trio.server")

# A worker that ends sooner than this after its start failed at start-up.
STARTUP_WINDOW = 3.0
# Start-up failures in a row after which the supervisor gives up.
MAX_STARTUP_FAILURES = 3
# Seconds before a dead worker is started again, by failures in a row.
BACKOFF = (0.2, 1.0, 2.0, 5.0)
# How long workers have to stop after SIGTERM, beyond their own grace.
STOP_MARGIN = 2.0


@dataclass
class Restarts:
    """When to start a worker again (pure: the caller gives the times)."""

    failures: int = 0
    started_at: float = 0.0
    history: list[float] = field(default_factory=list)

    def started(self, now: float) -> None:
        self.started_at = now

    def ended(self, now: float) -> float | None:
        """The delay before starting the worker again, or None to give up
        (it keeps failing at start-up)."""
        if now - self.started_at < STARTUP_WINDOW:
            self.failures += 1
        else:
            self.failures = 0
        if self.failures >= MAX_STARTUP_FAILURES:
            return None
        delay = BACKOFF[min(self.failures, len(BACKOFF) - 1)]
        self.history.append(delay)
        return delay


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the supervisor dies."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def _describe(code: int) -> str:
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"


class _Supervisor:
    def __init__(self, shell: Shell, config: Config, argv: Sequence[str], fd: int) -> None:
        self.shell = shell
        self.config = config
        self.argv = list(argv)
        self.fd = fd
        self.count = config.api_server.workers
        self.processes: dict[int, trio.Process] = {}
        self.stopping = False
        self.failed: str | None = None

    def command(self, index: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "hermes_trio.cli",
            *self.argv,
            "--worker-fd",
            str(self.fd),
            "--worker-index",
            str(index),
        ]

    async def keep(self, index: int, env: dict[str, str], nursery: trio.Nursery) -> None:
        """Run worker ``index``, again and again, until the supervisor stops."""
        restarts = Restarts()
        while not self.stopping:
            restarts.started(trio.current_time())
            process = await trio.lowlevel.open_process(
                self.command(index),
                env=env,
                pass_fds=(self.fd,),
                preexec_fn=_die_with_parent,
            )
            self.processes[index] = process
            log.info("worker %d started (pid %d)", index, process.pid)
            code = await process.wait()
            if self.stopping:
                return
            delay = restarts.ended(trio.current_time())
            if delay is None:
                self.failed = (
                    f"worker {index} failed at start-up {MAX_STARTUP_FAILURES} times in a row "
                    f"({_describe(code)}); its own error is above"
                )
                nursery.cancel_scope.cancel()
                return
            log.warning(
                "worker %d (pid %d) ended (%s); starting it again in %.1f s",
                index,
                process.pid,
                _describe(code),
                delay,
            )
            await trio.sleep(delay)

    def signal_all(self, signum: int) -> None:
        for process in self.processes.values():
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signum)

    async def stop(self, grace: float) -> None:
        """SIGTERM to every worker; SIGKILL to what is left after ``grace``."""
        self.stopping = True
        self.signal_all(signal.SIGTERM)
        with trio.move_on_after(grace):
            for process in list(self.processes.values()):
                await process.wait()
        self.signal_all(signal.SIGKILL)
        for process in list(self.processes.values()):
            await process.wait()


async def supervise_workers(
    shell: Shell,
    config: Config,
    argv: Sequence[str],
    *,
    grace: float,
    announce: Callable[[int], None],
) -> int:
    """Run ``config.api_server.workers`` workers until SIGTERM or SIGINT;
    returns the exit code. ``announce(base_url, port)`` prints the start-up
    lines once."""
    from ..server.store import open_store

    api = config.api_server
    sock = listening_socket(api.host, api.port, api.write_timeout)
    metrics_dir = tempfile.mkdtemp(prefix="hermes-trio-metrics-")
    try:
        # The store once, before any worker: its one-line errors, its
        # migrations, and the recovery of what a previous run left running.
        async with open_store(config, recover=True):
            pass
        sock.set_inheritable(True)
        port = sock.getsockname()[1]
        env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=metrics_dir)
        supervisor = _Supervisor(shell, config, argv, sock.fileno())
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                for index in range(supervisor.count):
                    nursery.start_soon(supervisor.keep, index, env, nursery)
                announce(port)
                shell.say(f"{supervisor.count} workers")
                async for received in signals:
                    name = signal.Signals(received).name
                    shell.say(f"{name} received, stopping the workers", err=True)
                    break
                nursery.cancel_scope.cancel()
            # A signal, or a worker that cannot start: every worker stops.
            async with trio.open_nursery() as stopping:
                stopping.start_soon(partial(_second_signal, supervisor, signals))
                await supervisor.stop(grace + STOP_MARGIN)
                stopping.cancel_scope.cancel()
        if supervisor.failed:
            shell.say(supervisor.failed, err=True)
            return EXIT_FAILED
        return EXIT_OK
    finally:
        sock.close()
        shutil.rmtree(metrics_dir, ignore_errors=True)


async def _second_signal(supervisor: _Supervisor, signals: AsyncIterator[int]) -> None:
    async for _ in signals:
        supervisor.signal_all(signal.SIGKILL)
