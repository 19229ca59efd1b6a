"""``hermes-trio gateway``: chat platform adapters, sessions and turns.

One nursery holds everything: a supervisor task per adapter (restarted with
backoff when it crashes), a dispatcher per adapter that turns inbound
messages into session work, one worker task per busy session, and the API
server when it is enabled. Cancelling that nursery (Ctrl-C, SIGTERM, leaving
``open_gateway``) stops all of it; each running turn's message editor still
does its shielded, deadline-bounded cleanup so no chat keeps a cursor.

A session is one chat on one platform ``(platform, chat_id)``, kept in
memory: the conversation history and a ``ToolContext``. Turns of a session
run one at a time, each in its own cancel scope with the agent and the
editor as sibling tasks. A new message either cancels the running turn
(``gateway.on_new_message: interrupt``, the default) or waits behind it
(``queue``).

The allow-list is enforced here and only here (adapters are built with
``filter_users=False``): only the gateway can answer a refused user. An empty
list refuses everyone — a bot token alone must not hand a shell-capable agent
to the whole platform — and the refusal tells the owner which id to allow.

Dangerous-command approval: chat platforms have no interactive approval yet,
so a session's ``ToolContext`` has no ``approve`` callback and dangerous
commands are refused unless ``agent.yolo`` is set.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import httpx
import trio

from .agent import Agent, open_agent
from .config import Config
from .consumers.editor import EditorReport, EditorSettings, run_editor
from .events import StreamEvent
from .platforms import homeassistant as _homeassistant
from .platforms import telegram as _telegram
from .platforms import whatsapp as _whatsapp
from .platforms.base import InboundMessage, Messenger, PlatformAdapter, PlatformError, RateLimited
from .tools import ToolContext

if TYPE_CHECKING:
    from .server.run import ApiServer

__all__ = [
    "AdapterStatus",
    "Gateway",
    "Session",
    "build_adapters",
    "open_gateway",
    "run_gateway",
    "run_gateway_async",
    "startup_problem",
]

log = logging.getLogger("hermes_trio.gateway")

_E = TypeVar("_E", bound=BaseException)

RESTART_BACKOFF_INITIAL = 1.0
# An adapter that ran at least this long before failing was healthy: its
# next restart starts the backoff over instead of waiting the maximum.
HEALTHY_RUN = 60.0
# A command reply or refusal is small; if the platform can't take it in this
# long, give up rather than hold the session's next turn.
REPLY_TIMEOUT = 10.0
# A stranger who keeps writing gets one refusal per this many seconds; every
# message is still logged.
REFUSAL_INTERVAL = 600.0
_REFUSAL_MEMORY = 1024
INBOUND_BUFFER = 16

# Errors after which restarting an adapter cannot help: the credentials have
# to change first.
AUTH_ERRORS: tuple[type[BaseException], ...] = (
    _telegram.TokenRejected,
    _whatsapp.TokenRejected,
    _homeassistant.TokenRejected,
)

HELP_TEXT = (
    "Send me a message and I'll answer.\n"
    "/stop: stop the answer in progress\n"
    "/new: start a new conversation"
)
# Settings a user would look for, per platform, in refusal and startup lines.
_ALLOW_HINTS: dict[str, str] = {
    "telegram": "platforms.telegram.allowed_users in config.yaml (or TELEGRAM_ALLOWED_USERS)",
    "whatsapp": "platforms.whatsapp.allowed_users in config.yaml",
    "homeassistant": "platforms.homeassistant.allowed_users in config.yaml",
}


class _Reply:
    """A short text a session owes its chat, sent in order with its turns."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


@dataclass(eq=False)
class Session:
    """One chat on one platform."""

    platform: str
    chat_id: str
    messages: list[dict[str, Any]]
    tool_context: ToolContext
    pending: deque[InboundMessage | _Reply] = field(default_factory=deque)
    turn: trio.CancelScope | None = None
    """The running turn's scope; cancelling it interrupts the turn."""
    working: bool = False
    turns_done: int = 0
    last_report: EditorReport | None = None


@dataclass
class AdapterStatus:
    state: Literal["starting", "running", "restarting", "failed"] = "starting"
    restarts: int = 0
    last_error: str | None = None


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
        self.sessions: dict[tuple[str, str], Session] = {}
        self.api_server: ApiServer | None = None
        """The API server when ``api_server.enabled`` (see its ``base_url``)."""
        self.refused: list[InboundMessage] = []
        """Refused messages, most recent last (bounded), for operators and tests."""
        self._nursery = nursery
        if allowed_users is None:
            allowed_users = {name: _configured_allow_list(config, name) for name in self.adapters}
        self._allowed = {
            name: frozenset(str(user) for user in allowed_users.get(name, ()))
            for name in self.adapters
        }
        self._backoff_initial = restart_backoff_initial
        self._refused_at: dict[tuple[str, str], float] = {}
        self._changed = trio.Event()

    # -- observing ---------------------------------------------------------

    def session(self, platform: str, chat_id: str | int) -> Session | None:
        return self.sessions.get((platform, str(chat_id)))

    def turns_done(self, platform: str, chat_id: str | int) -> int:
        session = self.session(platform, chat_id)
        return session.turns_done if session else 0

    def all_adapters_failed(self) -> bool:
        """Every adapter stopped for good (its credentials were rejected)."""
        return all(status.state == "failed" for status in self.adapter_status.values())

    def idle(self) -> bool:
        """No session has a turn running or work waiting."""
        return not any(s.working for s in self.sessions.values())

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds; re-checked whenever a turn ends,
        a reply goes out, a message is refused or an adapter changes state.
        Put a ``trio.fail_after`` around it."""
        while not predicate():
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # -- starting ----------------------------------------------------------

    async def _start(self) -> None:
        if self.config.api_server.enabled:
            self.api_server = await self._nursery.start(self._serve_api)
        for name, adapter in self.adapters.items():
            if not self._allowed[name]:
                log.warning(
                    "%s: the allow-list is empty, so every message will be refused; "
                    "add user ids to %s",
                    name,
                    _ALLOW_HINTS.get(name, f"the {name} allow-list"),
                )
            send, receive = trio.open_memory_channel[InboundMessage](INBOUND_BUFFER)
            self._nursery.start_soon(self._dispatch, adapter, receive)
            await self._nursery.start(self._supervise, adapter, send)

    async def _serve_api(self, *, task_status: trio.TaskStatus[ApiServer]) -> None:
        # Imported here: the web stack is only needed when the API is enabled.
        from .server.run import open_api_server

        async with open_api_server(self.config, agent=self.agent) as server:
            log.info("api server: listening on %s", server.base_url)
            task_status.started(server)
            await trio.sleep_forever()

    # -- adapter supervision -------------------------------------------------

    async def _supervise(
        self,
        adapter: PlatformAdapter,
        send: trio.MemorySendChannel[InboundMessage],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run ``adapter`` until cancelled, restarting it when it fails.

        Reports started after the first start attempt either way, so one
        broken platform never holds up the others.
        """
        name = adapter.name
        status = self.adapter_status[name]
        delay = self._backoff_initial
        reported = False
        with send:
            while True:
                began = trio.current_time()
                status.state = "starting"
                error: Exception | None = None
                try:
                    async with trio.open_nursery() as nursery:
                        await nursery.start(partial(adapter.run, send))
                        status.state = "running"
                        self._notify()
                        if not reported:
                            reported = True
                            task_status.started()
                except Exception as exc:
                    error = exc
                if not reported:
                    reported = True
                    task_status.started()
                fatal = _first_leaf(error, AUTH_ERRORS)
                if fatal is not None:
                    status.state = "failed"
                    status.last_error = str(fatal)
                    self._notify()
                    log.error(
                        "%s. Not restarting this adapter; fix the setting and restart the gateway.",
                        _prefixed(name, str(fatal)),
                    )
                    return
                if trio.current_time() - began >= HEALTHY_RUN:
                    delay = self._backoff_initial
                status.restarts += 1
                status.state = "restarting"
                status.last_error = _describe(error) if error else "stopped"
                self._notify()
                if error is None:
                    log.warning("%s: adapter stopped; restarting in %g s", name, delay)
                elif _first_leaf(error, (PlatformError,)) is not None:
                    log.error(
                        "%s: adapter failed: %s; restarting in %g s", name, _describe(error), delay
                    )
                else:
                    log.error(
                        "%s: adapter crashed; restarting in %g s", name, delay, exc_info=error
                    )
                await trio.sleep(delay)
                delay = min(delay * 2, max(self.config.gateway.restart_backoff_max, delay))

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

    def is_allowed(self, platform: str, user_id: str) -> bool:
        return str(user_id) in self._allowed.get(platform, frozenset())

    def handle(self, platform: str, message: InboundMessage) -> None:
        """Route one inbound message. Never waits: platform calls and turns
        happen in session workers, so a slow chat can't stall the inbound flow."""
        if platform not in self.adapters:
            raise ValueError(f"no adapter named {platform!r}")
        if not self.is_allowed(platform, message.user_id):
            self._refuse(platform, message)
            return
        session = self._session(platform, message.chat_id)
        command = _command(message.text)
        if command == "/stop":
            had_work = self._cancel(session)
            session.pending.append(_Reply("stopped" if had_work else "nothing to stop"))
        elif command in ("/new", "/reset"):
            self._cancel(session)
            # A new list, not .clear(): the cancelled turn still appends its
            # interrupt record to the list it was given.
            session.messages = []
            session.tool_context = self.agent.new_tool_context()
            session.pending.append(_Reply("new conversation"))
        elif command in ("/start", "/help"):
            session.pending.append(_Reply(HELP_TEXT))
        elif not message.text.strip():
            return
        else:
            if self.config.gateway.on_new_message == "interrupt" and session.turn is not None:
                log.info(
                    "%s chat %s: new message interrupts the running turn", platform, message.chat_id
                )
                session.turn.cancel()
            session.pending.append(message)
        self._wake(session)

    def _session(self, platform: str, chat_id: str) -> Session:
        key = (platform, chat_id)
        session = self.sessions.get(key)
        if session is None:
            session = Session(platform, chat_id, [], self.agent.new_tool_context())
            self.sessions[key] = session
        return session

    def _cancel(self, session: Session) -> bool:
        """Cancel the running turn and drop waiting messages; True if there was any."""
        waiting = [item for item in session.pending if isinstance(item, InboundMessage)]
        session.pending = deque(item for item in session.pending if isinstance(item, _Reply))
        running = session.turn is not None and not session.turn.cancel_called
        if session.turn is not None:
            session.turn.cancel()
        return running or bool(waiting)

    def _wake(self, session: Session) -> None:
        if not session.working:
            session.working = True
            self._nursery.start_soon(self._work, session)

    def _refuse(self, platform: str, message: InboundMessage) -> None:
        who = f"{message.user_id} ({message.user_name})" if message.user_name else message.user_id
        log.warning(
            "%s: refused a message from user %s in chat %s: not in the allow-list",
            platform,
            who,
            message.chat_id,
        )
        self.refused.append(message)
        del self.refused[:-_REFUSAL_MEMORY]
        now = trio.current_time()
        key = (platform, str(message.user_id))
        last = self._refused_at.get(key)
        if last is not None and now - last < REFUSAL_INTERVAL:
            self._notify()
            return
        if len(self._refused_at) >= _REFUSAL_MEMORY:
            self._refused_at = {
                k: t for k, t in self._refused_at.items() if now - t < REFUSAL_INTERVAL
            }
        self._refused_at[key] = now
        self._nursery.start_soon(
            self._say, platform, message.chat_id, self._refusal(platform, message)
        )
        self._notify()

    def _refusal(self, platform: str, message: InboundMessage) -> str:
        if self._allowed.get(platform):
            return f"Sorry, I only answer allowed users (your user id is {message.user_id})."
        where = _ALLOW_HINTS.get(platform, f"the {platform} allow-list")
        return (
            "Sorry, this bot doesn't answer anyone yet. If it's yours, add your user id "
            f"{message.user_id} to {where} and restart the gateway."
        )

    # -- session work --------------------------------------------------------

    async def _work(self, session: Session) -> None:
        try:
            while session.pending:
                item = session.pending.popleft()
                if isinstance(item, _Reply):
                    await self._say(session.platform, session.chat_id, item.text)
                    continue
                batch = [item]
                if self.config.gateway.on_new_message == "interrupt":
                    # Messages that piled up while a cancelled turn cleaned up
                    # are answered together, not one interrupted turn each.
                    while session.pending and isinstance(
                        head := session.pending[0], InboundMessage
                    ):
                        session.pending.popleft()
                        batch.append(head)
                await self._turn(session, batch)
        finally:
            session.working = False
            self._notify()

    def editor_settings(self, platform: str, messenger: Messenger) -> EditorSettings:
        streaming = self.config.streaming
        interval = streaming.edit_interval
        override = getattr(getattr(self.config.platforms, platform, None), "edit_interval", None)
        if override is not None:
            interval = override
        return EditorSettings(
            edit_interval=interval,
            min_tokens=streaming.min_tokens,
            cursor=streaming.cursor,
            streaming=streaming.enabled_for(platform) and messenger.capabilities.can_edit,
            show_tool_progress=self.config.display.show_tools,
        )

    async def _turn(self, session: Session, batch: list[InboundMessage]) -> None:
        platform, chat_id = session.platform, session.chat_id
        messenger = self.adapters[platform].messenger(chat_id)
        settings = self.editor_settings(platform, messenger)
        messages = session.messages
        for message in batch:
            messages.append({"role": "user", "content": message.text})
        send, receive = trio.open_memory_channel[StreamEvent](self.config.agent.channel_size)
        reports: list[EditorReport] = []

        async def show() -> None:
            reports.append(await run_editor(receive, messenger, settings))

        log.info("%s chat %s: turn started", platform, chat_id)
        began = trio.current_time()
        failed = False
        try:
            with trio.CancelScope() as scope:
                session.turn = scope
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(
                        partial(
                            self.agent.run_turn,
                            messages,
                            send,
                            stream=self.config.streaming.enabled_for(platform),
                            tool_context=session.tool_context,
                        )
                    )
                    nursery.start_soon(show)
        except Exception:
            # A bug in a tool or the agent ends this turn, not the gateway.
            failed = True
            log.exception("%s chat %s: the turn failed", platform, chat_id)
        finally:
            session.turn = None
            session.turns_done += 1
            session.last_report = reports[0] if reports else None
        outcome = "interrupted" if scope.cancelled_caught else "failed" if failed else "done"
        log.info(
            "%s chat %s: turn %s after %.1f s",
            platform,
            chat_id,
            outcome,
            trio.current_time() - began,
        )
        if failed:
            await self._say(platform, chat_id, "⚠️ Something went wrong; see the gateway log.")

    async def _say(self, platform: str, chat_id: str, text: str) -> bool:
        """Send one short message; logs and gives up on failure."""
        messenger = self.adapters[platform].messenger(chat_id)
        try:
            with trio.move_on_after(REPLY_TIMEOUT):
                while True:
                    try:
                        await messenger.send(text)
                        return True
                    except RateLimited as exc:
                        await trio.sleep(exc.retry_after)
                    except PlatformError as exc:
                        log.warning(
                            "%s chat %s: could not send a reply: %s", platform, chat_id, exc
                        )
                        return False
            log.warning("%s chat %s: could not send a reply in time", platform, chat_id)
            return False
        finally:
            self._notify()


# ---------------------------------------------------------------------------
# Assembly


def _configured_allow_list(config: Config, platform: str) -> list[Any]:
    section = getattr(config.platforms, platform, None)
    return list(getattr(section, "allowed_users", None) or [])


def telegram_enabled(config: Config) -> bool:
    telegram = config.platforms.telegram
    return bool(telegram.token) if telegram.enabled is None else telegram.enabled


def build_adapters(config: Config, client: httpx.AsyncClient) -> list[PlatformAdapter]:
    """The adapters ``config`` enables, sharing ``client`` (owned by the caller).

    Raises ``PlatformError`` (one line) when an enabled adapter lacks a setting.
    """
    platforms = config.platforms
    adapters: list[PlatformAdapter] = []
    if telegram_enabled(config):
        adapters.append(_telegram.TelegramAdapter(platforms.telegram, client, filter_users=False))
    if platforms.whatsapp.enabled:
        adapters.append(_whatsapp.WhatsAppAdapter(platforms.whatsapp, client, filter_users=False))
    ha = platforms.homeassistant
    if ha.enabled:
        adapters.append(
            _homeassistant.HomeAssistantAdapter(
                ha,
                client,
                webhook_host=ha.webhook_host,
                webhook_port=ha.webhook_port,
                webhook_secret=ha.webhook_secret,
                reply_event=ha.reply_event,
                notify_service=ha.notify_service,
                filter_users=False,
            )
        )
    return adapters


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
        return (
            "no model server configured: set model.base_url in config.yaml, "
            "HERMES_MODEL_BASE_URL or OPENAI_BASE_URL"
        )
    platforms = config.platforms
    if not (
        telegram_enabled(config)
        or platforms.whatsapp.enabled
        or platforms.homeassistant.enabled
        or config.api_server.enabled
    ):
        return (
            "nothing to run: set TELEGRAM_BOT_TOKEN (or platforms.telegram.token), enable "
            "platforms.whatsapp or platforms.homeassistant, or enable the API server "
            "(api_server.enabled / API_SERVER_ENABLED=1)"
        )
    if config.api_server.enabled:
        from .server.run import startup_problem as api_problem

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
        detail = status.state
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
    return (
        f"running {', '.join(parts)}; model server {config.model.base_url}; "
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
        os_error = _first_leaf(exc, (OSError,))
        if os_error is None:
            raise
        api = config.api_server
        _say_cli(
            f"cannot listen on {api.host}:{api.port}: {os_error.strerror or os_error}", err=True
        )
        return 1


# ---------------------------------------------------------------------------


def _leaves(exc: BaseException) -> Iterable[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _first_leaf(exc: BaseException | None, types: tuple[type[_E], ...]) -> _E | None:
    if exc is None:
        return None
    for leaf in _leaves(exc):
        if isinstance(leaf, types):
            return leaf
    return None


def _describe(exc: BaseException) -> str:
    return "; ".join(str(leaf) or type(leaf).__name__ for leaf in _leaves(exc))


def _prefixed(name: str, text: str) -> str:
    """``text`` starting with ``name:`` (adapter errors usually already do)."""
    return text if text.startswith(f"{name}:") or text.startswith(f"{name} ") else f"{name}: {text}"


def _command(text: str) -> str | None:
    """``/stop`` for "/stop", "/STOP" or "/stop@my_bot" (Telegram groups)."""
    words = text.strip().split(maxsplit=1)
    if not words or not words[0].startswith("/"):
        return None
    return words[0].split("@", 1)[0].lower()
