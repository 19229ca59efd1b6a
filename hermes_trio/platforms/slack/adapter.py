"""Slack: events over Socket Mode, answers over the Web API, on httpx and
trio-websocket.

Two tokens: the app-level token (``xapp-…``) only opens Socket Mode
connections (``apps.connections.open`` gives a one-time websocket URL); the
bot token (``xoxb-…``) does everything else. Every envelope is acknowledged
(``{"envelope_id": …}``) the moment it arrives, before any work, so Slack
has no reason to send it again; ``events.EventSieve`` drops it when it
does anyway. A ``disconnect`` envelope (Slack refreshes connections every
few hours) opens the next connection at once — except ``link_disabled``
(Socket Mode turned off), which is waited out like an outage; a dropped
socket, a connection quiet for ``ping_interval`` whose ping goes
unanswered, or an unreachable Slack is retried with capped backoff, logged
once when the outage begins and once when it ends.

The Web API is in ``api``; sending in ``send``: edits
(``chat.update``) by default, Slack's streaming methods with ``transport:
stream`` (where this adapter also stops streams left idle).
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar, cast

import httpx
import trio
import trio_websocket

from ...config import SlackConfig
from ...consumers.messenger import Messenger, PlatformError
from ...exception_groups import leaves
from ...redaction import redact
from ...retry import Backoff
from ..base import Attachment, ButtonPress, InboundMessage
from ..http import allow_list, user_allowed
from ..websocket import open_websocket
from .api import SlackTokenRejected, SlackWebApi, TokenKind
from .api_types import (
    AUTH_TEST,
    CONNECTIONS_OPEN,
    POST_EPHEMERAL,
    STOP_STREAM,
    Ack,
    BlockActionsPayload,
    PostEphemeralParams,
    WebApiCall,
)
from .events import EventSieve, SlackQuestion
from .send import OpenStreams, SlackMessenger, SlackStreamMessenger

__all__ = ["SlackAdapter"]

log = logging.getLogger("hermes_trio.platforms.slack")

# Socket Mode messages are small; this bounds a misbehaving peer.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
# A Socket Mode connection that goes quiet may be dead without a FIN (a
# sleeping laptop, a NAT that forgot us): a ping that is not answered in
# time ends it, so the next connection is opened instead of waiting forever.
PING_INTERVAL = 30.0
PING_TIMEOUT = 10.0
# A native stream no call has touched for this long is stopped, so a
# one-off reply sent as a stream (never edited, so never stopped by its
# messenger) does not show Slack's "writing" sign for ever.
STREAM_IDLE_STOP = 20.0
# Threads whose last asker is remembered (a stream into a channel names its
# reader); the oldest are forgotten first.
MAX_ASKERS = 4096

R = TypeVar("R")


class SlackAdapter:
    """Receives over Socket Mode; hands out one messenger per channel and thread.

    ``filter_users=True`` drops messages from users outside a non-empty
    ``allowed_users`` here; the gateway passes False and answers them itself.
    """

    name = "slack"

    def __init__(
        self,
        config: SlackConfig,
        client: httpx.AsyncClient,
        *,
        request_timeout: float = 30.0,
        backoff_initial: float = 1.0,
        backoff_max: float = 30.0,
        filter_users: bool = True,
        ping_interval: float = PING_INTERVAL,
        ping_timeout: float = PING_TIMEOUT,
        stream_idle_stop: float = STREAM_IDLE_STOP,
        close_timeout: float = 2.0,
    ) -> None:
        self.api = SlackWebApi(
            client,
            bot_token=config.bot_token,
            app_token=config.app_token,
            base_url=config.api_base_url,
            request_timeout=request_timeout,
        )
        self.config = config
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.stream_idle_stop = stream_idle_stop
        self.close_timeout = close_timeout
        self._allowed = allow_list(config.allowed_users, filter_users)
        # Under the gateway (which refuses strangers itself) a stranger's
        # message that did not address the bot is dropped here, unrefused.
        self._members = None if filter_users else frozenset(config.allowed_users)
        self._sieve: EventSieve | None = None
        self.team_id: str | None = None
        # Who asked last in each thread: a stream into a channel names its reader.
        self._askers: OrderedDict[tuple[str, str | None], tuple[str, str | None]] = OrderedDict()
        self.streams = OpenStreams()
        self._outage_since: float | None = None
        self.streams_unavailable = False
        """Set once the workspace refused the streaming methods: edits from then on."""

    def __repr__(self) -> str:
        return f"<SlackAdapter {self.api.base_url}>"

    async def call(self, request: WebApiCall[R], *, token: TokenKind = "bot") -> R:
        """``SlackWebApi.call``: the messengers call Slack through their adapter."""
        return await self.api.call(request, token=token)

    async def whoami(self) -> str:
        me = await self.call(AUTH_TEST({}))
        # The app-level token too: Socket Mode needs it.
        await self.call(CONNECTIONS_OPEN({}), token="app")
        return f"{me.get('user') or me.get('user_id')} in {me.get('team') or me.get('team_id')}"

    # -- inbound -------------------------------------------------------------

    async def run(
        self,
        inbound: trio.MemorySendChannel[InboundMessage],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Receive until cancelled. A rejected token raises at once (before
        ``task_status.started()`` when the first calls show it); an
        unreachable Slack is retried without holding up the caller."""
        try:
            async with trio.open_nursery() as nursery:
                if self.config.transport == "stream":
                    nursery.start_soon(self._stop_idle_streams)
                await self._receive(inbound, task_status)
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The janitor never fails: the error is the receiver's own.
            real = [e for e in leaves(group) if not isinstance(e, trio.Cancelled)]
            if len(real) == 1:
                raise real[0] from None
            raise

    async def _receive(
        self,
        inbound: trio.MemorySendChannel[InboundMessage],
        task_status: trio.TaskStatus[None],
    ) -> None:
        backoff = Backoff(self.backoff_initial, self.backoff_max)
        started = False
        while True:
            url: str | None = None
            try:
                url = await self._connect_url()
                problem: str | None = None
            except SlackTokenRejected:
                raise
            except PlatformError as exc:
                problem = str(exc)
            if not started:
                started = True
                task_status.started()
            if url is not None:
                try:
                    problem = await self._session(url, inbound, backoff)
                except trio.BrokenResourceError:
                    log.info("slack: inbound channel closed; stopping")
                    return
                if problem is None:
                    continue  # Slack asked for a new connection: open it now
            if self._outage_since is None:
                self._outage_since = trio.current_time()
                log.warning(
                    "slack: not connected (%s); reconnecting with backoff (at most %g s apart)",
                    problem,
                    self.backoff_max,
                )
            else:
                log.debug("slack: still not connected (%s)", problem)
            await trio.sleep(backoff.next())

    async def _connect_url(self) -> str:
        if self._sieve is None:
            me = await self.call(AUTH_TEST({}))
            user = me.get("user_id")
            if not isinstance(user, str):
                raise PlatformError("slack auth.test: answer without the bot's user id")
            bot_id = me.get("bot_id")
            self._sieve = EventSieve(
                user,
                bot_id=bot_id if isinstance(bot_id, str) else None,
                mention_only=self.config.mention_only,
            )
            team = me.get("team_id")
            self.team_id = team if isinstance(team, str) else None
            log.info("slack: connecting as %s", me.get("user", user))
        opened = await self.call(CONNECTIONS_OPEN({}), token="app")
        url = opened.get("url")
        if not isinstance(url, str) or not url.startswith(("ws://", "wss://")):
            raise PlatformError("slack apps.connections.open: answer without a websocket URL")
        return url

    async def _session(
        self, url: str, inbound: trio.MemorySendChannel[InboundMessage], backoff: Backoff
    ) -> str | None:
        """One Socket Mode connection; None when Slack asked us to reconnect,
        else why it ended."""
        try:
            async with open_websocket(
                url,
                max_message_size=MAX_MESSAGE_BYTES,
                connect_timeout=10.0,
                close_timeout=self.close_timeout,
            ) as socket:
                while True:
                    raw: str | bytes | None = None
                    with trio.move_on_after(self.ping_interval):
                        raw = await socket.get_message()
                    if raw is None:
                        # Quiet for a while: is anyone there? (trio-websocket's
                        # own reader takes the pong, whether we read or not.)
                        with trio.move_on_after(self.ping_timeout):
                            await socket.ping()
                            continue
                        return f"no answer to a ping in {self.ping_timeout:g} s"
                    outcome = await self._handle(raw, socket, inbound, backoff)
                    if outcome is not _GO_ON:
                        return outcome
        except _CONNECTION_ENDED as exc:
            return _describe(exc)

    async def _handle(
        self,
        raw: str | bytes,
        socket: trio_websocket.WebSocketConnection,
        inbound: trio.MemorySendChannel[InboundMessage],
        backoff: Backoff,
    ) -> str | None:
        """Handle one Socket Mode message; ``_GO_ON``, or how the session ends."""
        envelope = _parse(raw)
        if envelope is None:
            return _GO_ON
        envelope_id = envelope.get("envelope_id")
        if isinstance(envelope_id, str):
            # At once, before any work: a late ack makes Slack send it again.
            ack: Ack = {"envelope_id": envelope_id}
            await socket.send_message(json.dumps(ack))
        kind = envelope.get("type")
        if kind == "hello":
            self._connected(backoff)
        elif kind == "disconnect":
            reason = envelope.get("reason")
            if reason == "link_disabled":
                # Socket Mode was turned off in the app's settings: not a
                # refresh, so wait (with backoff) before asking again.
                return "Slack disabled Socket Mode for this app (link_disabled)"
            log.info("slack: Slack asked for a new connection (%s)", reason)
            return None
        elif kind == "events_api":
            await self._deliver(envelope, inbound)
        elif kind == "interactive":
            press = self._press(envelope.get("payload"))
            if press is not None:
                await inbound.send(press)
        return _GO_ON

    def _press(self, payload: object) -> InboundMessage | None:
        """A ``block_actions`` payload: someone pressed one of our buttons
        (already acknowledged with its envelope)."""
        if not isinstance(payload, dict) or payload.get("type") != "block_actions":
            return None
        # Slack's shape, not yet checked: each field is checked as it is read.
        shown = cast(BlockActionsPayload, payload)
        user = shown.get("user") or {}
        channel = (shown.get("channel") or {}).get("id")
        container = shown.get("container") or {}
        actions = shown.get("actions") or []
        if not isinstance(user.get("id"), str) or not isinstance(channel, str) or not actions:
            return None
        action = actions[0]
        if not isinstance(action, dict) or action.get("type") != "button":
            return None
        message = shown.get("message") or {}
        ts = container.get("message_ts") or message.get("ts")
        thread = message.get("thread_ts")
        return InboundMessage(
            platform="slack",
            chat_id=channel,
            user_id=user["id"],
            text="",
            message_id=ts if isinstance(ts, str) else None,
            user_name=user.get("name") or user.get("username"),
            raw=payload,
            thread_id=thread if isinstance(thread, str) else None,
            press=ButtonPress(
                data=str(action.get("value") or ""),
                message_id=ts if isinstance(ts, str) else None,
                acknowledge=partial(self._tell_presser, channel, user["id"], thread),
            ),
        )

    async def _tell_presser(self, channel: str, user: str, thread: Any, notice: str | None) -> None:
        # The envelope was acknowledged on arrival; a refusal is shown to
        # the presser alone.
        if notice is None:
            return
        params: PostEphemeralParams = {"channel": channel, "user": user, "text": notice}
        if isinstance(thread, str):
            params["thread_ts"] = thread
        await self.call(POST_EPHEMERAL(params))

    async def _stop_idle_streams(self) -> None:
        """Stop native streams nobody has touched for ``stream_idle_stop`` s."""
        while True:
            await trio.sleep(self.stream_idle_stop / 4)
            for channel, ts in self.streams.take_idle(trio.current_time(), self.stream_idle_stop):
                try:
                    await self.call(STOP_STREAM({"channel": channel, "ts": ts}))
                except PlatformError as exc:
                    # Slack ends idle streams itself in the end.
                    log.debug("slack: could not stop an idle stream in %s: %s", channel, exc)

    def _connected(self, backoff: Backoff) -> None:
        backoff.reset()
        if self._outage_since is not None:
            log.info(
                "slack: connected again after %.0f s", trio.current_time() - self._outage_since
            )
            self._outage_since = None

    async def _deliver(
        self, envelope: dict[str, object], inbound: trio.MemorySendChannel[InboundMessage]
    ) -> None:
        assert self._sieve is not None
        question = self._sieve.take(envelope)
        if question is None:
            return
        if not user_allowed(self._allowed, question.user):
            log.info("slack: ignoring a message from user %s (not allowed)", question.user)
            return
        if not question.addressed and self._members is not None:
            if question.user not in self._members:
                return  # talking to someone else, not to the bot
        key = (question.channel, question.thread)
        self._askers[key] = (question.user, question.team)
        self._askers.move_to_end(key)
        if len(self._askers) > MAX_ASKERS:
            self._askers.popitem(last=False)
        await inbound.send(self._inbound(question))

    def _inbound(self, question: SlackQuestion) -> InboundMessage:
        attachments = tuple(
            Attachment(
                f.get("mimetype") if isinstance(f.get("mimetype"), str) else None,
                f.get("name") if isinstance(f.get("name"), str) else None,
                f.get("size") if isinstance(f.get("size"), int) else None,
                self._fetcher(f.get("url_private")),
            )
            for f in question.files
        )
        try:
            sent_at: float | None = float(question.ts)
        except ValueError:
            sent_at = None
        return InboundMessage(
            platform="slack",
            chat_id=question.channel,
            user_id=question.user,
            text=question.text,
            message_id=question.ts,
            raw=question.event,
            thread_id=question.thread,
            attachments=attachments,
            sent_at=sent_at,
        )

    def _fetcher(self, url: object) -> Callable[[], Awaitable[bytes]]:
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            return partial(self.api.download, url)

        async def unavailable() -> bytes:
            raise PlatformError("slack: the file has no download URL (files:read scope missing?)")

        return unavailable

    # -- outbound ------------------------------------------------------------

    def messenger(self, chat_id: str, thread_id: str | None = None) -> Messenger:
        # Slack streams only as replies in a thread: a top-level direct
        # message is edited. Outside direct messages a stream must name its
        # reader: a thread nobody asked in since we started is edited too.
        if self.config.transport != "stream" or thread_id is None or self.streams_unavailable:
            return SlackMessenger(self, chat_id, thread_id)
        user, team = self._askers.get((chat_id, thread_id), (None, None))
        if user is None and not chat_id.startswith("D"):
            return SlackMessenger(self, chat_id, thread_id)
        return SlackStreamMessenger(
            self, chat_id, thread_id, recipient=user, team=team or self.team_id
        )

    def streams_refused(self, error: str) -> None:
        if not self.streams_unavailable:
            self.streams_unavailable = True
            log.warning(
                "slack: the workspace refused the streaming methods (%s); editing messages instead",
                error,
            )


# ``_handle``'s answer for "keep reading".
_GO_ON = "go on"
# How a Socket Mode connection ends without Slack asking for it.
_CONNECTION_ENDED = (
    trio_websocket.ConnectionClosed,
    trio_websocket.HandshakeError,
    trio_websocket.ConnectionTimeout,
    OSError,
)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, trio_websocket.ConnectionClosed) and exc.reason is not None:
        detail = exc.reason.reason or exc.reason.name
        return f"connection closed ({exc.reason.code}: {redact(str(detail))})"
    return f"{type(exc).__name__}: {redact(str(exc))}".rstrip(": ")


def _parse(raw: str | bytes) -> dict[str, object] | None:
    """A Socket Mode message as it came: each field is checked where it is
    read (``_handle``, ``_press``, ``EventSieve.take``)."""
    try:
        envelope = json.loads(raw)
    except ValueError:
        log.warning("slack: ignoring a Socket Mode message that is not JSON")
        return None
    return envelope if isinstance(envelope, dict) else None
