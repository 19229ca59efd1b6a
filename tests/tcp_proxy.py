"""A loopback TCP proxy for end-to-end tests: it forwards every connection
to a target port, keeps what clients sent, and can go down (stop accepting
and cut every open connection, as a server that died) and come back up on
the same port."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

__all__ = ["TcpProxy", "open_tcp_proxy"]


class TcpProxy:
    def __init__(self, nursery: trio.Nursery, target_port: int) -> None:
        self._nursery = nursery
        self.target_port = target_port
        self.port = 0
        self.sent = bytearray()
        """Everything clients sent through the proxy."""
        self._scope: trio.CancelScope | None = None

    @property
    def is_up(self) -> bool:
        return self._scope is not None

    async def up(self) -> None:
        """Accept again (on the port it had, if any)."""
        assert self._scope is None
        self._scope = await self._nursery.start(self._serve)

    def down(self) -> None:
        """Refuse new connections and cut the open ones."""
        assert self._scope is not None
        self._scope.cancel()
        self._scope = None

    async def _serve(self, *, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:
            listeners = await trio.open_tcp_listeners(self.port, host="127.0.0.1")
            async with listeners[0], trio.open_nursery() as connections:
                self.port = listeners[0].socket.getsockname()[1]
                task_status.started(scope)
                while True:
                    client = await listeners[0].accept()
                    connections.start_soon(self._forward, client)

    async def _forward(self, client: trio.SocketStream) -> None:
        async with client:
            try:
                server = await trio.open_tcp_stream("127.0.0.1", self.target_port)
            except OSError:
                return
            async with server, trio.open_nursery() as pumps:
                pumps.start_soon(self._pump, client, server, True, pumps.cancel_scope)
                pumps.start_soon(self._pump, server, client, False, pumps.cancel_scope)

    async def _pump(
        self,
        source: trio.SocketStream,
        sink: trio.SocketStream,
        keep: bool,
        both: trio.CancelScope,
    ) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            async for data in source:
                if keep:
                    self.sent.extend(data)
                await sink.send_all(data)
        # One side ended: the whole connection ends, as a real one would.
        both.cancel()


@asynccontextmanager
async def open_tcp_proxy(target_port: int) -> AsyncIterator[TcpProxy]:
    """A proxy to ``127.0.0.1:target_port``, up, for the life of the block."""
    async with trio.open_nursery() as nursery:
        proxy = TcpProxy(nursery, target_port)
        await proxy.up()
        try:
            yield proxy
        finally:
            nursery.cancel_scope.cancel()
