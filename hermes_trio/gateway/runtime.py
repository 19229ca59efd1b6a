"""``hermes-trio gateway``: chat platform adapters under supervision.

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

import argparse
import logging
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING

import httpx
import trio

from ..agent import Agent, open_agent
from ..config import Config
from ..llm import NO_MODEL_SERVER
from ..platforms import homeassistant as _homeassistant
from ..platforms import telegram as _telegram
from ..platforms import whatsapp as _whatsapp
from ..platforms.base import InboundMessage, Messenger, PlatformAdapter, PlatformError
from ..redaction import shown_url
from .access import AllowList, allow_hint, configured_allow_list
from .sessions import ChatSessions, Session
from .supervisor import RESTART_BACKOFF_INITIAL, AdapterStatus, first_leaf, supervise

if TYPE_CHECKING:
    from ..server.run import ApiServer

__all__ = [
    "AdapterStatus",
    "Gateway",
    "Session",
    "build_adapters",
    "enabled_platforms",
    "open_gateway",
    "run_gateway",
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
    ) -> None:
        self.config = config
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
        self._chats = ChatSessions(config, agent, nursery, self._messenger, self._notify)
        self._backoff_initial = restart_backoff_initial
        self._changed = trio.Event()

    # -- observing ---------------------------------------------------------

    @property
    def sessions(self) -> dict[tuple[str, str], Session]:
        return self._chats.sessions

    @property
    def refused(self) -> list[InboundMessage]:
        """Refused messages, most recent last (bounded), for operators and tests."""
        return self._access.refused

    def session(self, platform: str, chat_id: str | int) -> Session | None:
        return self._chats.get(platform, chat_id)

    def turns_done(self, platform: str, chat_id: str | int) -> int:
        session = self.session(platform, chat_id)
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

    def _messenger(self, platform: str, chat_id: str) -> Messenger:
        return self.adapters[platform].messenger(chat_id)

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

        async with open_api_server(self.config, agent=self.agent) as server:
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
        if self._access.is_allowed(platform, message.user_id):
            self._chats.handle(platform, message)
            return
        refusal = self._access.refuse(platform, message)
        if refusal is not None:
            self._nursery.start_soon(self._chats.say, platform, message.chat_id, refusal)
        self._notify()


# ---------------------------------------------------------------------------
# Assembly


def telegram_enabled(config: Config) -> bool:
    telegram = config.platforms.telegram
    return bool(telegram.token) if telegram.enabled is None else telegram.enabled


def enabled_platforms(config: Config) -> list[str]:
    """The names of the chat platforms ``config`` enables, in start order."""
    platforms = config.platforms
    enabled = {
        "telegram": telegram_enabled(config),
        "whatsapp": platforms.whatsapp.enabled,
        "homeassistant": platforms.homeassistant.enabled,
    }
    return [name for name, on in enabled.items() if on]


def build_adapters(config: Config, client: httpx.AsyncClient) -> list[PlatformAdapter]:
    """The adapters ``config`` enables, sharing ``client`` (owned by the caller).

    Raises ``PlatformError`` (one line) when an enabled adapter lacks a setting.
    """
    return [_build_adapter(name, config, client) for name in enabled_platforms(config)]


def _build_adapter(name: str, config: Config, client: httpx.AsyncClient) -> PlatformAdapter:
    # filter_users=False everywhere: the gateway enforces the allow-lists
    # itself, because only it can answer a refused user.
    platforms = config.platforms
    if name == "telegram":
        return _telegram.TelegramAdapter(platforms.telegram, client, filter_users=False)
    if name == "whatsapp":
        return _whatsapp.WhatsAppAdapter(platforms.whatsapp, client, filter_users=False)
    if name == "homeassistant":
        ha = platforms.homeassistant
        return _homeassistant.HomeAssistantAdapter(
            ha,
            client,
            webhook_host=ha.webhook_host,
            webhook_port=ha.webhook_port,
            webhook_secret=ha.webhook_secret,
            reply_event=ha.reply_event,
            notify_service=ha.notify_service,
            filter_users=False,
        )
    raise ValueError(f"no chat platform named {name!r}")


@asynccontextmanager
async def open_gateway(
    config: Config,
    *,
    adapters: Sequence[PlatformAdapter] | None = None,
    agent: Agent | None = None,
    allowed_users: Mapping[str, Iterable[str | int]] | None = None,
    restart_backoff_initial: float = RESTART_BACKOFF_INITIAL,
) -> AsyncIterator[Gateway]:
    """Run the gateway for the life of this block.

    ``adapters`` default to the ones ``config`` enables; ``agent`` to one
    opened on ``config``; ``allowed_users`` (platform name → user ids) to the
    platforms' configured allow-lists. The block is entered once the API
    server listens and every adapter made its first start attempt.
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
# Command line


def startup_problem(config: Config) -> str | None:
    """The one line that stops ``hermes-trio gateway`` from starting, if any."""
    if not config.model.base_url:
        return NO_MODEL_SERVER
    if not (enabled_platforms(config) or config.api_server.enabled):
        return (
            "nothing to run: set TELEGRAM_BOT_TOKEN (or platforms.telegram.token), enable "
            "platforms.whatsapp or platforms.homeassistant, or enable the API server "
            "(api_server.enabled / API_SERVER_ENABLED=1)"
        )
    if config.api_server.enabled:
        from ..server.run import startup_problem as api_problem

        return api_problem(config)
    return None


def _say_cli(text: str, *, err: bool = False) -> None:
    print(f"hermes-trio gateway: {text}", file=sys.stderr if err else sys.stdout, flush=True)


async def _main(config: Config) -> int:
    async with httpx.AsyncClient() as client:
        try:
            adapters = build_adapters(config, client)
        except PlatformError as exc:
            _say_cli(str(exc), err=True)
            return 2
        code = 0
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    async for signum in signals:
                        _say_cli(f"{signal.Signals(signum).name} received, stopping", err=True)
                        # Running editors finish their shielded cleanup within
                        # their own deadline; nothing else waits.
                        nursery.cancel_scope.cancel()
                        return

                nursery.start_soon(watch)
                async with open_gateway(config, adapters=adapters) as gateway:
                    _say_cli(_ready_line(gateway))
                    if gateway.api_server is None:
                        # With nothing left that could receive a message, staying
                        # up would only hide the failure from a service manager.
                        await gateway.wait_until(gateway.all_adapters_failed)
                        _say_cli("every platform adapter failed (see above); stopping", err=True)
                        code = 1
                    else:
                        await trio.sleep_forever()
                nursery.cancel_scope.cancel()
        return code


def _ready_line(gateway: Gateway) -> str:
    parts: list[str] = []
    for name, adapter in gateway.adapters.items():
        status = gateway.adapter_status[name]
        if status.state == "failed":
            # Its own error line says why; it is not part of what runs.
            continue
        detail = "connected" if status.state == "running" else status.state
        bot = getattr(adapter, "bot_user", None)
        if isinstance(bot, dict) and bot.get("username"):
            detail = f"@{bot['username']}, {detail}"
        url = getattr(adapter, "webhook_url", None)
        if url:
            detail = f"{detail}, webhook {url}"
        parts.append(f"{name} ({detail})")
    if gateway.api_server is not None:
        parts.append(f"api server ({gateway.api_server.base_url})")
    config = gateway.config
    model_server = shown_url(config.model.base_url or "")
    return (
        f"running {', '.join(parts) or 'nothing'}; model server {model_server}; "
        f"a new message during a turn: {config.gateway.on_new_message}"
    )


def run_gateway(config: Config, args: argparse.Namespace | None = None) -> int:
    """``hermes-trio gateway``; returns the exit code."""
    problem = startup_problem(config)
    if problem:
        _say_cli(problem, err=True)
        return 2
    try:
        return trio.run(_main, config)
    except (OSError, BaseExceptionGroup) as exc:
        from ..server.store import StoreOpenError

        store_error = first_leaf(exc, (StoreOpenError,))
        if store_error is not None:
            _say_cli(str(store_error), err=True)
            return 1
        os_error = first_leaf(exc, (OSError,))
        if os_error is None:
            raise
        api = config.api_server
        _say_cli(
            f"cannot listen on {api.host}:{api.port}: {os_error.strerror or os_error}", err=True
        )
        return 1
