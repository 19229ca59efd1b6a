"""Sending to one Slack channel or thread: by edits, or by Slack's streams.

``SlackMessenger`` posts (``chat.postMessage``) and edits (``chat.update``)
mrkdwn converted from the model's Markdown. ``SlackStreamMessenger`` uses
the streaming methods for AI apps: ``chat.startStream`` starts the answer,
``chat.appendStream`` adds what is new, ``chat.stopStream`` ends it; those
take Markdown as it is, and Slack draws its own "still writing" sign, so the
editor adds no cursor and the text only grows. Where it does not grow (the
editor moved text to a next message), the stream is stopped and the
message edited like any other; so is a stream Slack ended itself (it ends
streams nobody appended to for a while, say while a tool ran). The last
words go with ``chat.stopStream``. A workspace without the methods turns
the adapter to edits for good.

Open streams are kept in the adapter (``OpenStreams``), not the
messenger: a one-off reply (a refusal, a note) is one ``send`` that no
edit ever follows, so the adapter stops streams idle for a while itself.
Where a stream cannot start — the top of a direct message (Slack streams
only into threads there), or a channel thread whose asker we do not know
(a channel stream must name its reader) — the adapter hands out an
editing messenger instead.

Slack has no typing indicator for bots, so ``typing`` does nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import trio

from ...consumers.messenger import Button, Capabilities, PlatformError, RateLimited
from .api import SlackApiError
from .api_types import (
    APPEND_STREAM,
    DELETE,
    POST_MESSAGE,
    START_STREAM,
    STOP_STREAM,
    UPDATE,
    ActionsBlock,
    AppendStreamParams,
    Block,
    MessageRef,
    PostMessageParams,
    SectionBlock,
    StartStreamParams,
    StopStreamParams,
    StreamResponse,
    WebApiCall,
    WebApiMethod,
)
from .format import to_mrkdwn

__all__ = [
    "NO_STREAMS",
    "SLACK_CAPABILITIES",
    "SLACK_STREAM_CAPABILITIES",
    "STREAM_OVER",
    "OpenStreams",
    "SlackHost",
    "SlackMessenger",
    "SlackStreamMessenger",
]

log = logging.getLogger("hermes_trio.platforms.slack")

# Slack takes 40,000 characters, but asks for messages under 4,000: longer
# ones are cut in some clients.
SLACK_CAPABILITIES = Capabilities(can_edit=True, max_length=4000, can_type=False, buttons=True)
SLACK_STREAM_CAPABILITIES = Capabilities(
    can_edit=True, max_length=4000, can_type=False, shows_cursor=False, buttons=True
)
SECTION_MAX = 3000
"""Characters a section block's text may hold."""
# The workspace (or the token) does not offer the streaming methods.
NO_STREAMS = frozenset(
    {
        "unknown_method",
        "not_allowed_token_type",
        "missing_scope",
        "method_deprecated",
        "feature_not_enabled",
        "not_supported",
    }
)
# The stream was stopped already: by Slack after a while without appends,
# or by us in a call whose answer was lost.
STREAM_OVER = frozenset({"message_not_in_streaming_state"})

R = TypeVar("R")
StreamParams = TypeVar("StreamParams", bound=MessageRef)


class SlackHost(Protocol):
    """What a messenger needs of its adapter (``SlackAdapter`` is one): Slack's
    Web API and the adapter's record of streams."""

    streams: OpenStreams
    streams_unavailable: bool

    async def call(self, request: WebApiCall[R]) -> R:
        """One Web API call; ``SlackApiError`` when Slack says no."""
        ...

    def streams_refused(self, error: str) -> None:
        """The workspace refused the streaming methods: edits from now on."""
        ...


class SlackMessenger:
    capabilities = SLACK_CAPABILITIES

    def __init__(self, adapter: SlackHost, channel: str, thread: str | None = None) -> None:
        self._adapter = adapter
        self.channel = channel
        self.thread = thread

    def __repr__(self) -> str:
        return f"<SlackMessenger {self.channel} thread={self.thread}>"

    async def send(self, text: str) -> str:
        params: PostMessageParams = {"channel": self.channel, "text": to_mrkdwn(text)}
        if self.thread is not None:
            params["thread_ts"] = self.thread
        answer = await self._adapter.call(POST_MESSAGE(params))
        ts = answer.get("ts")
        if not isinstance(ts, str):
            raise PlatformError("slack chat.postMessage: answer without a message ts")
        return ts

    async def edit(self, message_id: str, text: str, *, final: bool = False) -> None:
        await self._adapter.call(
            UPDATE({"channel": self.channel, "ts": message_id, "text": to_mrkdwn(text)})
        )

    async def send_buttons(self, text: str, buttons: Sequence[Button]) -> str:
        shown = to_mrkdwn(text)
        section: SectionBlock = {
            "type": "section",
            "text": {"type": "mrkdwn", "text": shown[:SECTION_MAX]},
        }
        actions: ActionsBlock = {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": button.label},
                    "action_id": f"hermes_button_{index}",
                    "value": button.data,
                    "style": "danger" if button.danger else "primary",
                }
                for index, button in enumerate(buttons)
            ],
        }
        blocks: list[Block] = [section, actions]
        # ``text`` stays: notifications and screen readers use it.
        params: PostMessageParams = {"channel": self.channel, "text": shown, "blocks": blocks}
        if self.thread is not None:
            params["thread_ts"] = self.thread
        answer = await self._adapter.call(POST_MESSAGE(params))
        ts = answer.get("ts")
        if not isinstance(ts, str):
            raise PlatformError("slack chat.postMessage: answer without a message ts")
        return ts

    async def close_buttons(self, message_id: str, text: str) -> None:
        # An empty ``blocks`` takes the old ones (the buttons) away; left
        # out, Slack would keep them.
        await self._adapter.call(
            UPDATE(
                {"channel": self.channel, "ts": message_id, "text": to_mrkdwn(text), "blocks": []}
            )
        )

    async def delete(self, message_id: str) -> None:
        try:
            await self._adapter.call(DELETE({"channel": self.channel, "ts": message_id}))
        except SlackApiError as exc:
            if exc.error != "message_not_found":  # already gone is what we wanted
                raise

    async def typing(self) -> None:
        return None


@dataclass
class OpenStream:
    shown: str
    """The Markdown the stream shows so far."""
    touched: float
    """When a call on it last began (``trio.current_time()``)."""
    busy: bool = False
    uncertain: bool = False
    """A call on it failed without an answer (a timeout): it may or may not
    have shown its text, so appending again could show it twice."""


class OpenStreams:
    """The adapter's streams not stopped yet, by (channel, ts).

    Shared by every messenger of the adapter, so a stream a one-off reply
    started (which is never edited, so never stopped by its messenger) is
    still found and stopped when it has been idle a while.
    """

    def __init__(self) -> None:
        self._open: dict[tuple[str, str], OpenStream] = {}

    def __len__(self) -> int:
        return len(self._open)

    def open(self, channel: str, ts: str, shown: str, now: float) -> None:
        self._open[(channel, ts)] = OpenStream(shown, now)

    def get(self, channel: str, ts: str) -> OpenStream | None:
        return self._open.get((channel, ts))

    def forget(self, channel: str, ts: str) -> None:
        self._open.pop((channel, ts), None)

    def take_idle(self, now: float, idle: float) -> list[tuple[str, str]]:
        """Forget and return the streams no call has touched for ``idle`` seconds."""
        stale = [
            key
            for key, stream in self._open.items()
            if not stream.busy and now - stream.touched >= idle
        ]
        for key in stale:
            del self._open[key]
        return stale


class SlackStreamMessenger(SlackMessenger):
    """A thread's answers as Slack streams; see the module docstring."""

    capabilities = SLACK_STREAM_CAPABILITIES
    thread: str
    """A stream is always a reply in a thread."""

    def __init__(
        self,
        adapter: SlackHost,
        channel: str,
        thread: str,
        *,
        recipient: str | None,
        team: str | None,
    ) -> None:
        super().__init__(adapter, channel, thread)
        self.recipient = recipient
        self.team = team

    async def send(self, text: str) -> str:
        if self._adapter.streams_unavailable:
            return await super().send(text)
        params: StartStreamParams = {
            "channel": self.channel,
            "thread_ts": self.thread,
            "markdown_text": text,
        }
        if self.recipient is not None:
            params["recipient_user_id"] = self.recipient
        if self.team is not None:
            params["recipient_team_id"] = self.team
        try:
            answer = await self._adapter.call(START_STREAM(params))
        except SlackApiError as exc:
            # A stream is a nicety: whatever Slack refuses it for, a plain
            # message still answers (and fails in turn if it cannot).
            if exc.error in NO_STREAMS:
                self._adapter.streams_refused(
                    exc.error if exc.needed is None else f"{exc.error}, needs {exc.needed}"
                )
            else:
                log.info("slack: no stream in %s (%s); posting instead", self.channel, exc.error)
            return await super().send(text)
        ts = answer.get("ts")
        if not isinstance(ts, str):
            raise PlatformError("slack chat.startStream: answer without a message ts")
        self._adapter.streams.open(self.channel, ts, text, trio.current_time())
        return ts

    async def edit(self, message_id: str, text: str, *, final: bool = False) -> None:
        stream = self._adapter.streams.get(self.channel, message_id)
        if stream is None:  # never a stream, or stopped already
            await super().edit(message_id, text, final=final)
            return
        if stream.uncertain or not text.startswith(stream.shown):
            # The editor moved text to the next message, or we do not know
            # what the stream shows: a stream cannot take text back, an
            # edit (of the whole text) can.
            await self._stop(message_id, stream)
            await super().edit(message_id, text, final=final)
            return
        new = text[len(stream.shown) :]
        if final:
            ended = await self._stop(message_id, stream, new)
        elif new:
            ended = await self._append(message_id, stream, new)
        else:
            return
        if ended:
            # Slack ended the stream itself (idle too long, say, while a
            # tool ran): the rest goes in by an edit.
            await super().edit(message_id, text, final=final)

    async def delete(self, message_id: str) -> None:
        stream = self._adapter.streams.get(self.channel, message_id)
        if stream is not None:
            await self._stop(message_id, stream)
        await super().delete(message_id)

    async def _append(self, message_id: str, stream: OpenStream, new: str) -> bool:
        """Add ``new``; True when Slack had ended the stream before."""
        params: AppendStreamParams = {
            "channel": self.channel,
            "ts": message_id,
            "markdown_text": new,
        }
        if not await self._stream_call(APPEND_STREAM, params, stream):
            return True
        stream.shown += new
        return False

    async def _stop(self, message_id: str, stream: OpenStream, new: str = "") -> bool:
        """End the stream (with ``new`` as its last words); True when Slack
        had ended it before, so ``new`` is not shown."""
        params: StopStreamParams = {"channel": self.channel, "ts": message_id}
        if new:
            params["markdown_text"] = new
        done = await self._stream_call(STOP_STREAM, params, stream)
        self._adapter.streams.forget(self.channel, message_id)
        return not done and bool(new)

    async def _stream_call(
        self,
        method: WebApiMethod[StreamParams, StreamResponse],
        params: StreamParams,
        stream: OpenStream,
    ) -> bool:
        """Call ``method`` on an open stream; False when Slack says the
        stream is over. Other errors (a rate limit) keep the stream open for
        the editor's next try."""
        stream.touched = trio.current_time()
        stream.busy = True
        try:
            await self._adapter.call(method(params))
        except SlackApiError as exc:
            if exc.error not in STREAM_OVER:
                raise
            self._adapter.streams.forget(self.channel, params["ts"])
            return False
        except RateLimited:
            raise  # not done: the editor tries again later
        except PlatformError:
            stream.uncertain = True
            raise
        finally:
            stream.busy = False
            stream.touched = trio.current_time()
        return True
