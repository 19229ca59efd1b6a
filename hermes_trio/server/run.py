"""The API server: the app (behind its gate) on the listener of
:mod:`hermes_trio.listener`, which drives hypercorn's HTTP/1.1 protocol.

``open_api_server`` runs it for the life of a block: ``hermes-trio serve``
(:mod:`hermes_trio.cli.serve`), the gateway, tests and trio programs that
embed it all start it this way.
"""

from __future__ import annotations

import logging
import secrets
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.utils import wrap_app

from .. import metrics
from ..agent import Agent, open_agent
from ..approvals import PENDING
from ..config import ApiServerConfig, Config, ConfigError
from ..endings import CancelCause
from ..listener import ConnectionLimits, listening_socket, serve_hypercorn
from ..listener.capacity import per_client_limit
from ..llm import NO_MODEL_SERVER
from ..store import SignalHandlers, Store, install_secret, keep_store, open_store, wall_clock
from .admission.keys import KeyRing, keys_of
from .admission.turn_slots import TurnSlots, turn_limit
from .app import asgi_app
from .approvals.route import RemoteApprovals
from .conversations.sessions import SESSION_INTERRUPTED, SessionStore
from .edge.gate import is_loopback
from .state import ServerState

__all__ = [
    "SHUTDOWN_GRACE",
    "ApiServer",
    "StoreInUse",
    "keyless_problem",
    "open_api_server",
    "open_shared_store",
    "session_key",
    "startup_problem",
]

log = logging.getLogger("hermes_trio.server")

SHUTDOWN_GRACE = 2.0
"""Seconds a stopping server gives its busy connections before it ends
their streams with its last words (read when the server starts, so that a
test of something else can shorten it in the process it starts)."""

T = TypeVar("T")


@dataclass
class ApiServer:
    host: str
    port: int
    state: ServerState

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"


def startup_problem(config: Config) -> str | None:
    """The one line that stops ``serve`` from starting, if any."""
    if not config.model.base_url:
        return NO_MODEL_SERVER
    api = config.api_server
    try:
        # The keys file is read here too: a broken one stops the start in
        # one line, and a file that lists no key is no key.
        keyed = bool(keys_of(api))
    except ConfigError as exc:
        return str(exc)
    return keyless_problem(api, keyed=keyed)


def keyless_problem(api: ApiServerConfig, *, keyed: bool) -> str | None:
    """Why a server on ``api.host`` must not serve with no key (``keyed``
    false), at its start and at a reload of its keys alike; None if it may."""
    if keyed or is_loopback(api.host):
        return None
    return (
        f"api_server.host is {api.host}, which is not a loopback address: set an API key "
        "(api_server.key or API_SERVER_KEY, or named keys in api_server.keys or "
        "api_server.keys_file) before listening beyond this machine"
    )


def session_key(config: Config) -> bytes:
    """The key of the session hashes in the request log: this install's
    secret in ``store.data_dir``, so the same session has the same hash
    after a restart and nobody without the secret can tell which id it was.
    A data directory that cannot hold it gives a key of this process only
    (hashes change at each restart), with a warning."""
    directory = Path(config.store.data_dir).expanduser()
    try:
        secret, changed = install_secret(directory)
    except OSError as exc:
        log.warning(
            "no install secret in store.data_dir %s (%s): session hashes in the request log "
            "change at each restart",
            directory,
            exc.strerror or exc,
        )
        return secrets.token_bytes(32)
    if changed:
        log.warning(
            "the install secret was readable by other users of this machine; made private: %s",
            ", ".join(changed),
        )
    return secret


def _hypercorn_config() -> HypercornConfig:
    hc = HypercornConfig()
    hc.graceful_timeout = SHUTDOWN_GRACE
    hc.accesslog = None
    # hypercorn's own "Running on …" line would repeat ours.
    hc.errorlog = logging.getLogger("hypercorn.error")
    hc.errorlog.setLevel(logging.WARNING)
    hc.backlog = 1024
    hc.h11_max_incomplete_size = 64 * 1024
    return hc


def _connection_limits(config: Config) -> ConnectionLimits:
    api = config.api_server
    return ConnectionLimits(header_timeout=api.header_timeout, idle_timeout=api.idle_timeout)


@asynccontextmanager
async def open_api_server(
    config: Config,
    *,
    agent: Agent | None = None,
    port: int | None = None,
    shutdown: trio.Event | None = None,
    store: StoreInUse | None = None,
    listening: socket.socket | None = None,
    headers: Mapping[str, str] | None = None,
) -> AsyncIterator[ApiServer]:
    """Serve the API inside this block (``port=0`` picks a free port).
    ``store``: a store the caller opened and keeps (the gateway's), else the
    configured one is opened here. ``listening``: a socket already listening
    (a ``serve --workers`` worker's, shared with the others), served instead
    of binding one, and closed at the end. ``headers`` go on every answer."""
    api = config.api_server
    # The keys this server will check, read once: the start's own check
    # (startup_problem) read the keys file earlier, and a file emptied
    # since must not leave a server beyond this machine keyless.
    keys = keys_of(api)
    problem = keyless_problem(api, keyed=bool(keys))
    if problem is not None:
        raise ConfigError(problem)
    # Bind first: a busy port must fail before anything touches the store.
    sock = listening or listening_socket(
        api.host, api.port if port is None else port, api.write_timeout
    )
    # The store outlives the turns nursery: turns record their end in it.
    # Opening it ends whatever processes that are gone left running (crash
    # recovery).
    async with (
        _closed_at_exit(sock),
        _given_or(agent, partial(open_agent, config)) as the_agent,
        _given_or(store, partial(open_shared_store, config)) as in_use,
        trio.open_nursery() as turns,
    ):
        state = ServerState(
            agent=the_agent,
            settings=api,
            nursery=turns,
            slots=TurnSlots(turn_limit(api)),
            sessions=SessionStore(
                in_use.store,
                ttl=api.session_ttl,
                max_sessions=api.max_sessions,
                max_bytes=api.session_max_bytes,
            ),
            created=int(wall_clock()),
            store=in_use.store,
            signals=in_use.signals,
            keys=KeyRing(keys),
        )
        turns.start_soon(state.slots.watch_lag)
        metrics.ADMISSION_LIMIT.set(state.slots.limit)
        in_use.signals.on("stop", partial(state.sessions.stop, reason=SESSION_INTERRUPTED))
        remote = state.approvals = in_use.approvals
        in_use.signals.busy = lambda: bool(state.turns) or remote.waiting
        app = asgi_app(state, session_key=await trio.to_thread.run_sync(session_key, config))
        state.slots.gate = app.lets_through
        bound_port = sock.getsockname()[1]
        hc = _hypercorn_config()
        stop = shutdown if shutdown is not None else trio.Event()
        async with trio.open_nursery() as server_nursery:
            await server_nursery.start(
                partial(
                    serve_hypercorn,
                    wrap_app(app, hc.wsgi_max_body_size, "asgi"),
                    hc,
                    trio.SocketListener(trio.socket.from_stdlib_socket(sock)),
                    stop,
                    limits=_connection_limits(config),
                    max_connections=api.max_connections,
                    max_connections_per_client=per_client_limit(
                        api.max_connections, api.max_connections_per_client
                    ),
                    app_idle=state.slots.wait_idle,
                    before_close=partial(state.stop_turns, CancelCause.SHUTDOWN),
                    settings="api_server",
                    headers=headers,
                    door=state.slots,
                )
            )
            try:
                yield ApiServer(api.host, bound_port, state)
            finally:
                # The listener ends the connections within its grace period;
                # open turns end with them.
                stop.set()
        turns.cancel_scope.cancel()


@asynccontextmanager
async def _closed_at_exit(sock: socket.socket) -> AsyncIterator[None]:
    # Also when the store fails to open, before the listener owns the socket.
    with sock:
        yield


@dataclass(frozen=True)
class StoreInUse:
    """An open store and who acts on the signals sent to this process."""

    store: Store
    signals: SignalHandlers
    approvals: RemoteApprovals
    """Answers to approvals between the processes sharing the store."""


@asynccontextmanager
async def open_shared_store(config: Config) -> AsyncIterator[StoreInUse]:
    """The configured store, with this process's duties to the others
    sharing it (heartbeat, recovery of dead processes' work, signals)
    running in the background for the life of the block."""
    async with open_store(config, recover=True) as store, trio.open_nursery() as duties:
        signals = SignalHandlers()
        # Every process sharing the store takes (or says it does not hold)
        # an approval answer another one received: a gateway's too.
        remote = RemoteApprovals(store, duties)
        signals.on("approval", remote.on_approval)
        signals.on("approval_reply", remote.on_reply)
        await duties.start(keep_store, store, signals)
        try:
            with PENDING.listed_with(remote.note):
                yield StoreInUse(store, signals, remote)
        finally:
            duties.cancel_scope.cancel()


@asynccontextmanager
async def _given_or(
    given: T | None, open_: Callable[[], AbstractAsyncContextManager[T]]
) -> AsyncIterator[T]:
    """``given`` when the caller passed one (and keeps it), else one opened
    here for as long as the block runs."""
    if given is not None:
        yield given
        return
    async with open_() as opened:
        yield opened
