"""Which process runs what, and whether it is still alive.

Every process that opens the store is a *runner*: the responses and the
conversation turns it runs carry its id, and it writes a heartbeat. Another
process decides that a runner is gone when

- it runs on the same machine (same host name and boot) and its pid no
  longer exists — at once, so a restart after a crash or SIGKILL recovers
  immediately;
- or its heartbeat is older than :data:`STALE_AFTER` seconds (another
  machine, or a pid taken over by an unrelated program).

What a dead runner left running is ended by whoever notices first
(:meth:`~hermes_trio.store.base.Store.reap`).
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HEARTBEAT_EVERY", "STALE_AFTER", "Runner", "RunnerRow", "is_dead", "this_runner"]

# A live process writes its heartbeat this often...
HEARTBEAT_EVERY = 2.0
# ...and is taken for dead once it has been silent this long.
STALE_AFTER = 15.0


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        return "noboot"


@dataclass(frozen=True)
class Runner:
    id: str
    host: str
    pid: int


@dataclass(frozen=True)
class RunnerRow:
    """What the store knows of a runner."""

    id: str
    host: str
    pid: int
    seen_at: float


def this_runner() -> Runner:
    host = f"{socket.gethostname()}/{_boot_id()}"
    pid = os.getpid()
    # The random part: a pid comes back after a restart; an id never does.
    return Runner(f"{host}:{pid}:{secrets.token_hex(4)}", host, pid)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_dead(
    row: RunnerRow | None,
    me: Runner,
    now: float,
    *,
    pid_alive: Callable[[int], bool] = _pid_alive,
) -> bool:
    """Whether the runner of ``row`` is gone (no row at all: gone, or from a
    version that kept no runners)."""
    if row is None:
        return True
    if row.id == me.id:
        return False
    if now - row.seen_at > STALE_AFTER:
        return True
    return row.host == me.host and not pid_alive(row.pid)
