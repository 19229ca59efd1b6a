"""Slack's sans-IO parts: which envelopes are questions, and mrkdwn."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.platforms.slack_events import EventSieve
from hermes_trio.platforms.slack_format import to_mrkdwn


def envelope(event: dict[str, Any], event_id: str = "Ev1", retry: int = 0) -> dict[str, Any]:
    return {
        "envelope_id": f"env-{event_id}",
        "type": "events_api",
        "retry_attempt": retry,
        "payload": {"team_id": "T1", "event_id": event_id, "event": event},
    }


def message(**fields: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": "D1",
        "user": "U7",
        "text": "hi",
        "ts": "1.000001",
        "channel_type": "im",
        **fields,
    }


def test_each_message_passes_once_whichever_way_it_comes_again() -> None:
    sieve = EventSieve("UBOT")
    first = sieve.take(envelope(message()))
    assert first is not None and first.text == "hi" and first.thread is None
    assert sieve.take(envelope(message(), retry=1)) is None  # redelivered envelope
    mention = {
        "type": "app_mention",
        "channel": "C1",
        "user": "U7",
        "text": "<@UBOT> yo",
        "ts": "2.000001",
    }
    as_message = {**mention, "type": "message", "channel_type": "channel"}
    taken = sieve.take(envelope(as_message, "Ev2"))
    assert taken is not None and taken.text == "yo" and taken.thread == "2.000001"
    assert sieve.take(envelope(mention, "Ev3")) is None  # same channel and ts


def test_what_is_not_a_question() -> None:
    sieve = EventSieve("UBOT", mention_only=True)
    not_questions = [
        message(bot_id="B1"),
        message(user="UBOT"),
        message(subtype="message_changed"),
        message(text=""),
        message(channel="C1", channel_type="channel", text="no mention"),
        {"type": "reaction_added", "user": "U7"},
        message(user=None),
    ]
    for i, event in enumerate(not_questions):
        assert sieve.take(envelope(event, f"E{i}")) is None, event
    assert sieve.take({"type": "hello"}) is None
    assert sieve.take({"type": "events_api", "payload": "nonsense"}) is None


def test_threads_in_direct_messages_and_channels() -> None:
    sieve = EventSieve("UBOT", mention_only=False)
    dm_thread = sieve.take(envelope(message(thread_ts="0.5", ts="3.0"), "A"))
    assert dm_thread is not None and dm_thread.thread == "0.5"
    reply = sieve.take(
        envelope(message(channel="C1", channel_type="channel", ts="4.0", thread_ts="0.7"), "B")
    )
    assert reply is not None and reply.thread == "0.7"
    files = sieve.take(
        envelope(message(ts="5.0", text="", subtype="file_share", files=[{"id": "F1"}]), "C")
    )
    assert files is not None and files.files == ({"id": "F1"},)


def test_memory_is_bounded() -> None:
    sieve = EventSieve("UBOT", memory=2)
    for i in range(5):
        assert sieve.take(envelope(message(ts=f"{i}.0"), f"E{i}")) is not None
    assert len(sieve._events._keys) == 2 and len(sieve._messages._keys) == 2


@given(st.text())
def test_mrkdwn_never_raises_and_escapes_every_control_character(text: str) -> None:
    out = to_mrkdwn(text)
    # Every < is one of our links (<https://…|…> or <https://…>); every & an entity.
    without_links = re.sub(r"<https?://[^<>\s|]+(\|[^<>]*)?>", "", out)
    assert "<" not in without_links and ">" not in without_links
    assert not re.search(r"&(?!amp;|lt;|gt;)", out)
    assert "\x01" not in out and "\x02" not in out


@given(st.text(alphabet=st.characters(blacklist_characters="`\n\x01\x02"), min_size=1))
def test_code_is_kept_as_written(code: str) -> None:
    escaped = code.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert to_mrkdwn(f"```python\n{code}\n```") == f"```\n{escaped}\n```"


def test_common_markdown_becomes_mrkdwn() -> None:
    assert to_mrkdwn("**bold**, *it*, ~~gone~~") == "*bold*, _it_, ~gone~"
    assert to_mrkdwn("## Plan\n- one\n- two") == "*Plan*\n• one\n• two"
    assert to_mrkdwn("[docs](https://x.io/?a=1&b=2)") == "<https://x.io/?a=1&amp;b=2|docs>"
    assert to_mrkdwn("a <b> & `x < y`") == "a &lt;b&gt; &amp; `x &lt; y`"
    assert to_mrkdwn("2 * 3 * 4 and snake_case") == "2 * 3 * 4 and snake_case"
