"""Which Socket Mode envelopes are questions for the bot (sans-IO)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.platforms.slack.events import EventSieve


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


def mention(ts: str, channel: str = "C1", **fields: Any) -> dict[str, Any]:
    return {
        "type": "app_mention",
        "channel": channel,
        "user": "U7",
        "text": "<@UBOT> question",
        "ts": ts,
        **fields,
    }


def test_mention_forms_and_where_they_count() -> None:
    sieve = EventSieve("UBOT", bot_id="BBOT")
    labelled = sieve.take(envelope(mention("1.0", text="hi <@UBOT|hermes>, ok?"), "A"))
    assert labelled is not None and labelled.text == "hi , ok?"
    dm = sieve.take(envelope(message(ts="2.0", text="<@UBOT> in a DM"), "B"))
    assert dm is not None and dm.text == "in a DM" and dm.direct
    group_dm = message(channel="G1", channel_type="mpim", ts="3.0", text="no mention")
    assert sieve.take(envelope(group_dm, "C")) is None  # a group DM is a channel
    other_bot = message(ts="4.0", bot_id="B2", user=None)
    assert sieve.take(envelope(other_bot, "D")) is None
    broadcast = message(ts="5.0", subtype="thread_broadcast", thread_ts="4.5")
    taken = sieve.take(envelope(broadcast, "E"))
    assert taken is not None and taken.thread == "4.5"
    assert sieve.take(envelope(message(ts="6.0", text="  <@UBOT>  "), "F")) is None
    assert sieve.take(envelope(mention("7.0", user="UBOT"), "G")) is None


def test_the_mention_may_come_before_the_message() -> None:
    sieve = EventSieve("UBOT")
    first = sieve.take(envelope(mention("1.0"), "A"))
    as_message = {**mention("1.0"), "type": "message", "channel_type": "channel"}
    assert first is not None and sieve.take(envelope(as_message, "B")) is None


def test_team_and_files() -> None:
    sieve = EventSieve("UBOT")
    files = [{"id": "F1", "mimetype": "image/png"}, "junk"]
    taken = sieve.take(envelope(message(text="", files=files), "A"))
    assert taken is not None and taken.files == ({"id": "F1", "mimetype": "image/png"},)
    assert taken.team == "T1"  # from the envelope when the event has none


questions = st.lists(
    st.tuples(st.sampled_from(["C1", "C2", "D1"]), st.integers(1, 30)),
    min_size=1,
    max_size=12,
    unique=True,
)


@given(questions, st.randoms(use_true_random=False), st.integers(0, 3))
def test_every_message_once_whatever_the_order_and_repeats(
    keys: list[tuple[str, int]], random: Any, repeats: int
) -> None:
    """Each message as Slack sends it (a channel mention twice, as message
    and app_mention), envelopes redelivered and shuffled: each is taken once."""
    envelopes = []
    for n, (channel, second) in enumerate(keys):
        ts = f"{second}.000100"
        if channel.startswith("D"):
            envelopes.append(envelope(message(channel=channel, ts=ts), f"E{n}m"))
        else:
            envelopes.append(envelope(mention(ts, channel), f"E{n}a"))
            as_message = {**mention(ts, channel), "type": "message", "channel_type": "channel"}
            envelopes.append(envelope(as_message, f"E{n}m"))
    stream = envelopes + [
        {**e, "retry_attempt": 1} for e in random.sample(envelopes, min(repeats, len(envelopes)))
    ]
    random.shuffle(stream)
    sieve = EventSieve("UBOT")
    taken = [q for e in stream if (q := sieve.take(e)) is not None]
    assert sorted((q.channel, q.ts) for q in taken) == sorted((c, f"{s}.000100") for c, s in keys)


def test_replies_in_a_thread_the_bot_was_mentioned_in_need_no_mention() -> None:
    sieve = EventSieve("UBOT")
    assert sieve.take(envelope(mention("1.0"), "A")) is not None
    reply = message(channel="C1", channel_type="channel", ts="2.0", thread_ts="1.0", text="more")
    follow_up = sieve.take(envelope(reply, "B"))
    assert follow_up is not None and follow_up.thread == "1.0" and not follow_up.addressed
    elsewhere = {**reply, "ts": "3.0", "thread_ts": "0.5"}
    assert sieve.take(envelope(elsewhere, "C")) is None  # not a thread of ours
    top_level = {**reply, "ts": "4.0"}
    del top_level["thread_ts"]
    assert sieve.take(envelope(top_level, "D")) is None
    # A mention inside someone else's thread makes that thread ours too.
    assert sieve.take(envelope(mention("5.0", thread_ts="0.5"), "E")) is not None
    again = sieve.take(envelope({**elsewhere, "ts": "6.0"}, "F"))
    assert again is not None and again.thread == "0.5"
