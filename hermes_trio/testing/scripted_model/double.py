"""The scripted model as an httpx transport: no socket, no thread, no real
I/O, so it runs under ``trio.testing.MockClock(autojump_threshold=0)``.

It carries out the same plan as the socket server. A streamed body is an
async iterator that sleeps with trio between frames, in the reading task:
when the client stops waiting (a timeout, a cancel), the sleep is cancelled
with it and the body's close is recorded at that very virtual time.
"""

from __future__ import annotations

from typing import NoReturn

import httpx
import trio

from ..replay_data import Recording
from .model import ScriptedModel
from .plan import Plan
from .recorded import RecordedAnswers
from .records import ConnectionRecord

__all__ = ["ModelDouble"]

_NO_RESPONSE = "Server disconnected without sending a response."
_CUT_BODY = "peer closed connection without sending complete message body (incomplete chunked read)"
_RESET = "[Errno 104] Connection reset by peer"


class ModelDouble(ScriptedModel, httpx.AsyncBaseTransport):
    """An in-process model server for httpx: pass it as ``transport=`` to
    :func:`hermes_trio.open_agent` or to ``httpx.AsyncClient``.

    The script, ``default``, ``requests``, ``model_requests`` and the
    ``wait_*`` helpers are those of the socket server. Each request is its
    own "connection" in ``connections``: ``closed_at`` is when the client
    closed the response (``closed_by="client"``, read to its end or not) or
    when the double ended it abruptly (``"server"``: ``Drop``, the end of a
    ``Stall`` or ``hold``). The host in the URL does not matter; the path
    does, as on the server (``base_url`` is a ready-made one).

    Where a socket would fail, httpx's own exceptions are raised with the
    messages httpcore uses (``RemoteProtocolError``, ``ReadError``). A reply
    function may raise any exception, e.g. ``httpx.ConnectError``, to act
    as a server that cannot be reached.
    """

    base_url = "http://scripted-model.test/v1"
    #: Set by :meth:`from_recording`: the recording answers, not the script.
    recorded: RecordedAnswers | None = None

    @classmethod
    def from_recording(cls, recording: Recording) -> ModelDouble:
        """A double that answers each model request as ``recording``
        (:class:`hermes_trio.testing.Recording`) says, at the recorded times."""
        double = cls()
        double.recorded = RecordedAnswers(recording)
        return double

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.recorded is not None:
            return await self.recorded.answer(request)
        body = await request.aread()
        headers: dict[str, str] = {}
        for key, value in request.headers.multi_items():
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        connection = self._open_connection()
        try:
            # A socket read is a checkpoint; so is this exchange.
            await trio.lowlevel.checkpoint()
            plan = await self._answer(request.method, request.url.path, headers, body, connection)
            if not plan.send_head:
                if plan.tail_wait > 0:
                    await trio.sleep(plan.tail_wait)
                self._mark_closed(connection, "server")
                if plan.end == "reset":
                    raise httpx.ReadError(_RESET, request=request)
                raise httpx.RemoteProtocolError(_NO_RESPONSE, request=request)
        except trio.Cancelled:
            self._mark_closed(connection, "client")
            raise
        except BaseException:
            self._mark_closed(connection, "server")
            raise
        response_headers = list(plan.headers)
        if plan.body is None:
            # What h11 adds to a body of unknown length.
            response_headers.append((b"transfer-encoding", b"chunked"))
        return httpx.Response(
            plan.status,
            headers=response_headers,
            stream=_Body(self, plan, connection, request),
            request=request,
        )

    async def aclose(self) -> None:
        # The double outlives any one client: a test may open several.
        pass


class _Body(httpx.AsyncByteStream):
    """A response body played out on trio's clock.

    An iterator class, not an async generator: a generator left early would
    be finalised by the garbage collector, with a ResourceWarning.
    """

    def __init__(
        self, double: ModelDouble, plan: Plan, connection: ConnectionRecord, request: httpx.Request
    ) -> None:
        self.double = double
        self.plan = plan
        self.connection = connection
        self.request = request
        # The server's clock for the frames starts when the head went out.
        self.due = trio.current_time()
        self.next = 0
        self.body_sent = False
        self.finished = False
        self.closed = False

    def __aiter__(self) -> _Body:
        return self

    async def __anext__(self) -> bytes:
        try:
            piece = await self._next_piece()
        except BaseException:
            if not self.finished:
                # Cancelled while waiting: the client stopped reading now.
                self.double._mark_closed(self.connection, "client")
            raise
        if piece is None:
            raise StopAsyncIteration
        return piece

    async def aclose(self) -> None:
        self.double._mark_closed(self.connection, "client")
        self.closed = True

    async def _next_piece(self) -> bytes | None:
        plan = self.plan
        if self.closed:
            # As a closed socket: nothing more arrives.
            raise httpx.ReadError("the connection was closed", request=self.request)
        if self.finished:
            return None
        if plan.body is not None:
            if not self.body_sent:
                self.body_sent = True
                await trio.lowlevel.checkpoint()
                return plan.body if plan.truncate is None else plan.body[: plan.truncate]
            if plan.truncate is None:
                self.finished = True
                return None
            self._cut(
                "peer closed connection without sending complete message body "
                f"(received {plan.truncate} bytes, expected {len(plan.body)})"
            )
        while self.next < len(plan.frames):
            gap, frame = plan.frames[self.next]
            self.next += 1
            if gap > 0:
                # Deadlines accumulate from the start, as on the server: a
                # late frame is not delayed further.
                self.due += gap
                if self.due > trio.current_time():
                    await trio.sleep_until(self.due)
            if frame:
                # Each frame is one HTTP chunk on the server, and h11 hands
                # every chunk to httpx as its own read, even when several
                # arrive in one segment: one read per frame here too.
                await trio.lowlevel.checkpoint()
                return frame
        if plan.tail_wait > 0:
            await trio.sleep(plan.tail_wait)
        if plan.end == "eom":
            self.finished = True
            return None
        self._cut(_CUT_BODY)

    def _cut(self, message: str) -> NoReturn:
        self.finished = True
        self.double._mark_closed(self.connection, "server")
        if self.plan.end == "reset":
            raise httpx.ReadError(_RESET, request=self.request)
        raise httpx.RemoteProtocolError(message, request=self.request)
