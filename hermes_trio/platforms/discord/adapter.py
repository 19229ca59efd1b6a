"""Discord: messages arrive over the Gateway websocket, answers go out over
the REST API (httpx).

``run`` asks ``GET /users/@me`` (a wrong token shows here, before the
gateway starts) and ``GET /gateway/bot`` for the websocket URL, then keeps
one gateway connection open: the protocol (``gateway``) decides,
this module does the I/O and the waiting, on trio's clock. Losing the
connection is routine for Discord bots; the adapter resumes the session
(Discord replays what it missed) and logs one warning when an outage
starts and one line when it ends, never one per attempt.

Which messages are answered, and how they become ``InboundMessage``s, is
``messages``; the REST calls and their rate limits are
``rest``. Nothing is answered twice: the ids of recently handed
over messages are kept, and a replayed one is dropped.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Any, Final, Protocol, cast

import httpx
import trio
import trio_websocket

from ...config import DiscordConfig
from ...consumers.messenger import Button, Capabilities, PlatformError
from ...retry import Backoff
from ..base import ButtonPress, CredentialsRejected, InboundMessage
from ..http import allow_list, user_allowed
from ..websocket import open_websocket
from .api_types import (
    ActionRow,
    AllowedMentions,
    Interaction,
    InteractionCallback,
    MessageCreateParams,
    MessageEditParams,
    User,
)
from .gateway import (
    RESUME_CLOSE_CODE,
    Action,
    Dispatch,
    Fatal,
    GatewayProtocol,
    Reconnect,
    Send,
)
from .messages import SeenMessages, to_inbound
from .rest import UNKNOWN_MESSAGE, DiscordApiError, DiscordRest, TokenRejected

__all__ = [
    "DISCORD_CAPABILITIES",
    "Connect",
    "DiscordAdapter",
    "DiscordMessenger",
    "GatewayRefused",
    "GatewaySocket",
]

log = logging.getLogger("hermes_trio.platforms.discord")

# Discord's API is written in Python and measures content with len(), in
# code points (staff answer in discord/discord-api-docs#1315): "chars".
# Counting UTF-16 units instead would split emoji-heavy answers early.
DISCORD_CAPABILITIES = Capabilities(
    can_edit=True, max_length=2000, length_unit="chars", buttons=True
)

# Message components and interactions (Discord API v10).
_ACTION_ROW: Final = 1
_BUTTON: Final = 2
_SUCCESS: Final = 3
_DANGER: Final = 4
_MESSAGE_COMPONENT = 3
"""An interaction's ``type`` when a button was pressed."""
_CHANNEL_MESSAGE, _DEFERRED_UPDATE = 4, 6
_EPHEMERAL = 1 << 6

# A READY for a bot in many servers is large; trio-websocket's default (1 MiB)
# would close the connection on it.
MAX_FRAME = 16 * 1024 * 1024
CONNECT_TIMEOUT = 10.0
CLOSE_TIMEOUT = 2.0

# Nobody gets pinged by the bot's answers, whatever the model writes.
NO_PINGS: AllowedMentions = {"parse": []}


class GatewayRefused(CredentialsRejected):
    """The gateway refused the bot for a reason only a setting can fix (the
    Message Content intent, sharding); restarting cannot help."""


class GatewaySocket(Protocol):
    """What the adapter needs of a websocket (trio-websocket's connection)."""

    async def get_message(self) -> str | bytes: ...

    async def send_message(self, message: str | bytes) -> None: ...

    async def aclose(self, code: int = 1000, reason: str | None = None) -> None: ...


Connect = Callable[[str], AbstractAsyncContextManager[GatewaySocket]]
"""Opens a gateway socket to a URL; raises ``trio_websocket.HandshakeError``
or ``OSError`` when it cannot. Its ``get_message`` raises
``trio_websocket.ConnectionClosed`` once the socket is closed."""


def open_gateway_socket(url: str) -> AbstractAsyncContextManager[GatewaySocket]:
    return open_websocket(
        url,
        max_message_size=MAX_FRAME,
        connect_timeout=CONNECT_TIMEOUT,
        close_timeout=CLOSE_TIMEOUT,
    )


class _Stop(Exception):
    """The inbound channel is closed: nobody listens any more."""


class DiscordAdapter:
    """Receives messages over the Gateway and hands out one
    ``DiscordMessenger`` per channel.

    ``client`` is shared and owned by the caller. ``filter_users=True``
    drops messages from users outside a non-empty ``allowed_users`` here
    (the gateway passes False and refuses them itself). Reconnecting waits
    ``backoff_initial`` seconds after a failed attempt, doubling up to
    ``backoff_max``. ``connect`` opens gateway sockets (tests pass an
    in-memory one); ``rng`` drives the heartbeat jitter and the wait after
    an invalidated session.
    """

    name = "discord"

    def __init__(
        self,
        config: DiscordConfig,
        client: httpx.AsyncClient,
        *,
        filter_users: bool = True,
        request_timeout: float = 15.0,
        backoff_initial: float = 1.0,
        backoff_max: float = 60.0,
        connect: Connect = open_gateway_socket,
        rng: random.Random | None = None,
    ) -> None:
        if not config.token:
            raise PlatformError(
                "discord: no bot token configured "
                "(set platforms.discord.token or DISCORD_BOT_TOKEN)"
            )
        self.config = config
        self.rest = DiscordRest(
            client, config.token, config.api_base_url, request_timeout=request_timeout
        )
        self.protocol = GatewayProtocol(config.token, rng=rng or random.Random())
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._connect = connect
        self._allowed = allow_list(config.allowed_users, filter_users)
        self._seen = SeenMessages()
        self._gateway: str | None = None
        self._outage_since: float | None = None
        self._backoff = Backoff(backoff_initial, backoff_max)
        # The current socket reached READY or RESUMED.
        self._healthy = False
        self.bot_user: User | None = None
        self.connected = False
        """A session is live (READY or RESUMED seen on the current socket)."""

    def __repr__(self) -> str:
        return f"<DiscordAdapter {self.rest.base_url}>"

    @property
    def bot_id(self) -> str | None:
        if self.protocol.bot_user_id is not None:
            return self.protocol.bot_user_id
        if self.bot_user is not None and self.bot_user.get("id") is not None:
            return str(self.bot_user["id"])
        return None

    # -- inbound -----------------------------------------------------------

    async def run(
        self,
        inbound: trio.MemorySendChannel[InboundMessage],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Receive messages until cancelled.

        A rejected token raises ``TokenRejected`` before
        ``task_status.started()`` when Discord says so at once; Discord
        being unreachable does not hold up whoever started us: started is
        reported after the first connection attempt, whatever its outcome.
        """
        started = False

        def opened() -> None:
            nonlocal started
            if not started:
                started = True
                task_status.started()

        try:
            try:
                await self._who_am_i()
            except CredentialsRejected:
                raise
            except PlatformError as exc:
                end: Reconnect | Fatal = self._failed(f"could not reach Discord yet: {exc}")
            else:
                end = await self._one_connection(inbound, opened)
            while True:
                if isinstance(end, Fatal):
                    error = TokenRejected if end.credentials else GatewayRefused
                    raise error(end.message)
                opened()
                await trio.sleep(end.delay)
                end = await self._one_connection(inbound, opened)
        except _Stop:
            log.info("discord: inbound channel closed; stopping")
        finally:
            self.connected = False

    async def whoami(self) -> str:
        me = await self.rest.call("GET", "/users/@me")
        name = me.get("username") if isinstance(me, dict) else None
        return str(name or "the bot")

    async def _who_am_i(self) -> None:
        """The bot's own user and the gateway URL; raises ``TokenRejected``."""
        if self.bot_user is None:
            me = await self.rest.call("GET", "/users/@me")
            if isinstance(me, dict):
                self.bot_user = cast(User, me)  # GET /users/@me answers a user
        if self._gateway is None:
            answer = await self.rest.call("GET", "/gateway/bot")
            url = answer.get("url") if isinstance(answer, dict) else None
            if not isinstance(url, str) or not url:
                raise PlatformError("discord GET /gateway/bot: answer without a url")
            self._gateway = url

    async def _one_connection(
        self, inbound: trio.MemorySendChannel[InboundMessage], opened: Callable[[], None]
    ) -> Reconnect | Fatal:
        """Open one socket and keep it until it ends; returns what comes next."""
        if self._gateway is None:
            try:
                await self._who_am_i()
            except CredentialsRejected:
                raise
            except PlatformError as exc:
                return self._failed(f"could not reach Discord: {exc}")
        assert self._gateway is not None
        url = self.protocol.url(self._gateway)
        try:
            async with self._connect(url) as socket:
                opened()
                end = await self._session(socket, inbound)
                if isinstance(end, Reconnect) and end.close:
                    with trio.move_on_after(CLOSE_TIMEOUT):
                        await socket.aclose(RESUME_CLOSE_CODE)
        except (
            trio_websocket.HandshakeError,
            # The server hung up in the middle of the handshake or the close.
            trio_websocket.ConnectionClosed,
            trio.BrokenResourceError,
            OSError,
        ) as exc:
            return self._failed(f"could not connect to the gateway: {_describe(exc)}")
        finally:
            self.connected = False
        if isinstance(end, Fatal):
            return end
        if end.expected:
            log.debug("discord: %s; reconnecting", end.reason)
            return end
        if self._outage_since is None and self._healthy:
            # A live session dropped: try again at once, resuming.
            self._outage_begins(end.reason)
            return end
        return self._failed(end.reason, end.delay)

    def _failed(self, reason: str, at_least: float = 0.0) -> Reconnect:
        """An attempt that did not reach a live session: wait longer each time."""
        self._outage_begins(reason)
        delay = max(self._backoff.next(), at_least)
        log.debug("discord: %s; next attempt in %g s", reason, delay)
        return Reconnect(reason, delay=delay, close=False)

    async def _session(
        self, socket: GatewaySocket, inbound: trio.MemorySendChannel[InboundMessage]
    ) -> Reconnect | Fatal:
        protocol = self.protocol
        protocol.connected()
        self._healthy = False
        while True:
            actions: list[Action] | None = None
            deadline = protocol.heartbeat_at
            with trio.move_on_at(math.inf if deadline is None else deadline):
                try:
                    text = await socket.get_message()
                except trio_websocket.ConnectionClosed as exc:
                    return protocol.closed(_close_code(exc))
                actions = protocol.receive(text, trio.current_time())
            if actions is None:
                actions = protocol.heartbeat_due(trio.current_time())
            for action in actions:
                if isinstance(action, Send):
                    try:
                        await socket.send_message(action.text())
                    except trio_websocket.ConnectionClosed as exc:
                        return protocol.closed(_close_code(exc))
                elif isinstance(action, Dispatch):
                    await self._dispatch(action, inbound)
                else:
                    return action

    async def _dispatch(
        self, event: Dispatch, inbound: trio.MemorySendChannel[InboundMessage]
    ) -> None:
        if event.name in ("READY", "RESUMED"):
            self._session_live(event)
        elif event.name == "MESSAGE_CREATE":
            await self._message(event.data, inbound)
        elif event.name == "INTERACTION_CREATE":
            await self._interaction(event.data, inbound)

    async def _interaction(
        self, data: Any, inbound: trio.MemorySendChannel[InboundMessage]
    ) -> None:
        """A press on one of our buttons (an interaction of type 3); it must
        be answered within 3 seconds (``ButtonPress.acknowledge``)."""
        if not isinstance(data, dict) or data.get("type") != _MESSAGE_COMPONENT:
            return
        # An interaction from here on; each field is still checked where read.
        interaction = cast(Interaction, data)
        member = interaction.get("member")
        user = member.get("user") if isinstance(member, dict) else interaction.get("user")
        component = interaction.get("data")
        message = interaction.get("message")
        if (
            not isinstance(user, dict)
            or not isinstance(component, dict)
            or not all(isinstance(interaction.get(k), str) for k in ("id", "token", "channel_id"))
        ):
            return
        message_id = message.get("id") if isinstance(message, dict) else None
        press = InboundMessage(
            platform="discord",
            chat_id=str(interaction["channel_id"]),
            user_id=str(user.get("id")),
            text="",
            message_id=None if message_id is None else str(message_id),
            user_name=user.get("global_name") or user.get("username"),
            raw=data,
            press=ButtonPress(
                data=str(component.get("custom_id") or ""),
                message_id=None if message_id is None else str(message_id),
                acknowledge=partial(self._acknowledge, interaction["id"], interaction["token"]),
            ),
        )
        try:
            await inbound.send(press)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise _Stop from None

    async def _acknowledge(
        self, interaction_id: str, interaction_token: str, notice: str | None
    ) -> None:
        # Taken: type 6 acknowledges without a reply (the prompt is edited
        # next); refused: a reply only the presser sees.
        body: InteractionCallback = {"type": _DEFERRED_UPDATE}
        if notice:
            body = {
                "type": _CHANNEL_MESSAGE,
                "data": {"content": notice, "flags": _EPHEMERAL, "allowed_mentions": NO_PINGS},
            }
        await self.rest.call(
            "POST",
            "/interactions/{interaction_id}/{interaction_token}/callback",
            major=interaction_id,
            interaction_id=interaction_id,
            interaction_token=interaction_token,
            json=body,
        )

    def _session_live(self, event: Dispatch) -> None:
        self.connected = True
        self._healthy = True
        self._backoff.reset()
        if event.name == "READY" and isinstance(event.data, dict):
            user = event.data.get("user")
            if isinstance(user, dict):
                self.bot_user = cast(User, {**(self.bot_user or {}), **user})
        if self._outage_since is not None:
            log.info("discord: reconnected after %.0f s", trio.current_time() - self._outage_since)
            self._outage_since = None
        elif event.name == "READY":
            name = self.bot_user.get("username", "?") if self.bot_user else "?"
            log.info("discord: connected to the gateway as @%s", name)

    async def _message(self, data: Any, inbound: trio.MemorySendChannel[InboundMessage]) -> None:
        message = to_inbound(
            data,
            bot_id=self.bot_id,
            mention_only=self.config.mention_only,
            fetcher=self.rest.fetcher,
        )
        if message is None:
            return
        key = message.message_id
        if key is not None and key in self._seen:
            log.debug("discord: message %s was already handled; dropping the replay", key)
            return
        if not user_allowed(self._allowed, message.user_id):
            log.info("discord: ignoring a message from user %s (not allowed)", message.user_id)
        else:
            try:
                # Marked handled only once delivered: a send cancelled half
                # way has not delivered, and the replay may still come.
                await inbound.send(message)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise _Stop from None
        if key is not None:
            self._seen.add(key)

    def _outage_begins(self, reason: str) -> None:
        if self._outage_since is not None:
            return
        self._outage_since = trio.current_time()
        log.warning("discord: %s; reconnecting", reason)

    # -- outbound ----------------------------------------------------------

    def messenger(self, chat_id: str, thread_id: str | None = None) -> DiscordMessenger:
        # A Discord thread is a channel of its own: answering "in the
        # thread" is sending to its id.
        return DiscordMessenger(self.rest, str(thread_id or chat_id))


def _close_code(exc: trio_websocket.ConnectionClosed) -> int | None:
    code = exc.reason.code if exc.reason is not None else None
    # 1006: the connection broke without a close frame.
    return None if code in (None, 1006) else code


def _describe(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    text = str(exc) or type(exc).__name__
    if isinstance(exc, trio_websocket.HandshakeError) and cause is not None and not str(exc):
        text = str(cause) or type(cause).__name__
    return text


class DiscordMessenger:
    """Sending to one Discord channel (a DM, a server channel or a thread).

    Markdown goes out as written: Discord renders it. Mentions in the text
    never ping anyone (``allowed_mentions``). Discord accepts an edit to
    identical text, so "not modified" never comes up; a message already
    deleted counts as deleted.
    """

    capabilities = DISCORD_CAPABILITIES

    def __init__(self, rest: DiscordRest, channel_id: str) -> None:
        self._rest = rest
        self.chat_id = channel_id

    def __repr__(self) -> str:
        return f"<DiscordMessenger channel={self.chat_id}>"

    async def send(self, text: str) -> str:
        answer = await self._rest.call(
            "POST",
            "/channels/{channel_id}/messages",
            major=self.chat_id,
            channel_id=self.chat_id,
            json=MessageCreateParams(content=text, allowed_mentions=NO_PINGS),
        )
        if not isinstance(answer, dict) or answer.get("id") is None:
            raise PlatformError("discord: a sent message came back without an id")
        return str(answer["id"])

    async def edit(self, message_id: str, text: str, *, final: bool = False) -> None:
        await self._rest.call(
            "PATCH",
            "/channels/{channel_id}/messages/{message_id}",
            major=self.chat_id,
            channel_id=self.chat_id,
            message_id=message_id,
            json=MessageEditParams(content=text, allowed_mentions=NO_PINGS),
        )

    async def send_buttons(self, text: str, buttons: Sequence[Button]) -> str:
        row: ActionRow = {
            "type": _ACTION_ROW,
            "components": [
                {
                    "type": _BUTTON,
                    "style": _DANGER if button.danger else _SUCCESS,
                    "label": button.label,
                    "custom_id": button.data,
                }
                for button in buttons
            ],
        }
        answer = await self._rest.call(
            "POST",
            "/channels/{channel_id}/messages",
            major=self.chat_id,
            channel_id=self.chat_id,
            json=MessageCreateParams(content=text, allowed_mentions=NO_PINGS, components=[row]),
        )
        if not isinstance(answer, dict) or answer.get("id") is None:
            raise PlatformError("discord: a sent message came back without an id")
        return str(answer["id"])

    async def close_buttons(self, message_id: str, text: str) -> None:
        await self._rest.call(
            "PATCH",
            "/channels/{channel_id}/messages/{message_id}",
            major=self.chat_id,
            channel_id=self.chat_id,
            message_id=message_id,
            json=MessageEditParams(content=text, allowed_mentions=NO_PINGS, components=[]),
        )

    async def delete(self, message_id: str) -> None:
        try:
            await self._rest.call(
                "DELETE",
                "/channels/{channel_id}/messages/{message_id}",
                major=self.chat_id,
                channel_id=self.chat_id,
                message_id=message_id,
            )
        except DiscordApiError as exc:
            if exc.code == UNKNOWN_MESSAGE:
                return
            raise

    async def typing(self) -> None:
        await self._rest.call(
            "POST", "/channels/{channel_id}/typing", major=self.chat_id, channel_id=self.chat_id
        )
