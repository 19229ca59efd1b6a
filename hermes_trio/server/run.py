"""``hermes-trio serve``: the app (behind its gate) on the listener of
:mod:`hermes_trio.serving`, which drives hypercorn's HTTP/1.1 protocol.

``open_api_server`` is the same server as an async context manager, for
tests and for trio programs that embed it.
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

import httpx
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.utils import wrap_app

from ..agent import Agent, open_agent
from ..config import Config
from ..llm import NO_MODEL_SERVER
from ..redaction import shown_url
from ..serving import ConnectionLimits, listening_socket, serve_hypercorn
from .app import ServerState, asgi_app
from .gate import is_loopback
from .sessions import SessionStore
from .store import StoreOpenError, open_response_store, wall_clock
from .turns import TurnSlots

__all__ = ["ApiServer", "open_api_server", "run_serve", "startup_problem"]

log = logging.getLogger("hermes_trio.server")

_E = TypeVar("_E", bound=BaseException)


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
    if not is_loopback(api.host) and not api.key:
        return (
            f"api_server.host is {api.host}, which is not a loopback address: set an API key "
            "(api_server.key or API_SERVER_KEY) before listening beyond this machine"
        )
    return None


def _hypercorn_config() -> HypercornConfig:
    hc = HypercornConfig()
    hc.graceful_timeout = 2.0
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
) -> AsyncIterator[ApiServer]:
    """Serve the API inside this block (``port=0`` picks a free port)."""
    api = config.api_server
    # Bind first: a busy port must fail before anything touches the store.
    sock = listening_socket(api.host, api.port if port is None else port, api.write_timeout)
    # The store outlives the turns nursery: turns record their end in it.
    # Opening it locks the data directory and ends whatever a previous
    # process left running (crash recovery).
    async with (
        _closed_at_exit(sock),
        _agent_or(config, agent) as the_agent,
        open_response_store(config, recover=True) as store,
        trio.open_nursery() as turns,
    ):
        state = ServerState(
            agent=the_agent,
            nursery=turns,
            slots=TurnSlots(api.max_concurrent),
            sessions=SessionStore(
                ttl=api.session_ttl,
                max_sessions=api.max_sessions,
                max_bytes=api.session_max_bytes,
            ),
            created=int(wall_clock()),
            store=store,
        )
        app = asgi_app(state)
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
                    app_idle=state.slots.wait_idle,
                    before_close=partial(state.stop_turns, "the server is shutting down"),
                    settings="api_server",
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


@asynccontextmanager
async def _agent_or(config: Config, agent: Agent | None) -> AsyncIterator[Agent]:
    if agent is not None:
        yield agent
        return
    async with open_agent(config) as opened:
        yield opened


async def _check_model_server(agent: Agent) -> None:
    """Warn once at start when the model server does not answer."""
    try:
        with trio.fail_after(agent.config.model.timeouts.connect + 5):
            await agent.client.probe()
    except (httpx.HTTPError, trio.TooSlowError) as exc:
        log.warning(
            "the model server at %s is not reachable (%s: %s); chat requests will get "
            "502 until it is",
            shown_url(agent.config.model.base_url or ""),
            type(exc).__name__,
            exc,
        )


async def _serve_until_signal(config: Config) -> None:
    stop = trio.Event()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                async for signum in signals:
                    if stop.is_set():
                        # A second Ctrl-C: stop waiting for anyone.
                        nursery.cancel_scope.cancel()
                        return
                    print(
                        f"hermes-trio serve: {signal.Signals(signum).name} received, stopping",
                        file=sys.stderr,
                        flush=True,
                    )
                    stop.set()
                    # Whatever is still open after a few seconds is cut off.
                    nursery.cancel_scope.deadline = trio.current_time() + 5

            nursery.start_soon(watch)
            async with open_api_server(config, shutdown=stop) as server:
                api = config.api_server
                auth = "an API key is required" if api.key else "no API key required"
                print(
                    f"hermes-trio serve: listening on {server.base_url} "
                    f"(model '{api.model_name}', {auth})\n"
                    f"hermes-trio serve: model server {shown_url(config.model.base_url or '')} "
                    f"(model {_model_label(config)}, {config.model.api_mode})",
                    flush=True,
                )
                nursery.start_soon(_check_model_server, server.state.agent)
                await stop.wait()
            nursery.cancel_scope.cancel()


def _leaves(group: BaseExceptionGroup[_E]) -> list[_E]:
    """The errors inside nested exception groups."""
    found: list[_E] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            found.extend(_leaves(exc))
        else:
            found.append(exc)
    return found


def _model_label(config: Config) -> str:
    name = config.model.name
    return f"'{name}'" if name else "the first one it lists"


def run_serve(config: Config, args: argparse.Namespace) -> int:
    problem = startup_problem(config)
    if problem:
        print(f"hermes-trio serve: {problem}", file=sys.stderr)
        return 2
    failures: list[OSError] = []
    store_failures: list[StoreOpenError] = []
    try:
        trio.run(_serve_until_signal, config)
    except* StoreOpenError as group:
        store_failures.extend(_leaves(group))
    except* OSError as group:
        failures.extend(_leaves(group))
    if store_failures:
        # Like a busy port: the environment, not the configuration's form.
        print(f"hermes-trio serve: {store_failures[0]}", file=sys.stderr)
        return 1
    if failures:
        api = config.api_server
        reason = failures[0].strerror or str(failures[0])
        print(
            f"hermes-trio serve: cannot listen on {api.host}:{api.port}: {reason}", file=sys.stderr
        )
        return 1
    return 0
