"""The gateway at run time: chat platform adapters under supervision.

One nursery holds everything: a supervisor task per adapter (restarted with
backoff when it crashes), a dispatcher per adapter that turns inbound
messages into session work, one worker task per busy session, and the API
server when it is enabled. Cancelling that nursery (Ctrl-C, SIGTERM, leaving
``open_gateway``) stops all of it; each running turn's message editor still
does its shielded, deadline-bounded cleanup so no chat keeps a cursor.

The parts live next door: ``supervisor`` keeps each adapter running,
``access`` decides who is answered, and ``sessions`` runs what happens in a
chat (turns, interrupts, ``/stop``, ``/new``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING

import httpx
import trio

from ..agent import Agent, open_agent
from ..config import Config
from ..consumers.messenger import Messenger
from ..llm import NO_MODEL_SERVER
from ..platforms.base import InboundMessage, PlatformAdapter
from ..platforms.registry import PLATFORMS, enabled_platforms
from .access import AllowList, allow_hint, configured_allow_list
from .chat_settings import ChatSettings
from .history import StoredHistory
from .sessions import ChatSessions, Session, SessionKey
from .supervisor import RESTART_BACKOFF_INITIAL, AdapterStatus, supervise

if TYPE_CHECKING:
    from ..server.run import ApiServer, StoreInUse

__all__ = [
    "Gateway",
    "build_adapters",
    "open_gateway",
    "run_gateway_async",
    "startup_problem",
]

log = logging.getLogger("hermes_trio.gateway")

INBOUND_BUFFER = 16


class Gateway:
    """The running gateway; get one from ``open_gateway``."""

    def __init__(
        self,
        config: Config,
        agent: Agent,
        adapters: Sequence[PlatformAdapter],
        nursery: trio.Nursery,
        *,
        allowed_users: Mapping[str, Iterable[str | int]] | None = None,
        restart_backoff_initial: float = RESTART_BACKOFF_INITIAL,
        store: StoreInUse | None = None,
    ) -> None:
        self.config = config
        self._store = store
        self.agent = agent
        self.adapters: dict[str, PlatformAdapter] = {}
        for adapter in adapters:
            if adapter.name in self.adapters:
                raise ValueError(f"two adapters are named {adapter.name!r}")
            self.adapters[adapter.name] = adapter
        self.adapter_status = {name: AdapterStatus() for name in self.adapters}
        self.api_server: ApiServer | None = None
        """The API server when ``api_server.enabled`` (see its ``base_url``)."""
        self._nursery = nursery
        if allowed_users is None:
            allowed_users = {name: configured_allow_list(config, name) for name in self.adapters}
        self._access = AllowList(allowed_users, self.adapters)
        self._chats = ChatSessions(
            config,
            agent,
            nursery,
            self._messenger,
            self._notify,
            history=StoredHistory(store.store) if store is not None else None,
            settings=ChatSettings(store.store if store is not None else None),
        )
        self._backoff_initial = restart_backoff_initial
        self._changed = trio.Event()

    # -- observing ---------------------------------------------------------

    @property
    def sessions(self) -> dict[SessionKey, Session]:
        return self._chats.sessions

    @property
    def refused(self) -> list[InboundMessage]:
        """Refused messages, most recent last (bounded), for operators and tests."""
        return self._access.refused

    def session(
        self, platform: str, chat_id: str | int, thread_id: str | int | None = None
    ) -> Session | None:
        return self._chats.get(platform, chat_id, thread_id)

    def turns_done(
        self, platform: str, chat_id: str | int, thread_id: str | int | None = None
    ) -> int:
        session = self.session(platform, chat_id, thread_id)
        return session.turns_done if session else 0

    def all_adapters_failed(self) -> bool:
        """Every adapter stopped for good (its credentials were rejected)."""
        return all(status.state == "failed" for status in self.adapter_status.values())

    def idle(self) -> bool:
        """No session has a turn running or work waiting."""
        return self._chats.idle()

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds; re-checked whenever a turn ends,
        a reply goes out, a message is refused or an adapter changes state.
        Put a ``trio.fail_after`` around it."""
        while not predicate():
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _messenger(self, platform: str, chat_id: str, thread_id: str | None) -> Messenger:
        return self.adapters[platform].messenger(chat_id, thread_id)

    # -- starting ----------------------------------------------------------

    async def _start(self) -> None:
        if self.config.api_server.enabled:
            self.api_server = await self._nursery.start(self._serve_api)
        for name, adapter in self.adapters.items():
            if self._access.is_empty(name):
                log.warning(
                    "%s: the allow-list is empty, so every message will be refused; "
                    "add user ids to %s",
                    name,
                    allow_hint(name),
                )
            send, receive = trio.open_memory_channel[InboundMessage](INBOUND_BUFFER)
            self._nursery.start_soon(self._dispatch, adapter, receive)
            await self._nursery.start(
                partial(
                    supervise,
                    adapter,
                    send,
                    self.adapter_status[name],
                    backoff_initial=self._backoff_initial,
                    backoff_max=self.config.gateway.restart_backoff_max,
                    notify=self._notify,
                )
            )

    async def _serve_api(self, *, task_status: trio.TaskStatus[ApiServer]) -> None:
        # Imported here: the web stack is only needed when the API is enabled.
        from ..server.run import open_api_server

        async with open_api_server(self.config, agent=self.agent, store=self._store) as server:
            log.info("api server: listening on %s", server.base_url)
            task_status.started(server)
            await trio.sleep_forever()

    async def _dispatch(
        self, adapter: PlatformAdapter, receive: trio.MemoryReceiveChannel[InboundMessage]
    ) -> None:
        async with receive:
            async for message in receive:
                try:
                    self.handle(adapter.name, message)
                except Exception:
                    # One bad message must not stop the platform's inbound flow.
                    log.exception("%s: could not handle a message", adapter.name)

    # -- inbound -------------------------------------------------------------

    def handle(self, platform: str, message: InboundMessage) -> None:
        """Route one inbound message. Never waits: platform calls and turns
        happen in session workers, so a slow chat can't stall the inbound flow."""
        if platform not in self.adapters:
            raise ValueError(f"no adapter named {platform!r}")
        # A press is answered whoever pressed: the approval decides whether
        # it counts, and tells anyone else so.
        if message.press is not None or self._access.is_allowed(platform, message.user_id):
            self._chats.handle(platform, message)
            return
        refusal = self._access.refuse(platform, message)
        if refusal is not None:
            self._nursery.start_soon(
                self._chats.say, platform, message.chat_id, refusal, message.thread_id
            )
        self._notify()


# ---------------------------------------------------------------------------
# Assembly


def build_adapters(config: Config, client: httpx.AsyncClient) -> list[PlatformAdapter]:
    """The adapters ``config`` enables, sharing ``client`` (owned by the caller).

    Raises ``PlatformError`` (one line) when an enabled adapter lacks a setting.
    """
    # filter_users=False: the gateway enforces the allow-lists itself,
    # because only it can answer a refused user.
    return [
        platform.build(config, client, filter_users=False) for platform in enabled_platforms(config)
    ]


@asynccontextmanager
async def open_gateway(
    config: Config,
    *,
    adapters: Sequence[PlatformAdapter] | None = None,
    agent: Agent | None = None,
    allowed_users: Mapping[str, Iterable[str | int]] | None = None,
    restart_backoff_initial: float = RESTART_BACKOFF_INITIAL,
    store: StoreInUse | None = None,
) -> AsyncIterator[Gateway]:
    """Run the gateway for the life of this block.

    ``adapters`` default to the ones ``config`` enables; ``agent`` to one
    opened on ``config``; ``allowed_users`` (platform name → user ids) to the
    platforms' configured allow-lists. With ``store`` (see
    ``hermes_trio.server.run.open_shared_store``) the chats' conversations
    are kept there, and survive a restart; without, in memory. The block is
    entered once the API server listens and every adapter made its first
    start attempt.
    """
    async with AsyncExitStack() as stack:
        if agent is None:
            agent = await stack.enter_async_context(open_agent(config))
        if adapters is None:
            client = await stack.enter_async_context(httpx.AsyncClient())
            adapters = build_adapters(config, client)
        async with trio.open_nursery() as nursery:
            gateway = Gateway(
                config,
                agent,
                adapters,
                nursery,
                allowed_users=allowed_users,
                restart_backoff_initial=restart_backoff_initial,
                store=store,
            )
            await gateway._start()
            try:
                yield gateway
            finally:
                nursery.cancel_scope.cancel()


async def run_gateway_async(
    config: Config,
    *,
    adapters: Sequence[PlatformAdapter] | None = None,
    agent: Agent | None = None,
    allowed_users: Mapping[str, Iterable[str | int]] | None = None,
    task_status: trio.TaskStatus[Gateway] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the gateway until cancelled (``nursery.start`` gives the ``Gateway``);
    the arguments are ``open_gateway``'s."""
    async with open_gateway(
        config, adapters=adapters, agent=agent, allowed_users=allowed_users
    ) as gateway:
        task_status.started(gateway)
        await trio.sleep_forever()


# ---------------------------------------------------------------------------
# Startup


def startup_problem(config: Config) -> str | None:
    """The one line that stops ``hermes-trio gateway`` from starting, if any."""
    if not config.model.base_url:
        return NO_MODEL_SERVER
    if not (enabled_platforms(config) or config.api_server.enabled):
        return f"nothing to run: {_ways_to_enable()}"
    if config.api_server.enabled:
        # Imported here: the web stack is only needed when the API is enabled.
        from ..server.run import startup_problem as api_problem

        return api_problem(config)
    return None


def _ways_to_enable() -> str:
    """ "set A, enable B or C, or enable the API server (…)": the platforms'
    switches, those with the same verb together."""
    settings: dict[str, list[str]] = {}
    for platform in PLATFORMS:
        verb, setting = platform.to_enable
        settings.setdefault(verb, []).append(setting)
    ways = [f"{verb} {' or '.join(names)}" for verb, names in settings.items()]
    ways.append("enable the API server (api_server.enabled / API_SERVER_ENABLED=1)")
    return f"{', '.join(ways[:-1])}, or {ways[-1]}"
