"""Sending to one Slack channel or thread: by edits, or by Slack's streams.

``SlackMessenger`` posts (``chat.postMessage``) and edits (``chat.update``)
mrkdwn converted from the model's Markdown. ``SlackStreamMessenger`` uses
the streaming methods for AI apps: ``chat.startStream`` starts the answer,
``chat.appendStream`` adds what is new, ``chat.stopStream`` ends it; those
take Markdown as it is, and Slack draws its own "still writing" sign, so the
editor adds no cursor and the text only grows. Where it does not grow (the
editor moved text to a next message), the stream is stopped and the
message edited like any other. A workspace without the methods turns the
adapter to edits for good.

Slack has no typing indicator for bots, so ``typing`` does nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..consumers.messenger import Capabilities, PlatformError
from .slack_format import to_mrkdwn

if TYPE_CHECKING:
    from .slack import SlackAdapter

__all__ = [
    "SLACK_CAPABILITIES",
    "SLACK_STREAM_CAPABILITIES",
    "SlackApiError",
    "SlackMessenger",
    "SlackStreamMessenger",
]

log = logging.getLogger("hermes_trio.platforms.slack")

# Slack takes 40,000 characters, but asks for messages under 4,000: longer
# ones are cut in some clients.
SLACK_CAPABILITIES = Capabilities(can_edit=True, max_length=4000, can_type=False)
SLACK_STREAM_CAPABILITIES = Capabilities(
    can_edit=True, max_length=4000, can_type=False, shows_cursor=False
)
# The workspace (or the token) does not offer the streaming methods.
_NO_STREAMS = frozenset(
    {
        "unknown_method",
        "not_allowed_token_type",
        "missing_scope",
        "method_deprecated",
        "feature_not_enabled",
        "not_supported",
    }
)


class SlackApiError(PlatformError):
    """Slack answered ``ok: false``; ``error`` is its own code."""

    def __init__(self, method: str, error: str) -> None:
        super().__init__(f"slack {method}: {error}")
        self.method = method
        self.error = error


class SlackMessenger:
    capabilities = SLACK_CAPABILITIES

    def __init__(self, adapter: SlackAdapter, channel: str, thread: str | None = None) -> None:
        self._adapter = adapter
        self.channel = channel
        self.thread = thread

    def __repr__(self) -> str:
        return f"<SlackMessenger {self.channel} thread={self.thread}>"

    async def send(self, text: str) -> str:
        params: dict[str, Any] = {"channel": self.channel, "text": to_mrkdwn(text)}
        if self.thread is not None:
            params["thread_ts"] = self.thread
        answer = await self._adapter.call("chat.postMessage", params)
        ts = answer.get("ts")
        if not isinstance(ts, str):
            raise PlatformError("slack chat.postMessage: answer without a message ts")
        return ts

    async def edit(self, message_id: str, text: str, *, final: bool = False) -> None:
        await self._adapter.call(
            "chat.update", {"channel": self.channel, "ts": message_id, "text": to_mrkdwn(text)}
        )

    async def delete(self, message_id: str) -> None:
        try:
            await self._adapter.call("chat.delete", {"channel": self.channel, "ts": message_id})
        except SlackApiError as exc:
            if exc.error != "message_not_found":  # already gone is what we wanted
                raise

    async def typing(self) -> None:
        return None


class SlackStreamMessenger(SlackMessenger):
    capabilities = SLACK_STREAM_CAPABILITIES

    def __init__(
        self,
        adapter: SlackAdapter,
        channel: str,
        thread: str,
        *,
        recipient: str | None,
        team: str | None,
    ) -> None:
        super().__init__(adapter, channel, thread)
        self.recipient = recipient
        self.team = team
        self._streamed: dict[str, str] = {}
        """Open streams: message ts → the text they show."""

    async def send(self, text: str) -> str:
        if self._adapter.streams_unavailable:
            return await super().send(text)
        params: dict[str, Any] = {
            "channel": self.channel,
            "thread_ts": self.thread,
            "markdown_text": text,
        }
        if self.recipient is not None:
            params["recipient_user_id"] = self.recipient
        if self.team is not None:
            params["recipient_team_id"] = self.team
        try:
            answer = await self._adapter.call("chat.startStream", params)
        except SlackApiError as exc:
            if exc.error not in _NO_STREAMS:
                raise
            self._adapter.streams_refused(exc.error)
            return await super().send(text)
        ts = answer.get("ts")
        if not isinstance(ts, str):
            raise PlatformError("slack chat.startStream: answer without a message ts")
        self._streamed[ts] = text
        return ts

    async def edit(self, message_id: str, text: str, *, final: bool = False) -> None:
        shown = self._streamed.get(message_id)
        if shown is None:
            await super().edit(message_id, text, final=final)
            return
        if not text.startswith(shown):
            await self._stop(message_id)
            await super().edit(message_id, text, final=final)
            return
        new = text[len(shown) :]
        if new:
            await self._adapter.call(
                "chat.appendStream",
                {"channel": self.channel, "ts": message_id, "markdown_text": new},
            )
            self._streamed[message_id] = text
        if final:
            await self._stop(message_id)

    async def delete(self, message_id: str) -> None:
        if message_id in self._streamed:
            await self._stop(message_id)
        await super().delete(message_id)

    async def _stop(self, message_id: str) -> None:
        await self._adapter.call("chat.stopStream", {"channel": self.channel, "ts": message_id})
        del self._streamed[message_id]
