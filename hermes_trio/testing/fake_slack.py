"""A fake Slack on loopback: the Web API the adapter calls, and a Socket Mode
websocket that delivers events the way Slack does.

    async with open_fake_slack() as slack:
        config = SlackConfig(bot_token=slack.bot_token, app_token=slack.app_token,
                             api_base_url=slack.base_url)
        slack.push_message("D1", "U7", "hi")          # a direct message
        slack.push_mention("C1", "U7", "what's up?")  # arrives as message + app_mention
        ...
        assert slack.texts("D1") == ["Hello!"]

What it enforces: the bot token (``xoxb``) on the Web API and the app token
(``xapp``) on ``apps.connections.open`` (else ``invalid_auth``); message
text present and at most 40,000 characters; ``chat.update`` of a message
that exists and is not streaming; the streaming methods on a thread, with a
recipient in channels, ``appendStream`` only on an open stream (or
``unknown_method`` for all of them with ``streams=False``). Files are
served at their ``url_private`` to the bot token only.

Faults: ``fail_next(method, error=..., status=429, retry_after=...)``,
``answer_late(method, delay)`` (done, but answered too late),
``disconnect()`` (a ``disconnect`` envelope), ``drop()`` (the socket cut
without a close frame), ``stall()`` (the connection goes silent: nothing
is read or answered, not even pings, as when a network path dies without a
FIN), ``redeliver()`` (an envelope again, with ``retry_attempt`` + 1), and,
with ``redeliver_after``, Slack's own redelivery of an envelope not
acknowledged in time. With ``stream_expiry``, a stream nobody appended to
for that long is over, as Slack ends idle streams (``appendStream`` and
``stopStream`` then answer ``message_not_in_streaming_state``). Envelopes
pushed while no connection is open wait for the next one.

Block Kit: ``blocks`` on ``chat.postMessage``/``chat.update`` must be at
most 50 known blocks; a ``section``'s text object 1–3000 characters; an
``actions`` block 1–25 elements, each ``button`` with ``plain_text`` text of
at most 75 characters, an ``action_id`` of at most 255 unique in the
block, a ``value`` of at most 2000 and a ``style`` of ``primary`` or
``danger`` (else ``invalid_blocks``). ``chat.update`` without ``blocks``
keeps the old ones, ``[]`` takes them away, as on Slack.
``press_button`` delivers the ``interactive`` envelope (``block_actions``)
a user's press makes; ``chat.postEphemeral`` (``channel``, ``user``,
``text``) is recorded in ``ephemeral``.

Records, each with ``trio.current_time()``: ``calls``, ``acks``, and the
bot's messages with their edit history (``messages[channel]``).
"""

from __future__ import annotations

import itertools
import json
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, cast

import trio
import trio_websocket

from ..platforms.slack.api_types import (
    AppendStreamParams,
    AppMentionEvent,
    AuthTestResponse,
    Block,
    ChannelType,
    ConnectionsOpenResponse,
    DeleteParams,
    DeleteResponse,
    DisconnectEnvelope,
    EventsApiEnvelope,
    File,
    HelloEnvelope,
    InteractiveEnvelope,
    Message,
    MessageEvent,
    MessageRef,
    NoParams,
    PostEphemeralParams,
    PostEphemeralResponse,
    PostMessageParams,
    PostMessageResponse,
    SocketModeEnvelope,
    SocketModeMessage,
    StartStreamParams,
    StartStreamResponse,
    StopStreamParams,
    StreamResponse,
    UpdateParams,
    UpdateResponse,
)
from .fake_http import FakeRequest, FakeResponse, serve_http, server_nursery

__all__ = ["FakeSlack", "SlackCall", "SlackMessage", "open_fake_slack"]

MAX_TEXT = 40_000
_NO_STREAM_METHODS = ("chat.startstream", "chat.appendstream", "chat.stopstream")


@dataclass
class SlackCall:
    method: str
    params: dict[str, Any]
    """The JSON body as it came, before any check."""
    time: float
    ok: bool = True
    error: str | None = None


@dataclass
class SlackMessage:
    """A message the bot sent, as the channel shows it now."""

    ts: str
    channel: str
    thread_ts: str | None
    text: str
    sent_at: float
    history: list[str] = field(default_factory=list)
    edited_at: list[float] = field(default_factory=list)
    deleted: bool = False
    streaming: bool = False
    streamed: bool = False
    """Started with ``chat.startStream``."""
    blocks: list[Block] = field(default_factory=list)
    """The Block Kit blocks shown now, as sent."""

    def buttons(self) -> list[str]:
        """The labels of its buttons, block by block."""
        return [
            element["text"]["text"]
            for block in self.blocks
            if block["type"] == "actions"
            for element in block["elements"]
            if element.get("type") == "button"
        ]


@dataclass
class _Failure:
    error: str
    status: int
    retry_after: float | None
    times: int
    needed: str | None = None


class FakeSlack:
    def __init__(
        self,
        *,
        bot_token: str = "xoxb-fake-bot-token",
        app_token: str = "xapp-fake-app-token",
        bot_user: str = "UBOT",
        team: str = "T0FAKE",
        streams: bool = True,
        redeliver_after: float | None = None,
        stream_expiry: float | None = None,
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.bot_user = bot_user
        self.team = team
        self.streams = streams
        self.redeliver_after = redeliver_after
        self.stream_expiry = stream_expiry
        self.base_url = ""
        self.socket_url = ""
        self.online = True
        """False: ``apps.connections.open`` answers 503 (Slack is down)."""
        self.calls: list[SlackCall] = []
        self.acks: list[tuple[str, float]] = []
        self.messages: dict[str, list[SlackMessage]] = defaultdict(list)
        self.connections = 0
        self.envelopes: list[SocketModeEnvelope] = []
        """Every envelope pushed, in order."""
        self.files: dict[str, bytes] = {}
        self.downloads: list[str] = []
        self._ts = itertools.count(1)
        self._pending: list[SocketModeEnvelope] = []
        self._sockets: list[trio.MemorySendChannel[SocketModeMessage | None]] = []
        self._streams: dict[trio.MemorySendChannel[SocketModeMessage | None], _Stallable] = {}
        self._failures: dict[str, list[_Failure]] = defaultdict(list)
        self._slow: dict[str, list[float]] = defaultdict(list)
        self._changed = trio.Event()
        self._nursery: trio.Nursery | None = None
        self.ephemeral: list[tuple[str, str, str]] = []
        """``(channel, user, text)`` of every ``chat.postEphemeral``."""

    # -- test helpers ---------------------------------------------------------

    def new_ts(self) -> str:
        """A message timestamp as Slack makes them: Unix seconds, unique.

        The wall clock on purpose: it is data the gateway compares with its
        own wall clock (how long a message waited), not timing logic."""
        return f"{int(time.time())}.{next(self._ts):06d}"

    def add_file(self, name: str, mimetype: str, data: bytes) -> File:
        file_id = f"F{len(self.files) + 1:04d}"
        self.files[file_id] = data
        return {
            "id": file_id,
            "name": name,
            "mimetype": mimetype,
            "size": len(data),
            "url_private": f"{self.base_url.removesuffix('/api/')}/files/{file_id}/{name}",
        }

    def push_message(
        self,
        channel: str,
        user: str,
        text: str,
        *,
        thread_ts: str | None = None,
        files: list[File] | None = None,
        ts: str | None = None,
        channel_type: ChannelType | None = None,
    ) -> EventsApiEnvelope:
        """A ``message`` event (a direct message when ``channel`` starts with D)."""
        event = self._event("message", channel, user, text, thread_ts, files, ts)
        event["channel_type"] = channel_type or ("im" if channel.startswith("D") else "channel")
        if files:
            event["subtype"] = "file_share"
        return self.push_event(event)

    def push_mention(
        self, channel: str, user: str, text: str, *, thread_ts: str | None = None
    ) -> EventsApiEnvelope:
        """A channel message that mentions the bot: Slack sends it as a
        ``message`` event and as an ``app_mention`` event, same ``ts``."""
        text = f"<@{self.bot_user}> {text}"
        message = self._event("message", channel, user, text, thread_ts, None, None)
        message["channel_type"] = "channel"
        self.push_event(message)
        mention = self._event("app_mention", channel, user, text, thread_ts, None, message["ts"])
        return self.push_event(mention)

    def push_event(self, event: MessageEvent | AppMentionEvent) -> EventsApiEnvelope:
        """Deliver ``event`` in an ``events_api`` envelope; returns the envelope."""
        number = len(self.envelopes) + 1
        envelope: EventsApiEnvelope = {
            "envelope_id": f"env-{number}",
            "type": "events_api",
            "accepts_response_payload": False,
            "retry_attempt": 0,
            "retry_reason": "",
            "payload": {
                "team_id": self.team,
                "api_app_id": "A0FAKE",
                "type": "event_callback",
                "event_id": f"Ev{number:06d}",
                "event_time": int(time.time()),
                "event": event,
            },
        }
        self.envelopes.append(envelope)
        self._deliver(envelope)
        return envelope

    def press_button(
        self, channel: str, ts: str, user: str, label: str, *, user_name: str = "tester"
    ) -> InteractiveEnvelope:
        """Deliver the ``block_actions`` envelope a press on the button
        labelled ``label`` under the bot's message ``ts`` makes; returns
        it. The button must be shown now (AssertionError otherwise)."""
        message = self._find({"channel": channel, "ts": ts})
        found = [
            (block, element)
            for block in message.blocks
            if block["type"] == "actions"
            for element in block["elements"]
            if element.get("type") == "button" and element["text"]["text"] == label
        ]
        assert found, f"no button {label!r} under message {ts}"
        block, element = found[0]
        number = len(self.envelopes) + 1
        shown: Message = {
            "type": "message",
            "user": self.bot_user,
            "ts": ts,
            "text": message.text,
            "blocks": message.blocks,
        }
        if message.thread_ts is not None:
            shown["thread_ts"] = message.thread_ts
        envelope: InteractiveEnvelope = {
            "envelope_id": f"env-{number}",
            "type": "interactive",
            "accepts_response_payload": False,
            "payload": {
                "type": "block_actions",
                "user": {
                    "id": user,
                    "username": user_name,
                    "name": user_name,
                    "team_id": self.team,
                },
                "api_app_id": "A0FAKE",
                "token": "verification-token",
                "container": {
                    "type": "message",
                    "message_ts": ts,
                    "channel_id": channel,
                    "is_ephemeral": False,
                },
                "trigger_id": f"trigger-{number}",
                "team": {"id": self.team, "domain": "fake"},
                "channel": {"id": channel, "name": channel.lower()},
                "message": shown,
                "response_url": f"{self.base_url}/actions/{number}",
                "actions": [
                    {
                        "action_id": element["action_id"],
                        "block_id": block.get("block_id", f"block-{number}"),
                        "text": element["text"],
                        "value": element.get("value", ""),
                        "style": element.get("style"),
                        "type": "button",
                        "action_ts": f"{time.time():.6f}",
                    }
                ],
            },
        }
        self.envelopes.append(envelope)
        self._deliver(envelope)
        return envelope

    def redeliver(self, envelope: SocketModeEnvelope | None = None) -> EventsApiEnvelope:
        """Send an envelope again (the last by default), as Slack does after a
        slow ack (Slack redelivers ``events_api`` envelopes only)."""
        original = _redeliverable(envelope or self.envelopes[-1])
        again: EventsApiEnvelope = {
            **original,
            "retry_attempt": original["retry_attempt"] + 1,
            "retry_reason": "timeout",
        }
        self._deliver(again)
        return again

    def disconnect(self, reason: str = "refresh_requested") -> None:
        message: DisconnectEnvelope = {"type": "disconnect", "reason": reason, "debug_info": {}}
        for socket in self._sockets:
            socket.send_nowait(message)

    def drop(self) -> None:
        """Cut every open socket without a close frame."""
        for socket in self._sockets:
            socket.send_nowait(None)

    def stall(self) -> None:
        """Every open connection goes silent for good; new ones work."""
        for socket in list(self._sockets):
            self._streams[socket].stalled = True
            self._sockets.remove(socket)
        self._notify()

    def fail_next(
        self,
        method: str,
        error: str = "ratelimited",
        *,
        status: int | None = None,
        retry_after: float | None = None,
        times: int = 1,
        needed: str | None = None,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with ``error``
        (a ``ratelimited`` error is HTTP 429 with ``Retry-After``;
        ``needed`` names the scope of a ``missing_scope``)."""
        if status is None:
            status = 429 if error == "ratelimited" else 200
        failure = _Failure(error, status, retry_after, times, needed)
        self._failures[method.lower()].append(failure)

    def answer_late(self, method: str, delay: float) -> None:
        """Do the next call of ``method``, but answer it ``delay`` seconds
        later (a client with a shorter timeout never learns it worked)."""
        self._slow[method.lower()].append(delay)

    def calls_to(self, method: str) -> list[SlackCall]:
        return [c for c in self.calls if c.method.lower() == method.lower()]

    def visible(self, channel: str, thread_ts: str | None = None) -> list[SlackMessage]:
        return [
            m
            for m in self.messages.get(channel, [])
            if not m.deleted and (thread_ts is None or m.thread_ts == thread_ts)
        ]

    def texts(self, channel: str, thread_ts: str | None = None) -> list[str]:
        return [m.text for m in self.visible(channel, thread_ts)]

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds; put a ``trio.fail_after`` around it."""
        while not predicate():
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _event(
        self,
        kind: Literal["message", "app_mention"],
        channel: str,
        user: str,
        text: str,
        thread_ts: str | None,
        files: list[File] | None,
        ts: str | None,
    ) -> MessageEvent | AppMentionEvent:
        event: MessageEvent = {
            "type": "message",
            "user": user,
            "text": text,
            "ts": ts or self.new_ts(),
            "channel": channel,
            "team": self.team,
            "event_ts": ts or self.new_ts(),
        }
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
        if files:
            event["files"] = files
        if kind == "app_mention":
            return {**event, "type": "app_mention"}
        return event

    def _deliver(self, envelope: SocketModeEnvelope) -> None:
        if not self._sockets:
            self._pending.append(envelope)
            return
        self._sockets[-1].send_nowait(envelope)
        if self.redeliver_after is not None and self._nursery is not None:
            self._nursery.start_soon(self._redeliver_unless_acked, envelope)
        self._notify()

    async def _redeliver_unless_acked(self, envelope: SocketModeEnvelope) -> None:
        assert self.redeliver_after is not None
        await trio.sleep(self.redeliver_after)
        attempt = _redeliverable(envelope)["retry_attempt"]
        if attempt < 3 and envelope["envelope_id"] not in dict(self.acks):
            self.redeliver(envelope)

    # -- Web API --------------------------------------------------------------

    async def handle(self, request: FakeRequest) -> FakeResponse:
        path = request.path.strip("/")
        token = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if path.startswith("files/"):
            return self._download(path.split("/")[1], token)
        if not path.startswith("api/"):
            return FakeResponse.text("not found", 404)
        method = path[len("api/") :]
        params = request.json_or_none() or {}
        if not isinstance(params, dict):
            params = {}
        call = SlackCall(method, params, trio.current_time())
        self.calls.append(call)
        try:
            response = self._answer(method, token, params)
        finally:
            self._notify()
        body = json.loads(response.body)
        call.ok, call.error = bool(body.get("ok")), body.get("error")
        if self._slow.get(method.lower()):
            await trio.sleep(self._slow[method.lower()].pop(0))
        return response

    def _answer(self, method: str, token: str, params: dict[str, Any]) -> FakeResponse:
        wanted = self.app_token if method == "apps.connections.open" else self.bot_token
        if not token:
            return _error("not_authed")
        if token != wanted:
            return _error("invalid_auth")
        queue = self._failures.get(method.lower())
        if queue:
            failure = queue[0]
            failure.times -= 1
            if failure.times <= 0:
                queue.pop(0)
            headers = []
            if failure.retry_after is not None:
                headers.append(("retry-after", f"{failure.retry_after:g}"))
            extra = {"needed": failure.needed} if failure.needed else {}
            return _error(failure.error, failure.status, headers, **extra)
        if not self.streams and method.lower() in _NO_STREAM_METHODS:
            return _error("unknown_method")
        handler = _METHODS.get(method.lower())
        if handler is None:
            return _error("unknown_method")
        try:
            return FakeResponse.json(handler(self, params))
        except _SlackError as exc:
            return _error(exc.error)

    def _download(self, file_id: str, token: str) -> FakeResponse:
        if token != self.bot_token:
            return FakeResponse.text("forbidden", 403)
        if file_id not in self.files:
            return FakeResponse.text("not found", 404)
        self.downloads.append(file_id)
        self._notify()
        return FakeResponse(
            200, self.files[file_id], [("content-type", "application/octet-stream")]
        )

    def _auth_test(self, params: NoParams) -> AuthTestResponse:
        return {
            "ok": True,
            "url": "https://fake.slack.test/",
            "team": "Fake",
            "user": "hermes",
            "team_id": self.team,
            "user_id": self.bot_user,
            "bot_id": "B0FAKE",
        }

    def _connections_open(self, params: NoParams) -> ConnectionsOpenResponse:
        if not self.online:
            raise _SlackError("service_unavailable")
        return {"ok": True, "url": f"{self.socket_url}/link/?ticket={len(self.calls)}"}

    def _post(self, params: PostMessageParams) -> PostMessageResponse:
        channel = _required(params, "channel")
        text = _text(params.get("text"))
        blocks = _blocks(params.get("blocks", []))
        message = SlackMessage(
            self.new_ts(), channel, params.get("thread_ts"), text, trio.current_time(), [text]
        )
        message.blocks = blocks
        self.messages[channel].append(message)
        return {
            "ok": True,
            "channel": channel,
            "ts": message.ts,
            "message": {"text": text, "ts": message.ts},
        }

    def _post_ephemeral(self, params: PostEphemeralParams) -> PostEphemeralResponse:
        channel = _required(params, "channel")
        user = params.get("user")
        if not isinstance(user, str) or not user:
            raise _SlackError("user_not_found")
        text = _text(params.get("text"))
        self.ephemeral.append((channel, user, text))
        return {"ok": True, "message_ts": self.new_ts()}

    def _find(self, params: MessageRef) -> SlackMessage:
        channel, ts = _required(params, "channel"), _required(params, "ts")
        for message in self.messages.get(channel, []):
            if message.ts == ts and not message.deleted:
                return message
        raise _SlackError("message_not_found")

    def _update(self, params: UpdateParams) -> UpdateResponse:
        message = self._find(params)
        if message.streaming:
            raise _SlackError("cant_update_message")
        text = _text(params.get("text"))
        if "blocks" in params:
            message.blocks = _blocks(params["blocks"])
        if text != message.text:
            message.text = text
            message.history.append(text)
            message.edited_at.append(trio.current_time())
        return {
            "ok": True,
            "channel": message.channel,
            "ts": message.ts,
            "text": text,
            "message": {"text": text, "ts": message.ts},
        }

    def _delete(self, params: DeleteParams) -> DeleteResponse:
        message = self._find(params)
        message.deleted = True
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _start_stream(self, params: StartStreamParams) -> StartStreamResponse:
        channel = _required(params, "channel")
        thread = _required(params, "thread_ts")
        if not channel.startswith("D") and not (
            params.get("recipient_user_id") and params.get("recipient_team_id")
        ):
            raise _SlackError("missing_recipient_user_id")
        text = params.get("markdown_text") or ""
        message = SlackMessage(
            self.new_ts(), channel, thread, text, trio.current_time(), [text] if text else []
        )
        message.streaming = message.streamed = True
        self.messages[channel].append(message)
        return {"ok": True, "channel": channel, "ts": message.ts}

    def _streaming(self, params: MessageRef) -> SlackMessage:
        """The open stream ``params`` names; one idle past ``stream_expiry`` is over."""
        message = self._find(params)
        last = message.edited_at[-1] if message.edited_at else message.sent_at
        if (
            message.streaming
            and self.stream_expiry is not None
            and trio.current_time() - last >= self.stream_expiry
        ):
            message.streaming = False
        if not message.streaming:
            raise _SlackError("message_not_in_streaming_state")
        return message

    def _append_stream(self, params: AppendStreamParams) -> StreamResponse:
        message = self._streaming(params)
        message.text += _text(params.get("markdown_text"))
        message.history.append(message.text)
        message.edited_at.append(trio.current_time())
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _stop_stream(self, params: StopStreamParams) -> StreamResponse:
        message = self._streaming(params)
        if params.get("markdown_text"):
            message.text += str(params["markdown_text"])
            message.history.append(message.text)
            message.edited_at.append(trio.current_time())
        message.streaming = False
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    # -- Socket Mode ----------------------------------------------------------

    async def serve_socket(self, tcp: trio.SocketStream) -> None:
        stream = _Stallable(tcp)
        async with stream, trio.open_nursery() as nursery:
            try:
                request = await trio_websocket.wrap_server_stream(nursery, stream)
                socket = await request.accept()
                send, receive = trio.open_memory_channel[SocketModeMessage | None](100)
                self.connections += 1
                self._sockets.append(send)
                self._streams[send] = stream
                try:
                    nursery.start_soon(self._read_acks, socket, nursery.cancel_scope)
                    hello: HelloEnvelope = {"type": "hello", "num_connections": 1, "debug_info": {}}
                    await socket.send_message(json.dumps(hello))
                    for envelope in self._pending:
                        send.send_nowait(envelope)
                    self._pending = []
                    self._notify()
                    async for item in receive:
                        if item is None:
                            await stream.aclose()  # no close frame: a cut connection
                            break
                        await socket.send_message(json.dumps(item))
                finally:
                    if send in self._sockets:
                        self._sockets.remove(send)
                    del self._streams[send]
                    self._notify()
            except (
                trio_websocket.ConnectionClosed,
                trio.BrokenResourceError,
                trio.ClosedResourceError,
            ):
                pass
            finally:
                nursery.cancel_scope.cancel()

    async def _read_acks(
        self, socket: trio_websocket.WebSocketConnection, scope: trio.CancelScope
    ) -> None:
        try:
            while True:
                message = json.loads(await socket.get_message())
                if isinstance(message, dict) and isinstance(message.get("envelope_id"), str):
                    self.acks.append((message["envelope_id"], trio.current_time()))
                    self._notify()
        except (trio_websocket.ConnectionClosed, trio.BrokenResourceError, ValueError):
            scope.cancel()


class _Stallable(trio.abc.HalfCloseableStream):
    """A TCP stream that can go silent: once ``stalled``, nothing more is
    read (so pings go unanswered) or written."""

    def __init__(self, inner: trio.SocketStream) -> None:
        self._inner = inner
        self.stalled = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.stalled:
            await trio.sleep_forever()
        await self._inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self._inner.receive_some(max_bytes)
        if self.stalled:
            await trio.sleep_forever()
        return data

    async def send_eof(self) -> None:
        await self._inner.send_eof()

    async def aclose(self) -> None:
        await self._inner.aclose()


class _SlackError(Exception):
    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


# Each handler takes the request body as its method's arguments: the shape
# the adapter sends, which the handler still checks as Slack would.
_METHODS: dict[str, Callable[[FakeSlack, Any], Mapping[str, object]]] = {
    "auth.test": FakeSlack._auth_test,
    "apps.connections.open": FakeSlack._connections_open,
    "chat.postmessage": FakeSlack._post,
    "chat.update": FakeSlack._update,
    "chat.delete": FakeSlack._delete,
    "chat.startstream": FakeSlack._start_stream,
    "chat.appendstream": FakeSlack._append_stream,
    "chat.stopstream": FakeSlack._stop_stream,
    "chat.postephemeral": FakeSlack._post_ephemeral,
}

_BLOCK_TYPES = frozenset(
    {"section", "actions", "context", "divider", "header", "image", "input", "rich_text"}
)


def _blocks(value: Any) -> list[Block]:
    """Block Kit blocks as Slack checks them (the parts the bot uses)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise _SlackError("invalid_blocks_format") from None
    if not isinstance(value, list) or len(value) > 50:
        raise _SlackError("invalid_blocks")
    for block in value:
        if not isinstance(block, dict) or block.get("type") not in _BLOCK_TYPES:
            raise _SlackError("invalid_blocks")
        if block["type"] == "section":
            text = block.get("text")
            if (
                not isinstance(text, dict)
                or text.get("type") not in ("mrkdwn", "plain_text")
                or not isinstance(text.get("text"), str)
                or not 1 <= len(text["text"]) <= 3000
            ):
                raise _SlackError("invalid_blocks")
        if block["type"] == "actions":
            _check_actions(block.get("elements"))
    # Checked above as far as the project's blocks go: Slack's shape now.
    return [cast(Block, dict(block)) for block in value]


def _check_actions(elements: Any) -> None:
    if not isinstance(elements, list) or not 1 <= len(elements) <= 25:
        raise _SlackError("invalid_blocks")
    action_ids: set[str] = set()
    for element in elements:
        if not isinstance(element, dict) or element.get("type") != "button":
            continue  # other interactive elements are not checked here
        text = element.get("text")
        if (
            not isinstance(text, dict)
            or text.get("type") != "plain_text"
            or not isinstance(text.get("text"), str)
            or not 1 <= len(text["text"]) <= 75
        ):
            raise _SlackError("invalid_blocks")
        action_id = element.get("action_id")
        if action_id is not None:
            if not isinstance(action_id, str) or len(action_id) > 255 or action_id in action_ids:
                raise _SlackError("invalid_blocks")
            action_ids.add(action_id)
        value = element.get("value")
        if value is not None and (not isinstance(value, str) or len(value) > 2000):
            raise _SlackError("invalid_blocks")
        if element.get("style") not in (None, "primary", "danger"):
            raise _SlackError("invalid_blocks")


def _redeliverable(envelope: SocketModeEnvelope) -> EventsApiEnvelope:
    """``envelope``, which must be one Slack sends again (``events_api``)."""
    if envelope["type"] != "events_api":
        raise KeyError("retry_attempt")  # as indexing the envelope did
    return envelope


def _error(
    error: str, status: int = 200, headers: list[tuple[str, str]] | None = None, **extra: str
) -> FakeResponse:
    return FakeResponse.json({"ok": False, "error": error, **extra}, status, headers)


def _required(params: Mapping[str, object], name: str) -> str:
    value = params.get(name)
    if not isinstance(value, str) or not value:
        raise _SlackError("channel_not_found" if name == "channel" else "invalid_arguments")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _SlackError("no_text")
    if len(value) > MAX_TEXT:
        raise _SlackError("msg_too_long")
    return value


@asynccontextmanager
async def open_fake_slack(host: str = "127.0.0.1", **settings: Any) -> AsyncIterator[FakeSlack]:
    """Run a fake Slack; ``fake.base_url`` is the ``api_base_url`` to use.
    ``settings`` go to ``FakeSlack``."""
    fake = FakeSlack(**settings)
    async with server_nursery() as nursery:
        fake._nursery = nursery
        serve = partial(trio.serve_tcp, fake.serve_socket, 0, host=host)
        listeners = await nursery.start(serve)
        fake.socket_url = f"ws://{host}:{listeners[0].socket.getsockname()[1]}"
        async with serve_http(fake.handle, host=host) as base_url:
            fake.base_url = base_url + "/api/"
            yield fake
