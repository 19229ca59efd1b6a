"""Which Discord messages are answered, and what the gateway gets of them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.platforms.discord.messages import (
    SeenMessages,
    mentions_bot,
    strip_mentions,
    to_inbound,
)

BOT = "900"


def fetcher(url: str) -> Callable[[], Awaitable[bytes]]:
    async def fetch() -> bytes:
        return url.encode()

    return fetch


def message(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "1001",
        "type": 0,
        "channel_id": "50",
        "author": {"id": "7", "username": "alice", "global_name": "Alice"},
        "content": "hello",
        "timestamp": "2026-01-02T03:04:05.500000+00:00",
        "mentions": [],
        "attachments": [],
    }
    base.update(fields)
    return base


def convert(data: Any, *, mention_only: bool = True, bot_id: str | None = BOT) -> Any:
    return to_inbound(data, bot_id=bot_id, mention_only=mention_only, fetcher=fetcher)


def test_a_direct_message_is_answered() -> None:
    inbound = convert(message())
    assert inbound.platform == "discord" and inbound.chat_id == "50"
    assert inbound.user_id == "7" and inbound.user_name == "Alice" and inbound.text == "hello"
    assert inbound.message_id == "1001" and inbound.thread_id is None
    assert inbound.sent_at == 1767323045.5
    assert inbound.raw["id"] == "1001"


def test_the_user_name_falls_back_to_the_username() -> None:
    assert convert(message(author={"id": "7", "username": "bob"})).user_name == "bob"


@pytest.mark.parametrize(
    "fields",
    [
        {"author": {"id": "8", "bot": True}},
        {"author": {"id": BOT}},
        {"type": 7},  # a member joined
        {"type": 18},  # a thread was created
        {"content": "", "attachments": []},
        {"content": f"<@{BOT}>"},  # nothing but the mention
        {"author": None},
        {"channel_id": None},
    ],
)
def test_messages_that_are_not_answered(fields: dict[str, Any]) -> None:
    assert convert(message(**fields)) is None


def test_junk_is_not_a_message() -> None:
    assert convert(None) is None and convert([]) is None


def test_guild_messages_need_a_mention() -> None:
    assert convert(message(guild_id="9")) is None
    assert convert(message(guild_id="9"), bot_id=None) is None
    mentioned = convert(message(guild_id="9", content=f"<@{BOT}> hi", mentions=[{"id": BOT}]))
    assert mentioned.text == "hi"
    legacy = convert(message(guild_id="9", content=f"hey <@!{BOT}>, hi"))
    assert legacy.text == "hey , hi"
    by_list_only = convert(message(guild_id="9", content="reply", mentions=[{"id": 900}]))
    assert by_list_only.text == "reply"  # a reply that pings the bot
    other = message(guild_id="9", content="<@123> hi", mentions=[{"id": "123"}])
    assert convert(other) is None


def test_without_mention_only_every_guild_message_is_answered() -> None:
    assert convert(message(guild_id="9"), mention_only=False).text == "hello"


def test_a_reply_is_a_user_message() -> None:
    assert convert(message(type=19)).text == "hello"


async def test_attachments_with_or_without_text() -> None:
    files = [
        {
            "id": "1",
            "filename": "a.png",
            "size": 10,
            "url": "http://x/a.png",
            "content_type": "image/png",
        },
        {"id": "2", "filename": "b", "size": True, "url": "http://x/b"},
        {"id": "3", "filename": "no-url"},
    ]
    inbound = convert(message(content="", attachments=files))
    first, second = inbound.attachments
    assert inbound.text == ""
    assert (first.mime_type, first.name, first.size, first.is_image) == (
        "image/png",
        "a.png",
        10,
        True,
    )
    assert (second.mime_type, second.size) == (None, None)
    assert await first.fetch() == b"http://x/a.png"


@pytest.mark.parametrize("stamp", [None, "yesterday", "2026-01-02T03:04:05"])
def test_a_timestamp_that_cannot_be_read_is_none(stamp: Any) -> None:
    assert convert(message(timestamp=stamp)).sent_at is None


def test_strip_mentions_keeps_line_breaks() -> None:
    assert strip_mentions(f"<@{BOT}> line one\nline  two", BOT) == "line one\nline  two"
    assert strip_mentions("no  mention", BOT) == "no  mention"


def test_mentions_bot() -> None:
    assert mentions_bot({"content": f"x <@{BOT}>"}, BOT)
    assert mentions_bot({"mentions": [{"id": BOT}]}, BOT)
    assert not mentions_bot({"content": f"<@{BOT}1>", "mentions": "junk"}, BOT)


@given(st.text(), st.sampled_from(["<@900>", "<@!900>"]), st.integers(0, 3))
def test_stripped_text_never_holds_the_mention(text: str, mention: str, where: int) -> None:
    words = text.split(" ")
    words.insert(min(where, len(words)), mention)
    stripped = strip_mentions(" ".join(words), BOT)
    assert "<@900>" not in stripped and "<@!900>" not in stripped
    assert stripped == stripped.strip()
    assert strip_mentions(stripped, BOT) == stripped


def test_seen_messages_are_bounded_and_forget_the_oldest() -> None:
    seen = SeenMessages(size=3)
    for n in range(5):
        seen.add(str(n))
    assert len(seen) == 3 and "0" not in seen and "1" not in seen and "4" in seen
    seen.add("2")  # seen again: now the newest
    seen.add("5")
    assert "2" in seen and "3" not in seen
