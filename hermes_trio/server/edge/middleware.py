"""The ASGI layer in front of the Quart app: the request gate and the
request body's deadlines, applied to every request before Quart sees it.

In front of Quart rather than inside it: Quart builds a request context
before any hook runs, and some requests (a ``Host`` its routing cannot
encode) fail right there with an empty 500 and a logged traceback. Here
every scope is seen first, and every refusal is the OpenAI error JSON
(with the CORS headers its page may read).

A request body has two deadlines (:class:`BodyDeadline`): a client must keep
sending (``body_timeout`` seconds at most without a byte), and must be done
within ``body_total_timeout``. A slow but steady upload is fine; a stalled
one gets 408 within ``body_timeout``.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Protocol

import trio
from hypercorn.typing import (
    ASGIFramework,
    ASGIReceiveCallable,
    ASGIReceiveEvent,
    ASGISendCallable,
    ASGISendEvent,
    Scope,
    WWWScope,
)

from ...listener.door import Knock
from ...listener.errors import ErrorBody, error_body
from ...redaction import request_secrets_scope
from ..parsing.errors import APIError
from . import request_log
from .gate import Answer, GateRequest, GateSettings, Refuse, decide
from .request_log import (
    ACCESS_LOG,
    SCOPE_KEY,
    RequestRecord,
    current_record,
    current_request_id,
    request_id,
    session_hash,
)

__all__ = ["BodyDeadline", "Front"]

log = logging.getLogger("hermes_trio.server")


class BodyDeadline:
    """When a request body's upload has taken too long (no clock of its own)."""

    def __init__(self, progress: float, total: float, now: float) -> None:
        self.progress = progress
        self.total = total
        self._last = now
        self._end = now + total

    @property
    def deadline(self) -> float:
        return min(self._last + self.progress, self._end)

    def received(self, now: float) -> None:
        """Bytes arrived: the client has ``progress`` seconds for the next ones."""
        self._last = now

    def expired(self, now: float) -> str | None:
        """Which limit ran out at ``now``: ``"total"``, ``"progress"``, or None."""
        if now >= self._end:
            return "total"
        if now >= self._last + self.progress:
            return "progress"
        return None


def gate_request(scope: WWWScope) -> GateRequest:
    """What the gate decides on, from an ASGI scope: header names in lower
    case, repeated headers joined as HTTP allows."""
    method = scope.get("method", "GET") if scope["type"] == "http" else "GET"
    return GateRequest(method, scope.get("path", ""), _joined(scope.get("headers") or ()))


def _joined(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for raw_name, raw_value in raw:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


async def send_json(
    send: ASGISendCallable, status: int, body: ErrorBody, headers: dict[str, str] | None = None
) -> None:
    data = json.dumps(body, ensure_ascii=False).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data, "more_body": False})


class LetIn(Protocol):
    """A request ``Front(shed=…)`` let in: it counts against the room once
    its body has arrived (a slow upload holds no place) until it is over."""

    admitted: bool
    """It has its room already (let in at the listener's door with its
    body): nothing to read ahead or ask again."""

    def arrived(self) -> None: ...

    def refused(self, scope: WWWScope) -> APIError | None:
        """Once its body has arrived: its refusal, if there is no room now."""
        ...

    def leave(self) -> None: ...


# How much of a let-in request's body the front reads before the app: a
# burst's bodies arrive with their heads, and each is then refused here if
# the burst filled the room, instead of after Quart has built its request
# (about half a refusal's cost). A bigger body goes on to the app, whose
# own limits apply, and is checked when its route takes the slot.
_EARLY_BODY = 256 * 1024
# Only what has already arrived is read ahead: a body that came with its
# head is queued before the app's task first runs. A client that waits for
# an answer before sending its body (401, 413, Expect: 100-continue) must
# get it from the app, so the front never waits longer than this for it.
_EARLY_WAIT = 0.0005


class Front:
    """ASGI app: ``app`` behind the gate and the body deadlines."""

    def __init__(
        self,
        app: ASGIFramework,
        settings: GateSettings,
        *,
        body_timeout: float = math.inf,
        body_total_timeout: float = math.inf,
        key_required: Callable[[], bool] | None = None,
        session_key: bytes | None = None,
        shed: Callable[[WWWScope], APIError | LetIn | None] | None = None,
    ) -> None:
        self.app = app
        self.shed = shed
        """The refusal of a request the server has no room for now, before
        Quart reads and parses it; else its place on the way in (told when
        its body has arrived and when it is over), or None (not work that
        needs room)."""
        self.settings = settings
        self.body_timeout = body_timeout
        self.body_total_timeout = body_total_timeout
        self.key_required = key_required
        """Whether the server has a key now (its keys may be reloaded);
        None: ``settings.key_required`` says."""
        self._settings_when = {settings.key_required: settings}
        self.session_key = session_key or secrets.token_bytes(32)

    def lets_through(self, request: Knock) -> bool:
        """Whether the gate lets ``request`` (as the listener's door sees
        it) through to the app."""
        method, path = request.method.decode("latin-1"), request.path.decode("latin-1")
        asked = GateRequest(method, path, _joined(request.headers))
        return not isinstance(decide(asked, self._gate_settings()), Refuse | Answer)

    def _gate_settings(self) -> GateSettings:
        if self.key_required is None:
            return self.settings
        # One per answer, built once: asked on every request, and named
        # keys alone (not in ``settings``) would rebuild it each time.
        required = self.key_required()
        settings = self._settings_when.get(required)
        if settings is None:
            settings = self._settings_when[required] = replace(self.settings, key_required=required)
        return settings

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        kind = scope["type"]
        if kind != "http":
            await self._serve(scope, gate_request(scope), receive, send)
            return
        # Parsed once: the gate decides on it too.
        asked = gate_request(scope)
        headers = asked.headers
        record = RequestRecord(
            request_id(headers.get("x-request-id")),
            str(scope.get("method", "GET")),
            str(scope.get("path", "")),
            trio.current_time(),
            session=session_hash(headers.get("x-session-id"), self.session_key),
        )
        extensions: dict[str, Any] = scope.setdefault("extensions", {})
        extensions[SCOPE_KEY] = record
        id_token = current_request_id.set(record.id)
        record_token = current_record.set(record)
        stamp = [(b"x-request-id", record.id.encode())]

        async def stamped(message: ASGISendEvent) -> None:
            if message["type"] == "http.response.start":
                record.status = message["status"]
                message = message.copy()
                message["headers"] = [*message.get("headers", ()), *stamp]
            elif message["type"] == "http.response.body" and record.first_byte is None:
                if message.get("body"):
                    record.first_byte = trio.current_time()
            await send(message)

        # The request's own secrets (values it forwards) are redacted in
        # its lines, its turn's and its recording's, and in no one else's.
        with request_secrets_scope():
            try:
                await self._serve(scope, asked, receive, stamped, record)
            except trio.Cancelled:
                record.client_gone = True
                raise
            finally:
                ended = trio.current_time()
                record.settle()
                ACCESS_LOG.info(record.line(ended, as_json=request_log.JSON_LINES))
                current_record.reset(record_token)
                current_request_id.reset(id_token)

    async def _serve(
        self,
        scope: WWWScope,
        asked: GateRequest,
        receive: ASGIReceiveCallable,
        send: ASGISendCallable,
        record: RequestRecord | None = None,
    ) -> None:
        kind = scope["type"]
        decision = decide(asked, self._gate_settings())
        if isinstance(decision, Refuse):
            if record is not None:
                record.error_code = decision.code
                record.reason = decision.message
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1008, "reason": None})
                return
            body = error_body(
                decision.message, status=decision.status, param=decision.param, code=decision.code
            )
            await send_json(send, decision.status, body, decision.headers)
            return
        if isinstance(decision, Answer):
            await send(
                {
                    "type": "http.response.start",
                    "status": decision.status,
                    "headers": [
                        (k.lower().encode(), v.encode()) for k, v in decision.headers.items()
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        if kind == "websocket":
            await self.app(scope, receive, send)
            return
        shed = self.shed(scope) if self.shed is not None and kind == "http" else None
        exchange = _Exchange(
            receive,
            send,
            decision.cors,
            BodyDeadline(self.body_timeout, self.body_total_timeout, trio.current_time()),
            on_body=None if shed is None or isinstance(shed, APIError) else shed.arrived,
        )
        if isinstance(shed, APIError):
            # At once and cheaply: a refusal in a burst competes for the
            # core with the streams that were admitted.
            await _refuse(exchange, shed, record)
            return
        try:
            if shed is not None and not shed.admitted and await exchange.read_early(_EARLY_BODY):
                late = shed.refused(scope)
                if late is not None:
                    await _refuse(exchange, late, record)
                    return
            await self.app(scope, exchange.receive, exchange.send)
        except Exception:
            # The app failed outside its own error handling; answer like it would.
            if exchange.started:
                raise
            log.exception("unexpected error in %s %s", scope.get("method"), scope.get("path"))
            body = error_body("internal error", status=500, code="internal_error")
            await send_json(exchange.send, 500, body)
        finally:
            if shed is not None and not isinstance(shed, APIError):
                shed.leave()


async def _refuse(exchange: _Exchange, refused: APIError, record: RequestRecord | None) -> None:
    """Answer a request the server has no room for, in front of the app."""
    if record is not None:
        record.error_code = refused.code
        record.reason = refused.message
    await send_json(exchange.send, refused.status, refused.body(), refused.headers)


class _Exchange:
    """One request's receive and send as the app sees them: CORS headers on
    its answer, and its body under the deadlines."""

    def __init__(
        self,
        receive: ASGIReceiveCallable,
        send: ASGISendCallable,
        cors: dict[str, str],
        deadline: BodyDeadline,
        on_body: Callable[[], None] | None = None,
    ) -> None:
        self._receive = receive
        self._send = send
        self._cors = [(k.lower().encode(), v.encode()) for k, v in cors.items()]
        self._deadline = deadline
        self._on_body = on_body
        """Called once the whole body has arrived."""
        self.started = False
        self._body_done = False
        self._early: list[ASGIReceiveEvent] = []
        """What :meth:`read_early` read, for the app's first receives."""

    async def read_early(self, most: int) -> bool:
        """Read the body ahead of the app, as far as it has already arrived
        and up to ``most`` bytes (kept for the app's receives): True when
        all of it was there."""
        size = 0
        while not self._body_done and size <= most:
            message: ASGIReceiveEvent | None = None
            with trio.move_on_after(_EARLY_WAIT):
                message = await self._next()
            if message is None:
                return False  # not here yet: the app reads on
            self._early.append(message)
            if message["type"] != "http.request":
                return False
            size += len(message.get("body", b""))
        return self._body_done and not self.started

    async def send(self, message: ASGISendEvent) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            if self._cors:
                # A copy: the app's own message stays as it sent it.
                message = message.copy()
                message["headers"] = [*message.get("headers", ()), *self._cors]
        await self._send(message)

    async def receive(self) -> ASGIReceiveEvent:
        if self._early:
            return self._early.pop(0)
        return await self._next()

    async def _next(self) -> ASGIReceiveEvent:
        deadline = self._deadline
        # Once the app has answered, the body is no longer awaited by anyone.
        while not (self._body_done or self.started):
            with trio.move_on_at(deadline.deadline) as waited:
                message = await self._receive()
            if not waited.cancelled_caught:
                if message["type"] != "http.request" or not message.get("more_body", False):
                    self._body_done = True
                    if self._on_body is not None and message["type"] == "http.request":
                        self._on_body()
                elif message.get("body"):
                    deadline.received(trio.current_time())
                return message
            limit = deadline.expired(trio.current_time())
            if limit is not None and not self.started:
                await self._too_slow(limit)
                # The app stops waiting for the body and ends the request.
                return {"type": "http.disconnect"}
        return await self._receive()

    async def _too_slow(self, limit: str) -> None:
        deadline = self._deadline
        if limit == "total":
            what = f"api_server.body_total_timeout ({deadline.total:g} s)"
            message = f"the request body did not arrive within {what}"
        else:
            what = f"api_server.body_timeout ({deadline.progress:g} s)"
            message = f"the request body stopped arriving: nothing came for {what}"
        await send_json(self.send, 408, error_body(message, status=408, code="request_timeout"))
