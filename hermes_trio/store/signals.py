"""What a process owes the others sharing its store, as one background task:
:func:`keep_store` writes its heartbeat, ends what dead processes left
running, and hands the signals other processes sent it to their handlers.

Signals are polled every :data:`SIGNAL_POLL` seconds while this process
runs a turn (one indexed read that nearly always finds nothing), and every
:data:`IDLE_POLL` seconds otherwise (a signal only ever stops a running
turn): the bound on how long a cross-process interrupt or cancel waits
before this process acts on it. Polling rather than PostgreSQL's
``LISTEN``: one mechanism for both backends, and a bound that holds on both.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from .base import Signal, Store, StoreError, log
from .runners import HEARTBEAT_EVERY

__all__ = ["IDLE_POLL", "SIGNAL_POLL", "SignalHandlers", "keep_store"]

SIGNAL_POLL = 0.02
IDLE_POLL = 1.0


class SignalHandlers:
    """Who acts on each kind of signal in this process."""

    def __init__(self) -> None:
        self._handlers: dict[str, Callable[[str], None]] = {}
        self.busy: Callable[[], bool] = lambda: True
        """Whether this process runs anything a signal could stop."""

    def on(self, kind: str, handler: Callable[[str], None]) -> None:
        self._handlers[kind] = handler

    def dispatch(self, signal: Signal) -> None:
        handler = self._handlers.get(signal.kind)
        if handler is None:
            log.debug("no handler for signal %s %s", signal.kind, signal.target)
            return
        handler(signal.target)


async def keep_store(
    store: Store,
    handlers: SignalHandlers,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    task_status.started()
    next_beat = trio.current_time() + HEARTBEAT_EVERY
    next_idle_poll = trio.current_time()
    while True:
        try:
            now = trio.current_time()
            if handlers.busy() or now >= next_idle_poll:
                next_idle_poll = now + IDLE_POLL
                for signal in await store.take_signals():
                    handlers.dispatch(signal)
            if trio.current_time() >= next_beat:
                next_beat = trio.current_time() + HEARTBEAT_EVERY
                await store.heartbeat()
                await store.reap()
        except StoreError:
            # Logged by the store, once per outage; the next round tries again.
            pass
        await trio.sleep(SIGNAL_POLL)
