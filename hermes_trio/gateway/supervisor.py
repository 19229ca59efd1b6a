"""Keeping one platform adapter running for the gateway.

An adapter that fails is restarted with exponential backoff (starting over
after a healthy run); one whose credentials are rejected is stopped for good,
since only a changed setting can help.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal

import trio

from ..consumers.messenger import PlatformError
from ..exception_groups import first_leaf, leaves
from ..platforms.base import CredentialsRejected, InboundMessage, PlatformAdapter
from ..retry import Backoff

__all__ = [
    "AUTH_ERRORS",
    "HEALTHY_RUN",
    "RESTART_BACKOFF_INITIAL",
    "AdapterStatus",
    "supervise",
]

# The gateway's modules share one logger, so operators tune it by one name.
log = logging.getLogger("hermes_trio.gateway")

RESTART_BACKOFF_INITIAL = 1.0
# An adapter that ran at least this long before failing was healthy: its
# next restart starts the backoff over instead of waiting the maximum.
HEALTHY_RUN = 60.0

# Errors after which restarting an adapter cannot help: the credentials have
# to change first. Adapters subclass ``CredentialsRejected``, so a new
# platform needs no entry here.
AUTH_ERRORS: tuple[type[BaseException], ...] = (CredentialsRejected,)


@dataclass
class AdapterStatus:
    state: Literal["starting", "running", "restarting", "failed"] = "starting"
    restarts: int = 0
    last_error: str | None = None


async def supervise(
    adapter: PlatformAdapter,
    send: trio.MemorySendChannel[InboundMessage],
    status: AdapterStatus,
    *,
    backoff_initial: float,
    backoff_max: float,
    notify: Callable[[], None],
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``adapter`` until cancelled, restarting it when it fails; keeps
    ``status`` current and calls ``notify()`` whenever it changes.

    Reports started after the first start attempt either way, so one broken
    platform never holds up the others.
    """
    name = adapter.name
    backoff = Backoff(backoff_initial, backoff_max)
    reported = False
    with send:
        while True:
            began = trio.current_time()
            status.state = "starting"
            error: Exception | None = None
            try:
                async with trio.open_nursery() as nursery:
                    await nursery.start(partial(adapter.run, send))
                    status.state = "running"
                    notify()
                    if not reported:
                        reported = True
                        task_status.started()
            except Exception as exc:
                error = exc
            if not reported:
                reported = True
                task_status.started()
            fatal = first_leaf(error, AUTH_ERRORS)
            if fatal is not None:
                status.state = "failed"
                status.last_error = str(fatal)
                notify()
                log.error(
                    "%s. Not restarting this adapter; fix the setting and restart the gateway.",
                    _prefixed(name, str(fatal)),
                )
                return
            if trio.current_time() - began >= HEALTHY_RUN:
                backoff.reset()
            delay = backoff.next()
            status.restarts += 1
            status.state = "restarting"
            status.last_error = _describe(error) if error else "stopped"
            notify()
            if error is None:
                log.warning("%s: adapter stopped; restarting in %g s", name, delay)
            elif first_leaf(error, (PlatformError,)) is not None:
                log.error(
                    "%s: adapter failed: %s; restarting in %g s", name, _describe(error), delay
                )
            else:
                log.error("%s: adapter crashed; restarting in %g s", name, delay, exc_info=error)
            await trio.sleep(delay)


def _describe(exc: BaseException) -> str:
    return "; ".join(str(leaf) or type(leaf).__name__ for leaf in leaves(exc))


def _prefixed(name: str, text: str) -> str:
    """``text`` starting with ``name:`` (adapter errors usually already do)."""
    return text if text.startswith(f"{name}:") or text.startswith(f"{name} ") else f"{name}: {text}"
