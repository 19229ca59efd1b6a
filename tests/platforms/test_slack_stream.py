"""``transport: stream`` against the fake Slack: what happens to a native
stream when it cannot simply grow — Slack ended it, the text shrank, the
workspace refuses the methods, nobody ever edits it, a rate limit."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import trio

from hermes_trio.config import SlackConfig
from hermes_trio.consumers.messenger import PlatformError, RateLimited
from hermes_trio.platforms.base import InboundMessage
from hermes_trio.platforms.slack.adapter import SlackAdapter
from hermes_trio.platforms.slack.send import OpenStreams, SlackMessenger, SlackStreamMessenger
from hermes_trio.testing.fake_slack import FakeSlack, open_fake_slack

THREAD = "1700000000.000100"


@asynccontextmanager
async def streaming(
    request_timeout: float = 30.0,
    **fake_settings: Any,
) -> AsyncIterator[tuple[FakeSlack, SlackAdapter, trio.MemoryReceiveChannel[InboundMessage]]]:
    """The adapter on a fake Slack, and the questions it receives."""
    async with open_fake_slack(**fake_settings) as fake, httpx.AsyncClient() as client:
        config = SlackConfig(
            bot_token=fake.bot_token,
            app_token=fake.app_token,
            api_base_url=fake.base_url,
            transport="stream",
        )
        adapter = SlackAdapter(
            config, client, stream_idle_stop=0.2, request_timeout=request_timeout
        )
        send, receive = trio.open_memory_channel[InboundMessage](16)
        async with trio.open_nursery() as nursery:
            await nursery.start(adapter.run, send)
            with trio.fail_after(5):
                await fake.wait_until(lambda: bool(fake._sockets))
            yield fake, adapter, receive
            nursery.cancel_scope.cancel()


def stream_methods(fake: FakeSlack) -> list[str]:
    return [c.method for c in fake.calls if c.method.startswith("chat.")]


async def test_a_stream_slack_ended_is_finished_by_an_edit() -> None:
    async with streaming(stream_expiry=0.1) as (fake, adapter, _):
        messenger = adapter.messenger("D1", THREAD)
        ts = await messenger.send("While a tool runs")
        await trio.sleep(0.15)  # longer than Slack keeps an idle stream
        await messenger.edit(ts, "While a tool runs, **Slack** gave up.")
        await messenger.edit(ts, "While a tool runs, **Slack** gave up. The end.", final=True)
        (message,) = fake.visible("D1", THREAD)
        assert message.text == "While a tool runs, *Slack* gave up. The end."
        assert stream_methods(fake) == [
            "chat.startStream",
            "chat.appendStream",  # message_not_in_streaming_state
            "chat.update",
            "chat.update",
        ]
        assert len(adapter.streams) == 0


async def test_final_words_lost_with_an_ended_stream_come_by_an_edit() -> None:
    async with streaming(stream_expiry=0.1) as (fake, adapter, _):
        messenger = adapter.messenger("D1", THREAD)
        ts = await messenger.send("Almost")
        await trio.sleep(0.15)
        await messenger.edit(ts, "Almost done.", final=True)
        (message,) = fake.visible("D1", THREAD)
        assert message.text == "Almost done."
        assert stream_methods(fake)[-2:] == ["chat.stopStream", "chat.update"]


async def test_text_that_does_not_grow_stops_the_stream_and_edits() -> None:
    async with streaming() as (fake, adapter, _):
        messenger = adapter.messenger("D1", THREAD)
        ts = await messenger.send("A long first page that")
        await messenger.edit(ts, "A long first page", final=True)  # the rest moved on
        (message,) = fake.visible("D1", THREAD)
        assert message.text == "A long first page" and not message.streaming
        assert stream_methods(fake) == ["chat.startStream", "chat.stopStream", "chat.update"]
        await messenger.edit(ts, "A long first page", final=True)  # again: nothing to do
        assert stream_methods(fake)[-1] == "chat.update"


async def test_a_stream_nobody_edits_is_stopped_when_idle() -> None:
    # A one-off reply (a refusal, a note about a file) is one send, never edited.
    async with streaming() as (fake, adapter, questions):
        mention = fake.push_mention("C1", "U7", "let me in")
        with trio.fail_after(5):
            question = await questions.receive()
        assert question.thread_id == mention["payload"]["event"]["ts"]
        await adapter.messenger("C1", question.thread_id).send("You are not on the list.")
        with trio.fail_after(5):
            await fake.wait_until(lambda: not fake.visible("C1")[0].streaming)
        (message,) = fake.visible("C1")
        assert message.text == "You are not on the list." and message.streamed
        stop = fake.calls_to("chat.stopStream")[0]
        assert stop.time - message.sent_at >= 0.2


async def test_a_stream_being_written_is_not_stopped_for_idleness() -> None:
    async with streaming() as (fake, adapter, _):
        messenger = adapter.messenger("D1", THREAD)
        ts = await messenger.send("tick")
        text = "tick"
        for _ in range(6):
            await trio.sleep(0.1)
            text += " tick"
            await messenger.edit(ts, text)
        assert fake.visible("D1")[0].streaming and not fake.calls_to("chat.stopStream")
        await messenger.edit(ts, text, final=True)
        assert not fake.visible("D1")[0].streaming


async def test_a_rate_limited_stop_keeps_the_stream_for_the_next_try() -> None:
    async with streaming() as (fake, adapter, _):
        messenger = adapter.messenger("D1", THREAD)
        ts = await messenger.send("Hello")
        fake.fail_next("chat.stopStream", retry_after=2)
        with pytest.raises(RateLimited) as limited:
            await messenger.edit(ts, "Hello there.", final=True)
        assert limited.value.retry_after == 2
        await messenger.edit(ts, "Hello there.", final=True)
        (message,) = fake.visible("D1")
        assert message.text == "Hello there." and not message.streaming
        assert [c.params.get("markdown_text") for c in fake.calls_to("chat.stopStream")] == [
            " there.",
            " there.",
        ]


async def test_an_append_answered_too_late_is_never_shown_twice() -> None:
    async with streaming(request_timeout=0.2) as (fake, adapter, _):
        messenger = adapter.messenger("D1", THREAD)
        ts = await messenger.send("One,")
        fake.answer_late("chat.appendStream", 1.0)
        with pytest.raises(PlatformError, match="network error"):
            await messenger.edit(ts, "One, two,")  # shown, but we never heard
        await messenger.edit(ts, "One, two, three.", final=True)
        (message,) = fake.visible("D1")
        assert message.text == "One, two, three." and not message.streaming
        assert stream_methods(fake)[-2:] == ["chat.stopStream", "chat.update"]


async def test_deleting_a_streamed_message_stops_it_first() -> None:
    async with streaming() as (fake, adapter, _):
        messenger = adapter.messenger("D1", THREAD)
        ts = await messenger.send("to be deleted")
        await messenger.delete(ts)
        assert not fake.visible("D1")
        assert stream_methods(fake) == ["chat.startStream", "chat.stopStream", "chat.delete"]


@pytest.mark.parametrize("error", ["not_allowed_token_type", "missing_scope", "method_deprecated"])
async def test_a_workspace_without_streams_turns_the_adapter_to_edits(
    error: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with streaming() as (fake, adapter, _):
        needed = "assistant:write" if error == "missing_scope" else None
        fake.fail_next("chat.startStream", error, needed=needed)
        first = adapter.messenger("D1", THREAD)
        assert isinstance(first, SlackStreamMessenger)
        ts = await first.send("**hi**")
        await first.edit(ts, "**hi** there", final=True)
        assert fake.texts("D1") == ["*hi* there"]
        assert isinstance(adapter.messenger("D2", THREAD), SlackMessenger)
        assert not isinstance(adapter.messenger("D2", THREAD), SlackStreamMessenger)
    refusals = [r for r in caplog.records if "refused the streaming methods" in r.getMessage()]
    assert len(refusals) == 1 and refusals[0].levelno == logging.WARNING
    assert error in refusals[0].getMessage()
    if error == "missing_scope":
        assert "needs assistant:write" in refusals[0].getMessage()


async def test_a_stream_refused_in_one_place_is_a_plain_message_there() -> None:
    async with streaming() as (fake, adapter, _):
        fake.fail_next("chat.startStream", "channel_type_not_supported")
        messenger = adapter.messenger("D1", THREAD)
        ts = await messenger.send("**hi**")
        await messenger.edit(ts, "**hi** there", final=True)
        assert fake.texts("D1") == ["*hi* there"]
        assert not adapter.streams_unavailable  # elsewhere, streams still
        fake.fail_next("chat.startStream", "channel_not_found")
        fake.fail_next("chat.postMessage", "channel_not_found")
        with pytest.raises(PlatformError, match=r"chat\.postMessage: channel_not_found"):
            await adapter.messenger("D404", THREAD).send("hi")
        assert not adapter.streams_unavailable


async def test_where_there_is_no_stream_to_start_answers_are_edited() -> None:
    async with streaming() as (_, adapter, _):
        # Slack streams only as replies in a thread (or top level in channels).
        top_of_dm = adapter.messenger("D1", None)
        # In a channel a stream names its reader; nobody asked here yet.
        unknown_thread = adapter.messenger("C1", THREAD)
        for messenger in (top_of_dm, unknown_thread):
            assert messenger.capabilities.shows_cursor
            assert not isinstance(messenger, SlackStreamMessenger)


def test_open_streams_hand_out_only_idle_ones_not_in_use() -> None:
    streams = OpenStreams()
    streams.open("C1", "1", "a", now=0.0)
    streams.open("C1", "2", "b", now=5.0)
    streams.open("C2", "3", "c", now=0.0)
    busy = streams.get("C2", "3")
    assert busy is not None
    busy.busy = True
    assert streams.take_idle(now=10.0, idle=10.0) == [("C1", "1")]
    assert streams.get("C1", "1") is None and len(streams) == 2
    busy.busy = False
    assert streams.take_idle(now=15.0, idle=10.0) == [("C1", "2"), ("C2", "3")]
    assert len(streams) == 0
