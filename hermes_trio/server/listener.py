"""A thin trio serve loop around hypercorn's protocol code.

hypercorn's own ``worker_serve`` cannot end a connection whose client
stopped reading: its socket writes are shielded, so a full send buffer holds
shutdown forever (DESIGN §7). This loop is the same ~50 lines of nursery
work, but it tracks the open streams and, once the graceful period is over,
closes their sockets from outside — trio then fails the blocked write with
``ClosedResourceError`` and every task can finish.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.statsd import StatsdLogger
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import AppWrapper, ConnectionState

__all__ = ["serve_hypercorn"]

# Seconds the app gets, after ``before_close``, to write its last frames.
LAST_WORDS = 0.5


class _Connections:
    def __init__(self) -> None:
        self.streams: set[trio.SocketStream] = set()
        self.empty = trio.Event()
        self.empty.set()

    def add(self, stream: trio.SocketStream) -> None:
        self.streams.add(stream)
        if self.empty.is_set():
            self.empty = trio.Event()

    def discard(self, stream: trio.SocketStream) -> None:
        self.streams.discard(stream)
        if not self.streams:
            self.empty.set()

    def close_all(self) -> None:
        for stream in list(self.streams):
            # A synchronous close wakes any task blocked on this socket.
            stream.socket.close()


async def serve_hypercorn(
    app: AppWrapper,
    config: HypercornConfig,
    listener: trio.SocketListener,
    stop: trio.Event,
    *,
    app_idle: Callable[[], Awaitable[None]] | None = None,
    before_close: Callable[[], None] | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on ``listener`` until ``stop`` is set, then shut down
    within ``config.graceful_timeout`` seconds whatever the clients do.

    ``app_idle`` returns once the app has no work in flight; idle keep-alive
    connections do not then hold shutdown for the whole grace period.
    ``before_close`` runs when the grace period is over, just before the
    remaining connections are cut: the app's chance to end its streams with
    a word to the client.
    """
    config.set_statsd_logger_class(StatsdLogger)
    lifespan_state: dict[str, object] = {}
    lifespan = Lifespan(app, config, lifespan_state)
    context = WorkerContext(None)
    connections = _Connections()

    async def handle(stream: trio.SocketStream) -> None:
        connections.add(stream)
        try:
            await TCPServer(app, config, context, ConnectionState(lifespan_state.copy()), stream)
        finally:
            connections.discard(stream)

    async with trio.open_nursery() as lifespan_nursery:
        await lifespan_nursery.start(lifespan.handle_lifespan)
        await lifespan.wait_for_startup()
        async with trio.open_nursery() as server_nursery:
            async with trio.open_nursery() as accept_nursery:
                accept_nursery.start_soon(
                    partial(
                        trio.serve_listeners, handle, [listener], handler_nursery=server_nursery
                    )
                )
                task_status.started()
                await stop.wait()
                accept_nursery.cancel_scope.cancel()
            # Idle keep-alive connections close on this; busy ones get the grace period.
            await context.terminated.set()
            with trio.move_on_after(config.graceful_timeout):
                async with trio.open_nursery() as waiters:

                    async def first_of(wait: Callable[[], Awaitable[object]]) -> None:
                        await wait()
                        waiters.cancel_scope.cancel()

                    waiters.start_soon(first_of, connections.empty.wait)
                    if app_idle is not None:
                        waiters.start_soon(first_of, app_idle)
            if before_close is not None and connections.streams:
                before_close()
                with trio.move_on_after(LAST_WORDS):
                    await connections.empty.wait()
            connections.close_all()
            server_nursery.cancel_scope.cancel()
        await lifespan.wait_for_shutdown()
        lifespan_nursery.cancel_scope.cancel()
