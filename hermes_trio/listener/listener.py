"""Our own trio listener around hypercorn's HTTP/1.1 protocol code: what
``hermes-trio serve`` and the webhook adapters serve their apps with.

hypercorn's trio ``TCPServer`` closes a connection from inside the app's
task: when an answer ends a connection (``Connection: close``, HTTP/1.0, an
answer sent before the body was read), ``H11Protocol`` sends ``Closed`` from
the request task, whose nursery quart-trio cancels as soon as the response
is out — and ``TCPServer._close`` starts with a checkpoint (``send_eof``),
so the cancel wins and the socket stays open for good. Its keep-alive timer
is restarted the same way and is lost the same way.

So the connection is owned here: :class:`_Connection` drives hypercorn's
HTTP/1.1 protocol, turns ``Closed`` into a synchronous half-close that no
cancel can undo, and keeps one deadline per connection from
:class:`~.lifetime.ConnectionLifetime` (slow heads, idle keep-alive,
lingering close). The accept loop bounds how many connections are open and
answers the ones beyond with a 503, and how many one client address holds
(so that one client cannot take every slot) and answers the ones beyond
with a 429: the server is not full, that client is. Shutdown closes idle
connections at once, gives busy ones the grace period, then cuts what is left from outside
(hypercorn's writes are shielded, so a client that stopped reading would
otherwise hold shutdown for ever).

Every answer given below the app (a request HTTP cannot parse, a slow head,
too many connections) carries the same JSON error body as the app's own.

HTTP/2 without TLS (h2c) is not spoken: no client of an OpenAI-style API
or of a webhook uses it (browsers never do; HTTP/2 comes through ALPN on a
TLS proxy, which talks HTTP/1.1 to us), and over it one connection carries
many requests with hypercorn's own timers, past every bound kept here. A
prior-knowledge HTTP/2 preface gets a 400 naming that; an ``Upgrade: h2c``
offer is declined the way HTTP allows, by answering in HTTP/1.1.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
import socket
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping

import h11
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.events import Closed, Event, RawData, Updated
from hypercorn.protocol.events import EndBody, Response, StreamClosed
from hypercorn.protocol.events import Event as StreamEvent
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.statsd import StatsdLogger
from hypercorn.trio.task_group import TaskGroup
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import AppWrapper, ConnectionState, LifespanState
from hypercorn.utils import parse_socket_addr

from .door import Door, DoorRefusal, Knock, Ticket
from .errors import error_body
from .holding import Holding
from .lifetime import ConnectionLifetime, ConnectionLimits, Expiry, raw_error_response

__all__ = ["listening_socket", "serve_hypercorn"]

log = logging.getLogger("hermes_trio.server")

# Seconds the app gets, after ``before_close``, to write its last frames.
LAST_WORDS = 0.5
# Connections answered 503 that may linger at once; beyond, accepting waits.
REFUSING_AT_MOST = 64
# Seconds a refused connection may take to read its 503.
REFUSAL_LINGER = 1.0
MAX_RECV = 2**16
# accept() failing with these means "out of something, try again soon".
_ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
_WARN_EVERY = 10.0
Launch = Callable[[trio.SocketStream, str, bytes, Callable[[], None] | None], None]
"""Serve a connection: its stream, its client's address, what was already
read of it, and what to tell when the door has judged its first request."""

# What of hypercorn's below its public API this module relies on: methods
# ``_H11`` overrides or calls (an override of a renamed method is silently
# never called) and the internal modules and names it builds connections
# from. pyproject.toml caps hypercorn below its next minor version, and
# tests/listener/test_hypercorn_reliance.py checks each name is still there.
HYPERCORN_INTERNALS = {
    "hypercorn.protocol.h11.H11Protocol": (
        "_send_error_response",  # overridden: the JSON error body
        "_check_protocol",  # overridden: no switch to h2c, and the door
        "_send_h11_event",  # called to write our own answers
        "_handle_events",  # where hypercorn calls the two overrides
    ),
    "hypercorn.trio.task_group.TaskGroup": ("__aenter__", "__aexit__"),
    "hypercorn.trio.lifespan.Lifespan": (
        "handle_lifespan",
        "wait_for_startup",
        "wait_for_shutdown",
    ),
}

# What h11's status hint for a request it cannot parse means to a client.
_PROTOCOL_ERRORS = {
    400: "the request is not valid HTTP/1.1",
    431: "the request's headers are too large",
    505: "the request's HTTP version is not supported; send HTTP/1.1",
}


class _Declined(Exception):
    """An HTTP/2 preface was answered with a refusal; nothing more to read."""


class _H11(H11Protocol):
    """hypercorn's HTTP/1.1 protocol, with JSON bodies on the errors it
    answers itself and without the switch to cleartext HTTP/2, and the
    server's own headers on every answer."""

    extra_headers: tuple[tuple[bytes, bytes], ...] = ()
    door: Door | None = None
    ticket: Ticket | None = None
    """What the door handed the request in progress, until it is over."""
    judged: Callable[[], None] | None = None
    """Told once, when the door has judged the connection's first request
    (:class:`~.holding.Holding` counts it on its way until then)."""

    async def stream_send(self, event: StreamEvent) -> None:
        if isinstance(event, Response):
            extra = list(self.extra_headers)
            if self.connection.their_state is not h11.DONE:
                # Answered before the request's body was read (a 401, 413,
                # 429 from a check): the connection ends after this answer,
                # and a client that is not told reuses it and fails.
                extra.append((b"connection", b"close"))
            if extra:
                event = dataclasses.replace(event, headers=[*event.headers, *extra])
        await super().stream_send(event)
        if isinstance(event, EndBody | StreamClosed):
            # Its answer is over: a connection that closes after it may
            # linger a while, holding no place meanwhile.
            self.leave_ticket()

    async def handle(self, event: Event) -> None:
        try:
            await super().handle(event)
        except _Declined:
            pass

    async def _send_error_response(self, status_code: int) -> None:
        message = _PROTOCOL_ERRORS.get(status_code, "the request is not valid HTTP/1.1")
        await self._send_json_error(status_code, message, "invalid_http_request")

    async def _check_protocol(self, event: h11.Request) -> None:
        # Replaces hypercorn's switch to HTTP/2; an Upgrade: h2c offer is
        # declined just by answering in HTTP/1.1.
        if event.method == b"PRI" and event.target == b"*" and event.http_version == b"2.0":
            await self._send_json_error(
                400,
                "HTTP/2 without TLS (h2c) is not supported; send HTTP/1.1",
                "http2_not_supported",
            )
            await self.send(Closed())
            raise _Declined
        if self.door is not None:
            await self._knock(self.door, event)

    async def _knock(self, door: Door, event: h11.Request) -> None:
        """Ask the door about a request whose head is in, before the app
        is started for it: a refusal is answered here, and the connection
        ends with it."""
        self.leave_ticket()  # never one here (the last answer's end gave it back): a guard
        self.tell_judged()
        target = event.target
        query = target.find(b"?")
        answer = door.knock(
            Knock(
                event.method,
                target if query < 0 else target[:query],
                event.headers,
                self._body_here(event),
            )
        )
        if isinstance(answer, DoorRefusal):
            extra = (*self.config.response_headers("h11"), *self.extra_headers)
            await self.send(RawData(_door_answer(answer, extra)))
            await self.send(Closed())
            raise _Declined
        self.ticket = answer

    def _body_here(self, event: h11.Request) -> bool:
        """Whether the request's whole body came with its head."""
        length = 0
        for name, value in event.headers:
            if name == b"content-length":
                length = int(value)  # h11 has checked it is a number
            elif name == b"transfer-encoding":
                return False  # chunked: its end is not known here
        return length == 0 or len(self.connection.trailing_data[0]) >= length

    def tell_judged(self) -> None:
        judged, self.judged = self.judged, None
        if judged is not None:
            judged()

    def leave_ticket(self) -> None:
        ticket, self.ticket = self.ticket, None
        if ticket is not None:
            ticket.leave()

    async def _send_json_error(self, status: int, message: str, code: str) -> None:
        body = json.dumps(error_body(message, status=status, code=code)).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            *self.config.response_headers("h11"),
            *self.extra_headers,
        ]
        await self._send_h11_event(h11.Response(status_code=status, headers=headers))
        await self._send_h11_event(h11.Data(data=body))
        await self._send_h11_event(h11.EndOfMessage())


class _Connection:
    """One client connection: hypercorn's HTTP protocol on a socket whose
    lifetime this class decides."""

    def __init__(
        self,
        app: AppWrapper,
        config: HypercornConfig,
        context: WorkerContext,
        state: LifespanState,
        stream: trio.SocketStream,
        limits: ConnectionLimits,
        registry: _Connections,
        address: str = "",
    ) -> None:
        self.app = app
        self.config = config
        self.context = context
        self.state = state
        self.stream = stream
        self.registry = registry
        self.address = address
        """The client's address, as the per-address limit counts it."""
        self.initial = b""
        """What was read of the client before this took it over."""
        self.judged: Callable[[], None] | None = None
        """Told when the door has judged the first request, or it ended."""
        self.lifetime = ConnectionLifetime(limits, trio.current_time())
        self.protocol: _H11
        self._send_lock = trio.Lock()
        self._timer = trio.CancelScope(deadline=self.lifetime.deadline)

    async def run(self) -> None:
        sock = self.stream.socket
        try:
            client = parse_socket_addr(sock.family, sock.getpeername())
            server = parse_socket_addr(sock.family, sock.getsockname())
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch)
                async with TaskGroup() as task_group:
                    self.protocol = _H11(
                        self.app,
                        self.config,
                        self.context,
                        task_group,
                        ConnectionState(self.state.copy()),
                        False,
                        client,
                        server,
                        self._protocol_send,
                    )
                    self.protocol.extra_headers = self.registry.headers
                    self.protocol.door = self.registry.door
                    self.protocol.judged, self.judged = self.judged, None
                    await self.protocol.initiate()
                    await self._read()
                nursery.cancel_scope.cancel()
        except* (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except* Exception:
            # One broken connection must not take the server down with it.
            log.exception("a connection failed")
        finally:
            self.close_now()
            protocol: _H11 | None = getattr(self, "protocol", None)
            if protocol is not None:
                protocol.leave_ticket()
                protocol.tell_judged()
            if self.judged is not None:
                self.judged()

    def close_now(self) -> None:
        # Synchronous: wakes any task blocked on this socket with
        # ClosedResourceError, and cannot be lost to a cancel.
        self.stream.socket.close()

    def close_if_quiet(self) -> None:
        """At shutdown: a connection with no request in flight goes now."""
        if self.lifetime.quiet:
            self.close_now()

    async def _read(self) -> None:
        if self.initial:
            data, self.initial = self.initial, b""
            self.lifetime.received(trio.current_time())
            self._rearm()
            await self.protocol.handle(RawData(data))
        while True:
            try:
                data = await self.stream.receive_some(MAX_RECV)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                break
            if self.stream.socket.did_shutdown_SHUT_WR:
                # Lingering close: what the client still sends is dropped.
                if not data:
                    break
                continue
            if data:
                self.lifetime.received(trio.current_time())
                self._rearm()
            await self.protocol.handle(RawData(bytes(data)))
            if not data:
                break
        await self.protocol.handle(Closed())

    async def _protocol_send(self, event: Event) -> None:
        if isinstance(event, RawData):
            await self._lock_send()
            try:
                data = event.data
                sent = self._send_at_once(data)
                if sent < len(data):
                    with trio.CancelScope(shield=True):
                        await self.stream.send_all(memoryview(data)[sent:])
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                await self.protocol.handle(Closed())
            finally:
                self._send_lock.release()
        elif isinstance(event, Closed):
            self._half_close()
            await self.protocol.handle(Closed())
        elif isinstance(event, Updated):
            # Runs in the request's task, which quart-trio cancels right
            # after the response: nothing here may await.
            now = trio.current_time()
            if event.idle:
                self.lifetime.response_finished(now)
            else:
                self.lifetime.request_started(now)
            self._rearm()
            self.registry.settle()

    def _send_at_once(self, data: bytes) -> int:
        """How much of ``data`` the socket took without waiting: usually
        all of it. ``send_all`` costs a shielded cancel scope and a
        scheduler pass per write even then, and a paced token is one write;
        the rest of a write the socket could not take goes through it.
        (Writing never stops the task: the body's task checkpoints on each
        piece it takes from the turn's writer.)"""
        if not data:
            return 0
        fd = self.stream.socket.fileno()
        if fd == -1:
            return 0  # closed: send_all says so as it always did
        try:
            # os.write is send(2) without flags on a socket's descriptor.
            return os.write(fd, data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise trio.BrokenResourceError(f"the client's socket failed: {exc}") from exc

    async def _lock_send(self) -> None:
        """``self._send_lock.acquire()`` less its scheduler pass when the
        lock is free (the usual case: it is only contended by a timeout's
        answer); cancellation is still checked here first."""
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            self._send_lock.acquire_nowait()
        except trio.WouldBlock:
            await self._send_lock.acquire()

    def _half_close(self) -> None:
        """The server has nothing more to say: send FIN now, drain a while."""
        self.lifetime.closing(trio.current_time())
        self._rearm()
        self.registry.settle()
        sock = self.stream.socket
        if self.registry.terminating:
            self.close_now()
        elif sock.fileno() != -1 and not sock.did_shutdown_SHUT_WR:
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                self.close_now()

    def _rearm(self) -> None:
        self._timer.deadline = self.lifetime.deadline

    async def _watch(self) -> None:
        while self.stream.socket.fileno() != -1:
            with self._timer:
                await trio.sleep_forever()
            self._timer = trio.CancelScope(deadline=self.lifetime.deadline)
            expiry = self.lifetime.expired(trio.current_time())
            if expiry is Expiry.HEAD:
                await self._say(self.registry.slow_head)
                self._half_close()
            elif expiry is not None:
                self.close_now()
                return

    async def _say(self, answer: bytes) -> None:
        with trio.move_on_after(self.lifetime.limits.linger):
            async with self._send_lock:
                try:
                    await self.stream.send_all(answer)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass


class _Connections:
    """The open connections, and room for more."""

    def __init__(
        self,
        limit: int,
        limits: ConnectionLimits,
        settings: str | None,
        headers: Mapping[str, str] | None = None,
        per_client: int | None = None,
        door: Door | None = None,
    ) -> None:
        headers = headers or {}
        self.door = door
        self.limit = limit
        self.per_client = per_client
        self.by_address: Counter[str] = Counter()
        self.limits = limits
        self.settings = settings
        self.headers = tuple(
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in headers.items()
        )
        self.open: set[_Connection] = set()
        self.held = 0
        """Connections accepted and held unread (:class:`~.holding.Holding`)."""
        self.refusing = 0
        self.terminating = False
        self.empty = trio.Event()
        self.empty.set()
        self.quiet = trio.Event()
        """Set during shutdown once no connection has a request in flight."""
        self._room = trio.Event()
        self._room.set()
        self._warned_at = -_WARN_EVERY
        self._client_warned_at = -_WARN_EVERY
        self.slow_head = raw_error_response(
            408,
            "the request's headers did not arrive within "
            f"{self.named('header_timeout', f'{limits.header_timeout:g} s')}",
            code="request_timeout",
            headers=dict(headers),
        )
        self.too_many = raw_error_response(
            503,
            f"the server already has {self.named('max_connections', str(limit))} "
            "connections open; retry shortly",
            code="too_many_connections",
            headers={"retry-after": "1", **headers},
        )
        self.too_many_from_client = raw_error_response(
            429,
            "this client address already has "
            f"{self.named('max_connections_per_client', str(per_client))} connections "
            "open; close one or retry shortly",
            code="too_many_client_connections",
            headers={"retry-after": "1", **headers},
        )

    def named(self, key: str, value: str) -> str:
        """``value``, with the setting that decides it when it has a name."""
        return f"{self.settings}.{key} ({value})" if self.settings else value

    @property
    def full(self) -> bool:
        return len(self.open) + self.held >= self.limit

    def hold(self, address: str) -> None:
        self.held += 1
        self.by_address[address] += 1

    def let_go(self, address: str) -> None:
        """A held connection is served, refused or gone."""
        self.held -= 1
        self.by_address[address] -= 1
        if self.by_address[address] <= 0:
            del self.by_address[address]

    def full_for(self, address: str) -> bool:
        """The client at ``address`` holds all the connections it may. A
        client already gone has no address ("") and is not counted against
        any other: its connection ends at its first read."""
        return (
            self.per_client is not None
            and address != ""
            and self.by_address[address] >= self.per_client
        )

    def add(self, connection: _Connection) -> None:
        self.open.add(connection)
        self.by_address[connection.address] += 1
        if self.empty.is_set():
            self.empty = trio.Event()

    def discard(self, connection: _Connection) -> None:
        if connection in self.open:
            self.open.discard(connection)
            self.by_address[connection.address] -= 1
            if self.by_address[connection.address] <= 0:
                del self.by_address[connection.address]
        if not self.open:
            self.empty.set()
        self.settle()

    def settle(self) -> None:
        """A connection's request ended or it went away: during shutdown,
        note when no request is in flight any more."""
        if self.terminating and all(c.lifetime.quiet for c in self.open):
            self.quiet.set()

    def refusal_started(self, address: str | None = None) -> None:
        """A connection is being refused: the server is full, or (with
        ``address``) that client is."""
        self.refusing += 1
        now = trio.current_time()
        if address is not None:
            if now - self._client_warned_at >= _WARN_EVERY:
                self._client_warned_at = now
                log.warning(
                    "%s reached by %s: its new connections get 429",
                    self.named("max_connections_per_client", str(self.per_client)),
                    address,
                )
        elif now - self._warned_at >= _WARN_EVERY:
            self._warned_at = now
            log.warning(
                "%s reached: new connections get 503",
                self.named("max_connections", str(self.limit)),
            )
        if self.refusing >= REFUSING_AT_MOST:
            self._room = trio.Event()

    def refusal_done(self) -> None:
        self.refusing -= 1
        self._room.set()

    async def room(self) -> None:
        await self._room.wait()

    def close_quiet(self) -> None:
        for connection in list(self.open):
            connection.close_if_quiet()

    def close_all(self) -> None:
        for connection in list(self.open):
            connection.close_now()


async def _refuse(stream: trio.SocketStream, connections: _Connections, answer: bytes) -> None:
    """A clear 503 (or 429) instead of a hang, then close (after letting the
    client finish sending, so the answer is not lost to a reset)."""
    try:
        with trio.move_on_after(REFUSAL_LINGER):
            await stream.send_all(answer)
            stream.socket.shutdown(socket.SHUT_WR)
            while await stream.receive_some(MAX_RECV):
                pass
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    finally:
        stream.socket.close()
        connections.refusal_done()


async def _accept(
    listener: trio.SocketListener,
    connections: _Connections,
    launch: Launch,
    refusals: trio.Nursery,
    holding: Holding | None,
) -> None:
    try:
        await _accept_until_cancelled(listener, connections, launch, refusals, holding)
    finally:
        # Synchronous, so a cancel from outside still frees the port.
        listener.socket.close()


async def _accept_until_cancelled(
    listener: trio.SocketListener,
    connections: _Connections,
    launch: Launch,
    refusals: trio.Nursery,
    holding: Holding | None,
) -> None:
    while True:
        await connections.room()
        try:
            stream = await listener.accept()
        except OSError as exc:
            if exc.errno not in _ACCEPT_CAPACITY_ERRNOS:
                raise
            log.warning("cannot accept a connection (%s); retrying", exc.strerror or exc)
            await trio.sleep(0.1)
            continue
        address = _client_address(stream)
        if connections.full:
            connections.refusal_started()
            refusals.start_soon(_refuse, stream, connections, connections.too_many)
            continue
        if connections.full_for(address):
            connections.refusal_started(address)
            refusals.start_soon(_refuse, stream, connections, connections.too_many_from_client)
            continue
        if holding is None:
            launch(stream, address, b"", None)
        elif holding.arrive(stream, address):
            launch(stream, address, b"", holding.judged)
        else:
            connections.hold(address)


def _holding(
    door: Door, connections: _Connections, launch: Launch, config: HypercornConfig
) -> Holding:
    """Where new connections wait while ``door`` has no room."""

    def hand_over(stream: trio.SocketStream, address: str, initial: bytes) -> None:
        connections.let_go(address)
        launch(stream, address, initial, holding.judged)

    def answer_headers() -> list[tuple[bytes, bytes]]:
        return [*config.response_headers("h11"), *connections.headers]

    holding = Holding(door, hand_over, connections.let_go, answer_headers)
    return holding


def _door_answer(refusal: DoorRefusal, extra: tuple[tuple[bytes, bytes], ...]) -> bytes:
    headers = {name.lower(): value for name, value in refusal.headers}
    headers.update((name.decode("latin-1"), value.decode("latin-1")) for name, value in extra)
    return raw_error_response(refusal.status, refusal.message, code=refusal.code, headers=headers)


def _client_address(stream: trio.SocketStream) -> str:
    """The client's IP address (an IPv4 one as itself on a dual-stack
    socket); "" when it is gone already."""
    try:
        peer = stream.socket.getpeername()
    except OSError:
        return ""
    address = str(peer[0]) if isinstance(peer, tuple) else str(peer)
    return address.removeprefix("::ffff:") if "." in address else address


def listening_socket(host: str, port: int, write_timeout: float = 10.0) -> socket.socket:
    """A socket listening on ``host:port`` (``port=0`` picks a free one)
    whose connections fail a write the peer does not acknowledge within
    ``write_timeout`` seconds."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "TCP_USER_TIMEOUT"):
            # Linux: a peer that stops acknowledging our writes fails the
            # socket after write_timeout, so a client that stopped reading
            # can't hold a write (and shutdown) forever. Accepted sockets
            # inherit it.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(write_timeout * 1000))
        sock.bind((host, port))
        sock.listen(1024)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def serve_hypercorn(
    app: AppWrapper,
    config: HypercornConfig,
    listener: trio.SocketListener,
    stop: trio.Event,
    *,
    limits: ConnectionLimits | None = None,
    max_connections: int = 256,
    max_connections_per_client: int | None = None,
    app_idle: Callable[[], Awaitable[None]] | None = None,
    before_close: Callable[[], None] | None = None,
    settings: str | None = None,
    headers: Mapping[str, str] | None = None,
    door: Door | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on ``listener`` until ``stop`` is set, then shut down
    within ``config.graceful_timeout`` seconds whatever the clients do.

    At most ``max_connections`` connections are open at once (beyond: 503),
    at most ``max_connections_per_client`` (if given) from one client
    address (beyond: 429); ``limits`` bound how long each may take to ask
    and may sit idle. The grace period
    ends early once no request is in flight and ``app_idle`` (if given)
    has returned: the app has no work left, also none without a client
    (a background job). ``before_close`` runs when the grace period is
    over, just before the remaining connections are cut: the app's chance
    to end its work and its streams with a word to the client.
    ``settings``, the prefix of the config keys behind ``limits`` and
    ``max_connections``, lets the listener's own answers name them.
    ``headers`` go on every answer, the app's and the listener's own.
    ``door`` is asked about each request once its head is in, before the
    app is started for it (:mod:`.door`).
    """
    config.set_statsd_logger_class(StatsdLogger)
    limits = limits or ConnectionLimits()
    lifespan_state: LifespanState = {}
    lifespan = Lifespan(app, config, lifespan_state)
    context = WorkerContext(None)
    connections = _Connections(
        max_connections, limits, settings, headers, per_client=max_connections_per_client, door=door
    )
    handlers: trio.Nursery | None = None

    async def run(connection: _Connection) -> None:
        try:
            await connection.run()
        finally:
            connections.discard(connection)

    def launch(
        stream: trio.SocketStream, address: str, initial: bytes, judged: Callable[[], None] | None
    ) -> None:
        connection = _Connection(
            app, config, context, lifespan_state, stream, limits, connections, address
        )
        connection.initial, connection.judged = initial, judged
        connections.add(connection)
        assert handlers is not None
        handlers.start_soon(run, connection)

    holding = None if door is None else _holding(door, connections, launch, config)

    async with trio.open_nursery() as lifespan_nursery:
        await lifespan_nursery.start(lifespan.handle_lifespan)
        await lifespan.wait_for_startup()
        async with trio.open_nursery() as server_nursery:
            handlers = server_nursery
            async with trio.open_nursery() as accept_nursery:
                accept_nursery.start_soon(
                    _accept, listener, connections, launch, accept_nursery, holding
                )
                if holding is not None:
                    accept_nursery.start_soon(holding.run)
                task_status.started()
                await stop.wait()
                accept_nursery.cancel_scope.cancel()
            # No new requests on kept-alive connections from here on.
            await context.terminated.set()
            connections.terminating = True
            connections.close_quiet()
            connections.settle()
            with trio.move_on_after(config.graceful_timeout):
                if app_idle is not None:
                    await app_idle()
                await connections.quiet.wait()
            if before_close is not None:
                before_close()
                with trio.move_on_after(LAST_WORDS):
                    await connections.quiet.wait()
            connections.close_all()
            server_nursery.cancel_scope.cancel()
        await lifespan.wait_for_shutdown()
        lifespan_nursery.cancel_scope.cancel()
