"""Which Discord messages the bot answers, and what the gateway gets of
them: MESSAGE_CREATE payloads to ``InboundMessage``, without I/O.

Direct messages (no ``guild_id``) are always for the bot. In a server
channel, with ``mention_only``, only a message that mentions the bot is;
the mention itself is taken out of the text. Messages of bots (the bot's
own among them) and system messages (pins, joins, thread starts) are never
answered.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, cast

from ..base import Attachment, InboundMessage
from .api_types import Message, MessageCreate

__all__ = ["SeenMessages", "mentions_bot", "strip_mentions", "to_inbound"]

# Ordinary messages and replies; every other type is a system message.
_USER_MESSAGE_TYPES = frozenset({0, 19})

Fetcher = Callable[[str], Callable[[], Awaitable[bytes]]]
"""Makes the ``fetch`` of an attachment from its URL."""


def _mention_pattern(bot_id: str) -> re.Pattern[str]:
    return re.compile(rf"<@!?{re.escape(bot_id)}>")


def mentions_bot(message: Message, bot_id: str) -> bool:
    mentions = message.get("mentions")
    if isinstance(mentions, list):
        for user in mentions:
            if isinstance(user, dict) and str(user.get("id")) == bot_id:
                return True
    content = message.get("content")
    return isinstance(content, str) and _mention_pattern(bot_id).search(content) is not None


def strip_mentions(text: str, bot_id: str) -> str:
    """``text`` without the bot's mentions (``<@id>``, ``<@!id>``), spaces
    around them folded, ends trimmed."""
    # The spaces around a mention go with it; the rest of the text (line
    # breaks, Markdown indentation) stays as written.
    around = re.compile(rf"[ \t]*<@!?{re.escape(bot_id)}>[ \t]*")
    return around.sub(" ", text).strip()


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.timestamp()


def _attachments(message: Message, fetcher: Fetcher) -> tuple[Attachment, ...]:
    found = message.get("attachments")
    if not isinstance(found, list):
        return ()
    out: list[Attachment] = []
    for item in found:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        size = item.get("size")
        out.append(
            Attachment(
                mime_type=item.get("content_type")
                if isinstance(item.get("content_type"), str)
                else None,
                name=item.get("filename") if isinstance(item.get("filename"), str) else None,
                size=size if isinstance(size, int) and not isinstance(size, bool) else None,
                fetch=fetcher(item["url"]),
            )
        )
    return tuple(out)


def to_inbound(
    data: Any, *, bot_id: str | None, mention_only: bool, fetcher: Fetcher
) -> InboundMessage | None:
    """The ``InboundMessage`` for a MESSAGE_CREATE's ``data``, or None when
    the bot does not answer it."""
    if not isinstance(data, dict):
        return None
    # A MESSAGE_CREATE from here on; each field is still checked where read.
    message = cast(MessageCreate, data)
    author = message.get("author")
    channel_id = message.get("channel_id")
    if not isinstance(author, dict) or author.get("id") is None or channel_id is None:
        return None
    if author.get("bot") or (bot_id is not None and str(author["id"]) == bot_id):
        return None
    if message.get("type", 0) not in _USER_MESSAGE_TYPES:
        return None
    text = message.get("content")
    if not isinstance(text, str):
        text = ""
    in_guild = message.get("guild_id") is not None
    if in_guild and mention_only and (bot_id is None or not mentions_bot(message, bot_id)):
        return None
    if bot_id is not None:
        text = strip_mentions(text, bot_id)
    attachments = _attachments(message, fetcher)
    if not text and not attachments:
        return None
    name = author.get("global_name") or author.get("username")
    return InboundMessage(
        platform="discord",
        chat_id=str(channel_id),
        user_id=str(author["id"]),
        text=text,
        message_id=str(message["id"]) if message.get("id") is not None else None,
        user_name=name if isinstance(name, str) else None,
        raw=data,
        attachments=attachments,
        sent_at=_timestamp(message.get("timestamp")),
    )


class SeenMessages:
    """The ids of the last ``size`` messages handed over. A RESUME replays
    what Discord is not sure we got; this keeps the replay from being
    answered twice."""

    def __init__(self, size: int = 2048) -> None:
        self.size = size
        self._ids: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, message_id: str) -> None:
        self._ids[message_id] = None
        self._ids.move_to_end(message_id)
        while len(self._ids) > self.size:
            self._ids.popitem(last=False)
