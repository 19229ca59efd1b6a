"""The scripted model as a real HTTP/1.1 server on raw trio sockets and h11.

The code under test runs its real network path against it. Building on h11
rather than a web framework keeps every byte under our control: stalls,
dropped connections, and the exact moment each client connection closed.
Responses are planned up front (``plan.py``); the writer then only frames
chunks, sleeps and calls ``send_all``.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import h11
import trio

from .encoding import error_body
from .model import Reply, ScriptedModel
from .plan import Plan, reason
from .records import ConnectionRecord

__all__ = ["ScriptedModelServer", "open_scripted_server"]

_RECV_SIZE = 65536
# Frames that are already due are coalesced into one write up to this size.
_FLUSH_BYTES = 64 * 1024


class ScriptedModelServer(ScriptedModel):
    """An OpenAI-compatible HTTP server whose answers come from a script
    (see :class:`ScriptedModel` for the script and the records).

    ``port=0`` picks a free port; ``base_url`` is known once it serves.
    """

    def __init__(
        self,
        script: Iterable[Reply] = (),
        *,
        default: Reply | None = None,
        model: str = "scripted-model",
        host: str = "127.0.0.1",
        port: int = 0,
        record: bool = True,
        context_window: int | None = None,
    ) -> None:
        super().__init__(
            script, default=default, model=model, record=record, context_window=context_window
        )
        self.host = host
        self.port = port
        self._started = False

    @property
    def base_url(self) -> str:
        if not self._started:
            raise RuntimeError("ScriptedModelServer is not serving yet")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    # -- serving -----------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled. Use with ``nursery.start(server.serve)``."""
        listeners = await trio.open_tcp_listeners(self.port, host=self.host)
        self.port = listeners[0].socket.getsockname()[1]
        self._started = True
        task_status.started(self)
        await trio.serve_listeners(self._handle_connection, listeners)

    async def _handle_connection(self, stream: trio.SocketStream) -> None:
        record = self._open_connection()
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                got = await self._read_request(stream, conn, record)
                if got is None:
                    return
                if not await self._respond(stream, conn, record, *got):
                    return
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return  # Connection: close, HTTP/1.0, or a half-read body
                conn.start_next_cycle()
        finally:
            # Covers every way out, including server shutdown (Cancelled):
            # the record is settled before the socket actually closes.
            self._mark_closed(record, "server")
            await trio.aclose_forcefully(stream)

    async def _read_request(
        self, stream: trio.SocketStream, conn: h11.Connection, record: ConnectionRecord
    ) -> tuple[h11.Request, bytes] | None:
        request: h11.Request | None = None
        body: list[bytes] = []
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                await self._bad_request(stream, conn, record, str(exc))
                return None
            if event is h11.NEED_DATA:
                if conn.they_are_waiting_for_100_continue:
                    interim = conn.send(h11.InformationalResponse(status_code=100, headers=[]))
                    if interim and not await self._send(stream, record, interim):
                        return None
                try:
                    data = await stream.receive_some(_RECV_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                if not data:
                    self._mark_closed(record, "client")
                    return None
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                return request, b"".join(body)
            elif isinstance(event, h11.ConnectionClosed):
                self._mark_closed(record, "client")
                return None
            # PAUSED cannot happen here: we only read while their state is IDLE/SEND_BODY.

    async def _bad_request(
        self, stream: trio.SocketStream, conn: h11.Connection, record: ConnectionRecord, why: str
    ) -> None:
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        body = error_body(400, f"malformed HTTP request: {why}")
        try:
            data = (
                conn.send(
                    h11.Response(
                        status_code=400,
                        headers=[
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"),
                        ],
                    )
                )
                or b""
            )
            data += conn.send(h11.Data(data=body)) or b""
            data += conn.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError:
            return
        await self._send(stream, record, data)

    async def _respond(
        self,
        stream: trio.SocketStream,
        conn: h11.Connection,
        record: ConnectionRecord,
        request: h11.Request,
        body: bytes,
    ) -> bool:
        """Answer one request. False when the connection must not be reused."""
        method = request.method.decode("ascii", "replace")
        path = request.target.decode("latin-1").split("?", 1)[0]
        headers: dict[str, str] = {}
        for name, value in request.headers:
            key = name.decode("latin-1")
            val = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {val}" if key in headers else val
        plan = await self._answer(method, path, headers, body, record)
        return await self._execute(stream, conn, record, plan)

    # -- writing -----------------------------------------------------------

    async def _execute(
        self, stream: trio.SocketStream, conn: h11.Connection, record: ConnectionRecord, plan: Plan
    ) -> bool:
        if not plan.has_waits:
            # Nothing to sleep through: a failed send or the next read will
            # notice a closed peer, no watcher task needed.
            return await self._write(stream, conn, record, plan)
        ok = False
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_peer, stream, conn, record, nursery.cancel_scope)
            ok = await self._write(stream, conn, record, plan)
            nursery.cancel_scope.cancel()
        return ok and not record.closed

    async def _watch_peer(
        self,
        stream: trio.SocketStream,
        conn: h11.Connection,
        record: ConnectionRecord,
        scope: trio.CancelScope,
    ) -> None:
        """Notice a client closing while we sleep between frames."""
        while True:
            try:
                data = await stream.receive_some(_RECV_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                self._mark_closed(record, "client")
                scope.cancel()
                return
            # A pipelined next request: h11 buffers it for the next cycle.
            conn.receive_data(data)

    async def _send(self, stream: trio.SocketStream, record: ConnectionRecord, data: bytes) -> bool:
        try:
            await stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._mark_closed(record, "client")
            return False
        return True

    async def _write(
        self, stream: trio.SocketStream, conn: h11.Connection, record: ConnectionRecord, plan: Plan
    ) -> bool:
        buf: list[bytes] = []
        size = 0
        if plan.send_head:
            buf.append(
                conn.send(
                    h11.Response(
                        status_code=plan.status, headers=plan.headers, reason=reason(plan.status)
                    )
                )
                or b""
            )
            if plan.body is not None:
                if plan.truncate is None:
                    buf.append(conn.send(h11.Data(data=plan.body)) or b"")
                else:
                    buf.append(plan.body[: plan.truncate])
        # Chunk framing by hand (h11 would do the same, one call per frame);
        # HTTP/1.0 peers get a close-delimited body, as h11 chose in the headers.
        version = conn.their_http_version
        chunked = version is not None and version >= b"1.1"
        due = trio.current_time()
        for gap, frame in plan.frames:
            if gap > 0:
                # Deadlines accumulate from the start, so a loaded server
                # keeps the scripted rate by coalescing frames that are late.
                due += gap
                if due > trio.current_time():
                    if buf:
                        if not await self._send(stream, record, b"".join(buf)):
                            return False
                        buf = []
                        size = 0
                    await trio.sleep_until(due)
            if chunked:
                if not frame:
                    continue  # an empty chunk would end the body there
                frame = b"%x\r\n%b\r\n" % (len(frame), frame)
            buf.append(frame)
            size += len(frame)
            if size >= _FLUSH_BYTES:
                if not await self._send(stream, record, b"".join(buf)):
                    return False
                buf = []
                size = 0
        if plan.tail_wait > 0:
            if buf and not await self._send(stream, record, b"".join(buf)):
                return False
            buf = []
            await trio.sleep(plan.tail_wait)
        if plan.end == "eom":
            buf.append(conn.send(h11.EndOfMessage()) or b"")
            return await self._send(stream, record, b"".join(buf))
        if buf and not await self._send(stream, record, b"".join(buf)):
            return False
        if plan.end == "reset":
            # SO_LINGER 0 turns close() into an RST, like a crashed upstream.
            stream.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._mark_closed(record, "server")
        await trio.aclose_forcefully(stream)
        return False


@asynccontextmanager
async def open_scripted_server(
    script: Iterable[Reply] = (), **kwargs: Any
) -> AsyncIterator[ScriptedModelServer]:
    """Serve a :class:`ScriptedModelServer` for the duration of the block."""
    server = ScriptedModelServer(script, **kwargs)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
