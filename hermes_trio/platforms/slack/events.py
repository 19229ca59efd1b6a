"""Which Socket Mode envelopes are questions for the bot, without I/O.

Slack delivers one user message more than once, and the bot must answer it
once:

- an envelope whose acknowledgement came late is sent again, with the same
  ``event_id`` and ``retry_attempt`` above 0;
- a message that mentions the bot in a channel arrives twice, as a
  ``message`` event and as an ``app_mention`` event, with different
  ``event_id`` but the same channel and ``ts``.

``EventSieve`` remembers (boundedly) both keys and lets each message through
once. Where the answer goes: in a channel, in the thread of the message (its
``thread_ts`` when it is a reply, else its own ``ts``, which starts a
thread), so a channel is not filled with answers; in a direct message, in
the thread the user wrote in, or at the top level when they wrote there,
like a chat.

With ``mention_only``, a channel message needs a mention — except a reply
in a thread the bot was mentioned in (since it started): a conversation in
a thread goes on without "@bot" in every reply, as people expect. (Slack
sends those only to an app subscribed to ``message.channels``.)
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from .api_types import AppMentionEvent, EventCallback, File, MessageEvent

__all__ = ["EventSieve", "SlackQuestion"]

# Message subtypes that are a person writing; the others are edits,
# deletions, joins, bots.
_PERSON_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})


@dataclass(frozen=True, slots=True)
class SlackQuestion:
    channel: str
    user: str
    text: str
    """With the bot's mention taken out."""
    ts: str
    thread: str | None
    """Where the answer goes (``thread_ts``); None: the top of a direct message."""
    files: tuple[File, ...]
    team: str | None
    direct: bool
    event: Mapping[str, object]
    """The event as it came (``InboundMessage.raw``), passed on uninterpreted."""
    addressed: bool = True
    """False for a channel message without a mention (a reply in the bot's
    thread, or any message with ``mention_only: false``): the adapter passes
    it on only from a user on the allow-list; others were talking to each
    other, not to the bot, and get no refusal."""


class _Seen:
    """The last ``size`` keys, oldest forgotten first."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._keys: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def add(self, key: str) -> bool:
        """True when ``key`` is new."""
        if key in self._keys:
            return False
        self._keys[key] = None
        if len(self._keys) > self._size:
            self._keys.popitem(last=False)
        return True


class EventSieve:
    """Turns envelopes into questions for a bot whose user id is ``bot_user``."""

    def __init__(
        self,
        bot_user: str,
        *,
        bot_id: str | None = None,
        mention_only: bool = True,
        memory: int = 4096,
    ) -> None:
        self.bot_user = bot_user
        self.bot_id = bot_id
        self.mention_only = mention_only
        self._events = _Seen(memory)
        self._messages = _Seen(memory)
        self._threads = _Seen(memory)
        """Channel threads the bot was mentioned in: their replies need no mention."""
        self._mention = re.compile(rf"<@{re.escape(bot_user)}(?:\|[^>]*)?>")

    def take(self, envelope: Any) -> SlackQuestion | None:
        """The question in ``envelope``, or None (not one, or already taken)."""
        if not isinstance(envelope, dict) or envelope.get("type") != "events_api":
            return None
        payload = envelope.get("payload")
        if not isinstance(payload, dict):
            return None
        event = payload.get("event")
        if not isinstance(event, dict):
            return None
        event_id = payload.get("event_id")
        if isinstance(event_id, str) and not self._events.add(event_id):
            return None  # Slack sent this envelope again
        question = self._question(
            cast(MessageEvent | AppMentionEvent, event), cast(EventCallback, payload), event
        )
        if question is None:
            return None
        if not self._messages.add(f"{question.channel}/{question.ts}"):
            return None  # the same message as the other event type
        return question

    def _question(
        self,
        event: MessageEvent | AppMentionEvent,
        payload: EventCallback,
        raw: Mapping[str, object],
    ) -> SlackQuestion | None:
        # ``event`` and ``payload`` are Slack's shapes, not yet checked:
        # each field is checked here as it is read.
        kind = event.get("type")
        if kind not in ("message", "app_mention"):
            return None
        channel, user, ts = event.get("channel"), event.get("user"), event.get("ts")
        if not (isinstance(channel, str) and isinstance(user, str) and isinstance(ts, str)):
            return None
        if (
            event.get("bot_id")
            or user == self.bot_user
            or event.get("subtype") not in _PERSON_SUBTYPES
        ):
            return None
        raw_text = event.get("text")
        text = raw_text if isinstance(raw_text, str) else ""
        direct = event.get("channel_type") == "im" or channel.startswith("D")
        mentioned = kind == "app_mention" or bool(self._mention.search(text))
        thread_ts = event.get("thread_ts") if isinstance(event.get("thread_ts"), str) else None
        addressed = direct or mentioned
        in_our_thread = thread_ts is not None and f"{channel}/{thread_ts}" in self._threads
        if not (addressed or in_our_thread or not self.mention_only):
            return None
        files = tuple(f for f in event.get("files") or () if isinstance(f, dict))
        text = self._mention.sub("", text).strip()
        if not text and not files:
            return None
        thread = thread_ts if direct else (thread_ts or ts)
        if not direct:
            self._threads.add(f"{channel}/{thread}")
        team = event.get("team") or payload.get("team_id")
        return SlackQuestion(
            channel=channel,
            user=user,
            text=text,
            ts=ts,
            thread=thread,
            files=files,
            team=team if isinstance(team, str) else None,
            direct=direct,
            event=raw,
            addressed=addressed,
        )
