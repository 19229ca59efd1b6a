"""A fake Discord (REST API and Gateway websocket) on loopback ports,
enforcing the parts of the real contract an adapter relies on.

    async with open_fake_discord(token="bot-token") as fake:
        config = DiscordConfig(token="bot-token", api_base_url=fake.base_url)
        ...  # run the adapter; wait until fake.ready
        fake.push_message(channel_id="50", user_id="7", content="hi")
        ...
        assert fake.texts("50") == ["Hello!"]

REST (``fake.base_url`` ends in ``/api/v10``), with Discord's error bodies:

- ``Authorization: Bot <token>`` on every call; anything else is 401.
- ``GET /users/@me``, ``GET /gateway/bot`` (the fake's websocket URL),
  ``POST/PATCH/DELETE /channels/{id}/messages[/{mid}]``,
  ``POST /channels/{id}/typing``; attachment files under ``/attachments/``
  (no token, as on Discord's CDN).
- Content of 1 to 2000 characters (code points); an edit to identical text
  succeeds and changes nothing, as on Discord.
- Rate limits: with ``bucket_limit``, each route and channel allows that
  many calls per ``bucket_window`` seconds and every answer carries the
  ``X-RateLimit-*`` headers; past it, 429. ``rate_limit_next(...)``
  injects 429s on a route, or global ones.

Gateway (``fake.gateway_url``): HELLO, heartbeats and their ACKs, IDENTIFY
(wrong token: close 4004; the Message Content intent while
``message_content_allowed`` is False: close 4014), READY, RESUME (replays
the events after the client's sequence, then RESUMED), and injections:
``reconnect()`` (op 7), ``drop_connection()`` (TCP gone, no close frame),
``close_connection(code)``, ``invalidate_session(resumable)``,
``ack_heartbeats = False``, ``online = False`` (every new socket is closed
at once with 1001, and not recorded in ``connections``),
``replay_from`` (the next RESUME also replays already-seen events).

Message components and interactions: ``components`` on a create or edit
must be action rows (type 1) of at most 5 buttons (type 2) with a
``style`` of 1–5, a ``label`` of at most 80 characters and, except link
buttons (style 5, a ``url`` and no ``custom_id``), a ``custom_id`` of 1–100
characters unique in the message (else 400 50035 Invalid Form Body); an
edit without ``components`` keeps them, ``[]`` takes them away.
``press_button`` dispatches the INTERACTION_CREATE (type 3
MESSAGE_COMPONENT, with ``member`` in a server and ``user`` in a DM, an
interaction ``token``) a user's press makes. ``POST
/interactions/{id}/{token}/callback`` (no bot token needed) must come
within ``interaction_window`` (3) seconds and only once (else 404 10062
Unknown interaction, or 400 40060 already acknowledged); callback types
4 (a reply; ``flags`` 64: only the presser sees it), 5, 6 and 7 (update
the message) are taken, answered 204.

State for assertions: ``messages[channel_id]`` (the bot's messages with
their edit history), ``calls`` (every REST call with ``trio.current_time()``),
``gateway_ops`` (every op the client sent), ``connections``, ``typing``.

``fake.connect`` opens a gateway socket in memory (no network), for the
adapter's ``connect=``; with ``FakeTransport(fake.handle)`` for REST the
whole adapter runs on trio's ``MockClock``.
"""

from __future__ import annotations

import json
import math
import re
import urllib.parse
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, cast

import trio
import trio_websocket

from ..consumers.messenger import measure
from ..platforms.discord import api_types as api
from .fake_http import FakeRequest, FakeResponse, serve_http, server_nursery

__all__ = [
    "DiscordCall",
    "DiscordMessage",
    "FakeDiscord",
    "GatewayConnection",
    "GatewayOp",
    "open_fake_discord",
]

MAX_LENGTH = 2000
API_PREFIX = "/api/v10"
MESSAGE_CONTENT = 1 << 15


@dataclass
class DiscordCall:
    method: str
    path: str
    """Without ``/api/v10``."""
    json: Any
    time: float
    status: int = 0
    response: Any = None


@dataclass
class GatewayOp:
    """A payload the client sent over the gateway."""

    op: int
    d: Any
    time: float
    connection: int


@dataclass
class GatewayConnection:
    number: int
    path: str
    opened_at: float
    closed_at: float | None = None
    close_code: int | None = None
    closed_by: str | None = None
    """``"client"`` or ``"server"``."""
    resumed: bool = False
    identified: bool = False


@dataclass
class DiscordMessage:
    """A message the bot sent, as the channel shows it now."""

    id: str
    channel_id: str
    content: str
    sent_at: float
    history: list[str] = field(default_factory=list)
    """Every content the message has had, the sent one first."""
    edited_at: list[float] = field(default_factory=list)
    deleted: bool = False
    allowed_mentions: Any = None
    """As sent (unchecked): normally ``api.AllowedMentions``."""
    components: list[api.ActionRow] = field(default_factory=list)
    """The action rows shown under it now, as sent."""

    def buttons(self) -> list[str]:
        """The labels of its buttons, row by row."""
        return [b.get("label", "") for row in self.components for b in row["components"]]

    @property
    def edits(self) -> int:
        return len(self.edited_at)


@dataclass
class Interaction:
    """A press the fake dispatched, and how the bot answered it."""

    id: str
    token: str
    channel_id: str
    message_id: str
    user_id: str
    custom_id: str
    created_at: float
    response: api.InteractionCallback | None = None
    """The callback's body, once acknowledged."""


@dataclass
class _Injected429:
    method: str
    route: re.Pattern[str]
    retry_after: float
    is_global: bool
    times: int


@dataclass
class _Close:
    code: int


class _Drop:
    pass


_Outgoing = str | _Close | _Drop


@dataclass
class _Live:
    """One open gateway socket, seen from the server."""

    record: GatewayConnection
    send: trio.MemorySendChannel[_Outgoing]
    receive: trio.MemoryReceiveChannel[_Outgoing]
    ready: bool = False
    open: bool = True


class _ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: int,
        message: str,
        headers: list[tuple[str, str]] | None = None,
        *,
        errors: api.ErrorDetails | None = None,
        retry_after: float | None = None,
        is_global: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body: api.ErrorBody = {"message": message, "code": code}
        if errors is not None:
            self.body["errors"] = errors
        if retry_after is not None:
            self.body["retry_after"] = retry_after
        if is_global is not None:
            self.body["global"] = is_global
        self.headers = headers or []


_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("GET", re.compile(r"/users/@me"), "_me"),
    ("GET", re.compile(r"/gateway/bot"), "_gateway_bot"),
    ("POST", re.compile(r"/channels/(?P<channel>\d+)/messages"), "_create"),
    ("PATCH", re.compile(r"/channels/(?P<channel>\d+)/messages/(?P<message>\d+)"), "_edit"),
    ("DELETE", re.compile(r"/channels/(?P<channel>\d+)/messages/(?P<message>\d+)"), "_delete"),
    ("POST", re.compile(r"/channels/(?P<channel>\d+)/typing"), "_typing"),
    (
        "POST",
        re.compile(r"/interactions/(?P<interaction>\d+)/(?P<token>[A-Za-z0-9_.-]+)/callback"),
        "_interaction_callback",
    ),
]
_NO_TOKEN_ROUTES = frozenset({"_interaction_callback"})
"""Interaction callbacks are authorised by the interaction's token."""


class FakeDiscord:
    def __init__(
        self,
        token: str,
        *,
        heartbeat_interval: float = 41.25,
        bucket_limit: int | None = None,
        bucket_window: float = 5.0,
        bot_id: str = "900000000000000001",
        bot_username: str = "hermes_test_bot",
    ) -> None:
        self.token = token
        self.heartbeat_interval = heartbeat_interval
        """Seconds, sent in HELLO (in milliseconds, as Discord does)."""
        self.bucket_limit = bucket_limit
        self.bucket_window = bucket_window
        self.bot_user: api.User = {
            "id": bot_id,
            "username": bot_username,
            "global_name": "Hermes",
            "bot": True,
            "discriminator": "0",
        }
        self.base_url = ""
        self.gateway_url = "ws://gateway.test"
        self.files_url = ""
        self.online = True
        self.ack_heartbeats = True
        self.message_content_allowed = True
        self.replay_from: int | None = None
        """The next RESUME replays from here instead of from the client's
        sequence (then this resets to None)."""
        self.messages: dict[str, list[DiscordMessage]] = defaultdict(list)
        self.calls: list[DiscordCall] = []
        self.gateway_ops: list[GatewayOp] = []
        self.connections: list[GatewayConnection] = []
        self.typing: list[tuple[str, float]] = []
        self.pushed: list[api.MessageCreate] = []
        self.session_id: str | None = None
        self.events: list[tuple[int, str, Any]] = []
        """The current session's dispatches: (seq, name, data)."""
        self._files: dict[str, tuple[bytes, str]] = {}
        self._live: _Live | None = None
        self._next_id = 1_100_000_000_000_000_000
        self._sessions = 0
        self._buckets: dict[tuple[str, str], deque[float]] = defaultdict(deque)
        self._injected: list[_Injected429] = []
        self._global_until = 0.0
        self._changed = trio.Event()
        self.interactions: dict[str, Interaction] = {}
        self.interaction_window = 3.0
        """Seconds a bot has to acknowledge an interaction."""

    # -- test helpers ------------------------------------------------------

    @property
    def ready(self) -> bool:
        """A client holds a live session (READY or RESUMED sent)."""
        return self._live is not None and self._live.ready

    def push_message(
        self,
        channel_id: str | int,
        user_id: str | int,
        content: str,
        *,
        guild_id: str | int | None = None,
        mention: bool = False,
        legacy_mention: bool = False,
        bot_author: bool = False,
        user_name: str = "tester",
        attachments: Sequence[tuple[str, str | None, bytes]] = (),
        message_type: int = 0,
    ) -> api.MessageCreate:
        """Dispatch a MESSAGE_CREATE from a user; returns its data.

        No ``guild_id``: a direct message. ``mention`` puts ``<@bot>`` in
        front of the content and the bot in ``mentions`` (``legacy_mention``:
        the ``<@!bot>`` form). ``attachments``: (filename, content type,
        bytes), each served at the attachment's ``url``.
        """
        message_id = self._new_id()
        bot_id = self.bot_user["id"]
        mentions: list[api.User] = []
        if mention or legacy_mention:
            content = f"<@{'!' if legacy_mention else ''}{bot_id}> {content}"
            mentions.append(self.bot_user.copy())
        files: list[api.Attachment] = []
        for filename, content_type, blob in attachments:
            file_id = self._new_id()
            self._files[file_id] = (blob, content_type or "application/octet-stream")
            item: api.Attachment = {
                "id": file_id,
                "filename": filename,
                "size": len(blob),
                "url": f"{self.files_url}/attachments/{channel_id}/{file_id}/{filename}",
                "proxy_url": f"{self.files_url}/attachments/{channel_id}/{file_id}/{filename}",
            }
            if content_type is not None:
                item["content_type"] = content_type
            files.append(item)
        author: api.User = {
            "id": str(user_id),
            "username": user_name,
            "global_name": user_name.title(),
            "discriminator": "0",
        }
        if bot_author:
            author["bot"] = True
        data: api.MessageCreate = {
            "id": message_id,
            "type": message_type,
            "channel_id": str(channel_id),
            "author": author,
            "content": content,
            "timestamp": _iso(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": mentions,
            "mention_roles": [],
            "attachments": files,
            "embeds": [],
            "pinned": False,
            "components": [],
        }
        if guild_id is not None:
            data["guild_id"] = str(guild_id)
        self.pushed.append(data)
        self.dispatch("MESSAGE_CREATE", data)
        return data

    def press_button(
        self,
        channel_id: str | int,
        message_id: str,
        user_id: str | int,
        label: str,
        *,
        guild_id: str | int | None = None,
        user_name: str = "tester",
    ) -> Interaction:
        """Dispatch the INTERACTION_CREATE a user's press on the button
        labelled ``label`` under the bot's message makes. The button must
        be shown now (AssertionError otherwise)."""
        message = self._find(str(channel_id), str(message_id))
        button = next(
            (b for row in message.components for b in row["components"] if b.get("label") == label),
            None,
        )
        assert button is not None, f"no button {label!r} under message {message_id}"
        interaction = Interaction(
            self._new_id(),
            f"itoken-{self._new_id()}",
            str(channel_id),
            message.id,
            str(user_id),
            button["custom_id"],
            trio.current_time(),
        )
        self.interactions[interaction.id] = interaction
        user: api.User = {
            "id": str(user_id),
            "username": user_name,
            "global_name": user_name.title(),
            "discriminator": "0",
        }
        data: api.Interaction = {
            "id": interaction.id,
            "application_id": self.bot_user["id"],
            "type": 3,
            "data": {"custom_id": button["custom_id"], "component_type": 2},
            "channel_id": str(channel_id),
            "token": interaction.token,
            "version": 1,
            "message": self._message_object(message),
            "locale": "en-US",
        }
        if guild_id is not None:
            data["guild_id"] = str(guild_id)
            data["member"] = {"user": user, "roles": [], "permissions": "0"}
        else:
            data["user"] = user
        self.dispatch("INTERACTION_CREATE", data)
        return interaction

    def dispatch(self, name: str, data: Any) -> int | None:
        """Dispatch any event in the current session (sent at once when a
        client is connected, replayed on RESUME otherwise); returns its seq,
        or None when there is no session to dispatch in."""
        if self.session_id is None:
            return None
        seq = len(self.events) + 1
        self.events.append((seq, name, data))
        live = self._live
        if live is not None and live.ready:
            self._send(live, {"op": 0, "t": name, "s": seq, "d": data})
        self._notify()
        return seq

    def reconnect(self) -> None:
        """Send op 7 RECONNECT."""
        self._send_live({"op": 7, "d": None})

    def invalidate_session(self, resumable: bool) -> None:
        """Send op 9 INVALID_SESSION; not resumable also ends the session."""
        if not resumable:
            self.session_id = None
            self.events = []
        self._send_live({"op": 9, "d": resumable})

    def drop_connection(self) -> None:
        """Cut the TCP connection without a close frame."""
        if self._live is not None:
            self._live.send.send_nowait(_Drop())

    def close_connection(self, code: int) -> None:
        """Close the socket with a close frame carrying ``code``."""
        if self._live is not None:
            self._live.send.send_nowait(_Close(code))

    def rate_limit_next(
        self,
        method: str,
        route: str = r".*",
        *,
        retry_after: float = 1.0,
        is_global: bool = False,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` on a path matching
        ``route`` (a regex, e.g. ``r"/channels/\\d+/messages/\\d+"``) with 429."""
        self._injected.append(
            _Injected429(method.upper(), re.compile(route), retry_after, is_global, times)
        )

    def ops(self, op: int) -> list[GatewayOp]:
        return [o for o in self.gateway_ops if o.op == op]

    def calls_to(self, method: str, path: str = r".*") -> list[DiscordCall]:
        pattern = re.compile(path)
        return [c for c in self.calls if c.method == method.upper() and pattern.fullmatch(c.path)]

    def visible(self, channel_id: str | int) -> list[DiscordMessage]:
        return [m for m in self.messages.get(str(channel_id), []) if not m.deleted]

    def texts(self, channel_id: str | int) -> list[str]:
        return [m.content for m in self.visible(channel_id)]

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds; re-checked after every call,
        gateway op and push. Put a ``trio.fail_after`` around it."""
        while not predicate():
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _new_id(self) -> str:
        self._next_id += 1
        return str(self._next_id)

    # -- gateway -----------------------------------------------------------

    def _open(self, path: str) -> _Live:
        if self._live is not None:
            # One bot, one connection: a new one replaces the old (Discord
            # would keep both; no test needs that).
            self._closed(self._live, 1000, "server")
        record = GatewayConnection(len(self.connections) + 1, path, trio.current_time())
        self.connections.append(record)
        send, receive = trio.open_memory_channel[_Outgoing](math.inf)
        live = _Live(record, send, receive)
        self._live = live
        self._send(live, {"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval * 1000}})
        self._notify()
        return live

    def _closed(self, live: _Live, code: int | None, by: str) -> None:
        if not live.open:
            return
        live.open = False
        live.ready = False
        live.record.closed_at = trio.current_time()
        live.record.close_code = code
        live.record.closed_by = by
        if self._live is live:
            self._live = None
        self._notify()

    def _send(self, live: _Live, payload: api.GatewayPayload) -> None:
        if live.open:
            live.send.send_nowait(json.dumps(payload))

    def _send_live(self, payload: api.GatewayPayload) -> None:
        if self._live is not None:
            self._send(self._live, payload)

    def _frame(self, live: _Live, text: str | bytes) -> None:
        """Everything the server does on one frame from the client."""
        try:
            payload = json.loads(text)
        except ValueError:
            live.send.send_nowait(_Close(4002))  # decode error
            return
        op, data = payload.get("op"), payload.get("d")
        self.gateway_ops.append(GatewayOp(op, data, trio.current_time(), live.record.number))
        self._notify()
        if op == 1:
            if self.ack_heartbeats:
                self._send(live, {"op": 11})
        elif op == 2:
            self._identify(live, data)
        elif op == 6:
            self._resume(live, data)
        elif op not in (3, 4, 8, 31):
            live.send.send_nowait(_Close(4001))  # unknown opcode

    def _identify(self, live: _Live, data: Any) -> None:
        if live.record.identified:
            live.send.send_nowait(_Close(4005))  # already authenticated
            return
        if not isinstance(data, dict) or data.get("token") != self.token:
            live.send.send_nowait(_Close(4004))
            return
        intents = data.get("intents")
        if not isinstance(intents, int):
            live.send.send_nowait(_Close(4013))
            return
        if intents & MESSAGE_CONTENT and not self.message_content_allowed:
            live.send.send_nowait(_Close(4014))
            return
        live.record.identified = True
        self._sessions += 1
        self.session_id = f"fake-session-{self._sessions}"
        self.events = []
        live.ready = True
        ready: api.Ready = {
            "v": 10,
            "user": self.bot_user.copy(),
            "guilds": [],
            "session_id": self.session_id,
            "resume_gateway_url": self.gateway_url + "/resume",
            "application": {"id": self.bot_user["id"], "flags": 0},
        }
        self.dispatch("READY", ready)

    def _resume(self, live: _Live, data: Any) -> None:
        if not isinstance(data, dict) or data.get("token") != self.token:
            live.send.send_nowait(_Close(4004))
            return
        seq = data.get("seq")
        if data.get("session_id") != self.session_id or not isinstance(seq, int):
            self._send(live, {"op": 9, "d": False})
            return
        live.record.identified = live.record.resumed = True
        start = seq if self.replay_from is None else min(seq, self.replay_from)
        self.replay_from = None
        for event_seq, name, event in self.events:
            if event_seq > start:
                self._send(live, {"op": 0, "t": name, "s": event_seq, "d": event})
        live.ready = True
        self.dispatch("RESUMED", None)

    # -- gateway over a socket ----------------------------------------------

    async def serve_gateway(self, stream: trio.SocketStream) -> None:
        async with stream, trio.open_nursery() as nursery:
            try:
                await self._serve_socket(stream, nursery)
            except (trio_websocket.ConnectionClosed, trio.BrokenResourceError):
                pass
            finally:
                nursery.cancel_scope.cancel()

    async def _serve_socket(self, stream: trio.SocketStream, nursery: trio.Nursery) -> None:
        request = await trio_websocket.wrap_server_stream(nursery, stream)
        socket = await request.accept()
        if not self.online:
            with trio.move_on_after(2):
                await socket.aclose(1001)
            return
        live = self._open(_path(request.path))
        nursery.start_soon(self._write, live, socket, stream, nursery.cancel_scope)
        try:
            while live.open:
                self._frame(live, await socket.get_message())
        except trio_websocket.ConnectionClosed as exc:
            code = exc.reason.code if exc.reason is not None else None
            self._closed(live, None if code == 1006 else code, "client")
        finally:
            self._closed(live, None, "client")

    async def _write(
        self,
        live: _Live,
        socket: trio_websocket.WebSocketConnection,
        stream: trio.SocketStream,
        scope: trio.CancelScope,
    ) -> None:
        try:
            async for item in live.receive:
                if isinstance(item, str):
                    await socket.send_message(item)
                    continue
                if isinstance(item, _Close):
                    self._closed(live, item.code, "server")
                    with trio.move_on_after(2):
                        await socket.aclose(item.code)
                else:
                    self._closed(live, None, "server")
                    await stream.aclose()
                break
        except (trio_websocket.ConnectionClosed, trio.BrokenResourceError):
            pass
        scope.cancel()

    # -- gateway in memory ---------------------------------------------------

    @asynccontextmanager
    async def connect(self, url: str) -> AsyncIterator[_MemorySocket]:
        """A gateway socket without a network, for ``DiscordAdapter(connect=...)``."""
        await trio.lowlevel.checkpoint()
        if not self.online:
            yield _MemorySocket(self, None)
            return
        live = self._open(_path(url))
        socket = _MemorySocket(self, live)
        try:
            yield socket
        finally:
            self._closed(live, 1000, "client")

    # -- REST ----------------------------------------------------------------

    async def handle(self, request: FakeRequest) -> FakeResponse:
        path = request.path
        if path.startswith("/attachments/"):
            return self._file(path)
        if not path.startswith(API_PREFIX):
            return FakeResponse.json({"message": "404: Not Found", "code": 0}, 404)
        path = path[len(API_PREFIX) :]
        body = request.json_or_none()
        call = DiscordCall(request.method, path, body, trio.current_time())
        self.calls.append(call)
        headers: list[tuple[str, str]] = []
        try:
            for method, pattern, name in _ROUTES:
                match = pattern.fullmatch(path)
                if match and method == request.method:
                    if name not in _NO_TOKEN_ROUTES and (
                        request.headers.get("authorization") != f"Bot {self.token}"
                    ):
                        raise _ApiError(401, 0, "401: Unauthorized")
                    headers = self._rate_limit(request.method, pattern.pattern, match, path)
                    status, result = await getattr(self, name)(body, **match.groupdict())
                    break
            else:
                raise _ApiError(404, 0, "404: Not Found")
        except _ApiError as exc:
            status, result = exc.status, exc.body
            headers = exc.headers
        call.status, call.response = status, result
        self._notify()
        if status == 204:
            return FakeResponse(204, b"", headers)
        return FakeResponse.json(result, status, headers)

    def _rate_limit(
        self, method: str, route: str, match: re.Match[str], path: str
    ) -> list[tuple[str, str]]:
        now = trio.current_time()
        major = match.groupdict().get("channel", "")
        bucket = f"{method}:{route}"
        for injected in self._injected:
            if injected.method == method and injected.route.fullmatch(path):
                injected.times -= 1
                if injected.times <= 0:
                    self._injected.remove(injected)
                if injected.is_global:
                    self._global_until = now + injected.retry_after
                raise self._too_many(injected.retry_after, injected.is_global, bucket)
        if now < self._global_until:
            raise self._too_many(self._global_until - now, True, bucket)
        if self.bucket_limit is None:
            return []
        times = self._buckets[(bucket, major)]
        while times and times[0] <= now - self.bucket_window:
            times.popleft()
        if len(times) >= self.bucket_limit:
            raise self._too_many(times[0] + self.bucket_window - now, False, bucket)
        times.append(now)
        reset_after = times[0] + self.bucket_window - now
        return _bucket_headers(
            bucket, self.bucket_limit, self.bucket_limit - len(times), reset_after
        )

    def _too_many(self, retry_after: float, is_global: bool, bucket: str) -> _ApiError:
        headers = [("retry-after", str(math.ceil(retry_after)))]
        if is_global:
            headers += [("x-ratelimit-global", "true"), ("x-ratelimit-scope", "global")]
        else:
            headers += _bucket_headers(bucket, self.bucket_limit or 1, 0, retry_after)
            headers.append(("x-ratelimit-scope", "user"))
        return _ApiError(
            429,
            0,
            "You are being rate limited.",
            headers,
            retry_after=round(retry_after, 3),
            is_global=is_global,
        )

    def _file(self, path: str) -> FakeResponse:
        parts = path.strip("/").split("/")
        found = self._files.get(parts[2]) if len(parts) == 4 else None
        if found is None:
            return FakeResponse.text("Not Found", 404)
        data, content_type = found
        return FakeResponse(200, data, [("content-type", content_type)])

    # -- routes --------------------------------------------------------------

    async def _me(self, body: Any) -> tuple[int, Any]:
        return 200, self.bot_user.copy()

    async def _gateway_bot(self, body: Any) -> tuple[int, Any]:
        limit: api.SessionStartLimit = {
            "total": 1000,
            "remaining": 999,
            "reset_after": 0,
            "max_concurrency": 1,
        }
        answer: api.GatewayBot = {
            "url": self.gateway_url,
            "shards": 1,
            "session_start_limit": limit,
        }
        return 200, answer

    def _content(self, body: Any) -> str:
        content = body.get("content") if isinstance(body, dict) else None
        if not isinstance(content, str) or not content:
            raise _ApiError(400, 50006, "Cannot send an empty message")
        if measure(content, "chars") > MAX_LENGTH:
            errors: api.ErrorDetails = {
                "content": {
                    "_errors": [
                        {
                            "code": "BASE_TYPE_MAX_LENGTH",
                            "message": f"Must be {MAX_LENGTH} or fewer in length.",
                        }
                    ]
                }
            }
            raise _ApiError(400, 50035, "Invalid Form Body", errors=errors)
        return content

    def _find(self, channel: str, message: str) -> DiscordMessage:
        for found in self.messages.get(channel, []):
            if found.id == message and not found.deleted:
                return found
        raise _ApiError(404, 10008, "Unknown Message")

    def _components(self, body: Any) -> list[api.ActionRow]:
        rows = body.get("components", []) if isinstance(body, dict) else []
        problems: list[str] = []
        custom_ids: set[str] = set()
        if not isinstance(rows, list) or len(rows) > 5:
            problems.append("components: at most 5 action rows")
            rows = []
        for r, row in enumerate(rows):
            buttons = row.get("components") if isinstance(row, dict) else None
            if row.get("type") != 1 or not isinstance(buttons, list) or not 1 <= len(buttons) <= 5:
                problems.append(f"components.{r}: an action row of 1 to 5 components")
                continue
            for b, button in enumerate(buttons):
                where = f"components.{r}.components.{b}"
                if not isinstance(button, dict) or button.get("type") != 2:
                    problems.append(f"{where}.type: only buttons are handled here")
                    continue
                style = button.get("style")
                if style not in (1, 2, 3, 4, 5):
                    problems.append(f"{where}.style: Value must be one of (1, 2, 3, 4, 5, 6).")
                label = button.get("label", "")
                if not isinstance(label, str) or len(label) > 80:
                    problems.append(f"{where}.label: Must be 80 or fewer in length.")
                custom_id = button.get("custom_id")
                if style == 5:
                    if custom_id is not None or not button.get("url"):
                        problems.append(f"{where}: a link button has a url and no custom_id")
                elif not isinstance(custom_id, str) or not 1 <= len(custom_id) <= 100:
                    problems.append(f"{where}.custom_id: Must be between 1 and 100 in length.")
                elif custom_id in custom_ids:
                    problems.append(f"{where}.custom_id: Component custom id cannot be duplicated")
                else:
                    custom_ids.add(custom_id)
        if problems:
            errors: api.ErrorDetails = {
                "components": {"_errors": [{"code": "INVALID", "message": p} for p in problems]}
            }
            raise _ApiError(400, 50035, "Invalid Form Body", errors=errors)
        # Checked above: action rows of buttons.
        return [cast(api.ActionRow, dict(row)) for row in rows]

    async def _interaction_callback(
        self, body: Any, interaction: str, token: str
    ) -> tuple[int, Any]:
        found = self.interactions.get(interaction)
        late = found is not None and (
            trio.current_time() - found.created_at > self.interaction_window
        )
        if found is None or found.token != token or late:
            raise _ApiError(404, 10062, "Unknown interaction")
        if found.response is not None:
            raise _ApiError(400, 40060, "Interaction has already been acknowledged.")
        kind = body.get("type") if isinstance(body, dict) else None
        if kind not in (4, 5, 6, 7):
            raise _ApiError(400, 50035, "Invalid Form Body")
        data = body.get("data") or {}
        if kind == 4:
            content = data.get("content") if isinstance(data, dict) else None
            if not isinstance(content, str) or not content:
                raise _ApiError(400, 50006, "Cannot send an empty message")
        if kind == 7:
            message = self._find(found.channel_id, found.message_id)
            if "content" in data:
                await self._edit(data, found.channel_id, found.message_id)
            if "components" in data:
                message.components = self._components(data)
        # Checked above: a callback of a type the fake takes.
        found.response = cast(api.InteractionCallback, dict(body))
        return 204, None

    async def _create(self, body: Any, channel: str) -> tuple[int, Any]:
        content = self._content(body)
        components = self._components(body)
        message = DiscordMessage(
            self._new_id(),
            channel,
            content,
            trio.current_time(),
            [content],
            allowed_mentions=body.get("allowed_mentions"),
            components=components,
        )
        self.messages[channel].append(message)
        return 200, self._message_object(message)

    async def _edit(self, body: Any, channel: str, message: str) -> tuple[int, Any]:
        found = self._find(channel, message)
        content = self._content(body)
        if isinstance(body, dict) and "components" in body:
            found.components = self._components(body)
        if content != found.content:
            found.content = content
            found.history.append(content)
            found.edited_at.append(trio.current_time())
        return 200, self._message_object(found)

    async def _delete(self, body: Any, channel: str, message: str) -> tuple[int, Any]:
        self._find(channel, message).deleted = True
        return 204, None

    async def _typing(self, body: Any, channel: str) -> tuple[int, Any]:
        self.typing.append((channel, trio.current_time()))
        return 204, None

    def _message_object(self, message: DiscordMessage) -> api.Message:
        return {
            "id": message.id,
            "type": 0,
            "channel_id": message.channel_id,
            "author": self.bot_user.copy(),
            "content": message.content,
            "timestamp": _iso(message.sent_at),
            "edited_timestamp": _iso(message.edited_at[-1]) if message.edited_at else None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "components": [row.copy() for row in message.components],
        }


class _MemorySocket:
    """The client's end of an in-memory gateway socket (trio-websocket's
    interface: ``ConnectionClosed`` once closed)."""

    def __init__(self, fake: FakeDiscord, live: _Live | None) -> None:
        self._fake = fake
        self._live = live
        # No connection behind it: the gateway is "offline" and going away.
        self._reason = trio_websocket.CloseReason(1001, None) if live is None else None

    def _gone(self) -> trio_websocket.ConnectionClosed:
        return trio_websocket.ConnectionClosed(self._reason)

    async def get_message(self) -> str | bytes:
        await trio.lowlevel.checkpoint()
        if self._reason is not None or self._live is None:
            raise self._gone()
        item = await self._live.receive.receive()
        if isinstance(item, str):
            return item
        code = item.code if isinstance(item, _Close) else 1006
        self._fake._closed(self._live, None if code == 1006 else code, "server")
        self._reason = trio_websocket.CloseReason(code, None)
        raise self._gone()

    async def send_message(self, message: str | bytes) -> None:
        await trio.lowlevel.checkpoint()
        if self._reason is not None or self._live is None or not self._live.open:
            self._reason = self._reason or trio_websocket.CloseReason(1006, None)
            raise self._gone()
        self._fake._frame(self._live, message)

    async def aclose(self, code: int = 1000, reason: str | None = None) -> None:
        await trio.lowlevel.checkpoint()
        if self._reason is None and self._live is not None:
            self._reason = trio_websocket.CloseReason(1000, reason)
            self._fake._closed(self._live, code, "client")


def _bucket_headers(
    bucket: str, limit: int, remaining: int, reset_after: float
) -> list[tuple[str, str]]:
    return [
        ("x-ratelimit-bucket", f"{abs(hash(bucket)):x}"),
        ("x-ratelimit-limit", str(limit)),
        ("x-ratelimit-remaining", str(max(0, remaining))),
        ("x-ratelimit-reset-after", f"{max(0.0, reset_after):.3f}"),
    ]


def _iso(seconds: float | None = None) -> str:
    """A Discord timestamp; without ``seconds``, now by the wall clock, as
    Discord stamps a user's message (a reader may compare it with its own)."""
    when = datetime.now(UTC) if seconds is None else datetime.fromtimestamp(seconds, UTC)
    return when.isoformat()


def _path(url: str) -> str:
    """The path of a gateway URL, without query or trailing slash."""
    path = urllib.parse.urlsplit(url).path.rstrip("/")
    return path or "/"


@asynccontextmanager
async def open_fake_discord(
    token: str = "FAKE.discord-bot-token.for-tests",
    *,
    heartbeat_interval: float = 41.25,
    bucket_limit: int | None = None,
    bucket_window: float = 5.0,
    host: str = "127.0.0.1",
) -> AsyncIterator[FakeDiscord]:
    """Run a fake Discord: REST at ``fake.base_url`` (the ``api_base_url``
    to use) and the gateway at ``fake.gateway_url``."""
    fake = FakeDiscord(
        token,
        heartbeat_interval=heartbeat_interval,
        bucket_limit=bucket_limit,
        bucket_window=bucket_window,
    )
    async with server_nursery() as nursery:
        serve = partial(trio.serve_tcp, fake.serve_gateway, 0, host=host)
        listeners = await nursery.start(serve)
        port = listeners[0].socket.getsockname()[1]
        fake.gateway_url = f"ws://{host}:{port}"
        async with serve_http(fake.handle, host=host) as base_url:
            fake.files_url = base_url
            fake.base_url = base_url + API_PREFIX
            yield fake
