"""The Slack adapter against the fake Slack on loopback: Socket Mode in,
Web API out, both sending transports."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import trio
import trio_websocket

from hermes_trio.config import SlackConfig
from hermes_trio.consumers.messenger import PlatformError, RateLimited
from hermes_trio.platforms.base import InboundMessage
from hermes_trio.platforms.slack.adapter import SlackAdapter
from hermes_trio.platforms.slack.api import SlackTokenRejected
from hermes_trio.testing.fake_slack import FakeSlack, open_fake_slack


@asynccontextmanager
async def running(
    fake: FakeSlack, *, filter_users: bool = True, **settings: Any
) -> AsyncIterator[tuple[SlackAdapter, trio.MemoryReceiveChannel[InboundMessage]]]:
    config = SlackConfig(
        bot_token=fake.bot_token,
        app_token=fake.app_token,
        api_base_url=fake.base_url,
        **settings,
    )
    async with httpx.AsyncClient() as client:
        adapter = SlackAdapter(
            config, client, backoff_initial=0.05, backoff_max=0.2, filter_users=filter_users
        )
        send, receive = trio.open_memory_channel[InboundMessage](16)
        async with trio.open_nursery() as nursery:
            await nursery.start(adapter.run, send)
            with trio.fail_after(5):
                await fake.wait_until(lambda: fake.connections >= 1 and bool(fake._sockets))
            yield adapter, receive
            nursery.cancel_scope.cancel()


async def next_message(receive: trio.MemoryReceiveChannel[InboundMessage]) -> InboundMessage:
    with trio.fail_after(5):
        return await receive.receive()


async def nothing_more(receive: trio.MemoryReceiveChannel[InboundMessage]) -> None:
    with trio.move_on_after(0.3):
        extra = await receive.receive()
        pytest.fail(f"answered twice: {extra}")


async def test_a_direct_message_arrives_acknowledged_at_once() -> None:
    async with open_fake_slack() as fake, running(fake) as (adapter, receive):
        envelope = fake.push_message("D1", "U7", "hello bot")
        message = await next_message(receive)
        assert (message.chat_id, message.user_id, message.text) == ("D1", "U7", "hello bot")
        assert message.thread_id is None  # top level of a DM: answered at the top level
        assert (
            message.sent_at is not None and message.message_id == envelope["payload"]["event"]["ts"]
        )
        with trio.fail_after(5):
            await fake.wait_until(lambda: bool(fake.acks))
        assert [envelope_id for envelope_id, _ in fake.acks] == ["env-1"]


async def test_a_channel_mention_comes_once_in_its_thread_without_the_mention() -> None:
    async with open_fake_slack() as fake, running(fake) as (adapter, receive):
        fake.push_mention("C1", "U7", "what's up?")
        message = await next_message(receive)
        await nothing_more(receive)
        assert message.text == "what's up?" and message.chat_id == "C1"
        # The answer starts a thread under the question.
        assert message.thread_id == message.message_id
        # Both envelopes (message and app_mention) were acknowledged.
        with trio.fail_after(5):
            await fake.wait_until(lambda: len(fake.acks) == 2)


async def test_a_redelivered_envelope_is_never_answered_twice() -> None:
    async with open_fake_slack() as fake, running(fake) as (adapter, receive):
        fake.push_message("D1", "U7", "once")
        await next_message(receive)
        fake.redeliver()
        fake.redeliver()
        await nothing_more(receive)


async def test_channel_chatter_bots_and_edits_are_ignored() -> None:
    async with open_fake_slack() as fake, running(fake) as (adapter, receive):
        fake.push_message("C1", "U7", "just talking")  # no mention, mention_only
        fake.push_event(
            {
                "type": "message",
                "channel": "D1",
                "user": "U9",
                "text": "x",
                "ts": fake.new_ts(),
                "bot_id": "B9",
            }
        )
        fake.push_event(
            {"type": "message", "subtype": "message_changed", "channel": "D1", "ts": fake.new_ts()}
        )
        fake.push_message("D1", fake.bot_user, "my own words")
        fake.push_message("D1", "U7", "a real question")
        message = await next_message(receive)
        assert message.text == "a real question"
        await nothing_more(receive)


async def test_every_channel_message_without_mention_only() -> None:
    async with open_fake_slack() as fake, running(fake, mention_only=False) as (_, receive):
        fake.push_message("C1", "U7", "anyone?", thread_ts="1700000000.000001")
        message = await next_message(receive)
        assert message.thread_id == "1700000000.000001"


async def test_disconnect_and_a_dropped_socket_reconnect_without_losing_a_question(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="hermes_trio.platforms.slack")
    async with open_fake_slack() as fake, running(fake) as (adapter, receive):
        fake.disconnect()
        with trio.fail_after(5):
            await fake.wait_until(lambda: fake.connections >= 2 and bool(fake._sockets))
        fake.push_message("D1", "U7", "after refresh")
        assert (await next_message(receive)).text == "after refresh"
        fake.online = False
        fake.drop()
        # Pushed while we are away: delivered on the next connection.
        with trio.fail_after(5):
            await fake.wait_until(lambda: not fake._sockets)
        fake.push_message("D1", "U7", "while away")
        await trio.sleep(0.5)
        fake.online = True
        assert (await next_message(receive)).text == "while away"
        await nothing_more(receive)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "reconnecting with backoff" in warnings[0]
    assert any("connected again after" in line for line in caplog.messages)


async def test_a_rejected_token_is_one_line_naming_the_setting() -> None:
    async with open_fake_slack() as fake, httpx.AsyncClient() as client:
        for config, setting in (
            (
                SlackConfig(
                    bot_token="xoxb-wrong", app_token=fake.app_token, api_base_url=fake.base_url
                ),
                "SLACK_BOT_TOKEN",
            ),
            (
                SlackConfig(
                    bot_token=fake.bot_token, app_token="xapp-wrong", api_base_url=fake.base_url
                ),
                "SLACK_APP_TOKEN",
            ),
        ):
            adapter = SlackAdapter(config, client)
            send, _ = trio.open_memory_channel[InboundMessage](1)
            with pytest.raises(SlackTokenRejected) as caught:
                await adapter.run(send)
            assert setting in str(caught.value) and "\n" not in str(caught.value)
            assert "wrong" not in str(caught.value)


def test_missing_tokens_name_the_setting() -> None:
    with pytest.raises(PlatformError, match="SLACK_APP_TOKEN"):
        SlackAdapter(SlackConfig(bot_token="xoxb-1"), httpx.AsyncClient())


async def test_edit_transport_posts_in_the_thread_updates_and_converts_markdown() -> None:
    async with open_fake_slack() as fake, running(fake) as (adapter, _):
        messenger = adapter.messenger("C1", "1700000000.000100")
        ts = await messenger.send("**Hello** ▌")
        await messenger.edit(ts, "**Hello** [world](https://example.com) & more", final=True)
        await messenger.typing()  # bots have none: nothing is called
        (message,) = fake.visible("C1", "1700000000.000100")
        assert message.text == "*Hello* <https://example.com|world> &amp; more"
        assert [c.method for c in fake.calls if c.method.startswith("chat.")] == [
            "chat.postMessage",
            "chat.update",
        ]
        fake.fail_next("chat.update", retry_after=7)
        with pytest.raises(RateLimited) as limited:
            await messenger.edit(ts, "again")
        assert limited.value.retry_after == 7
        await messenger.delete(ts)
        await messenger.delete(ts)  # already gone is fine


async def test_stream_transport_starts_appends_and_stops() -> None:
    async with open_fake_slack() as fake, running(fake, transport="stream") as (adapter, receive):
        fake.push_mention("C1", "U7", "stream it")
        question = await next_message(receive)
        messenger = adapter.messenger("C1", question.thread_id)
        assert not messenger.capabilities.shows_cursor
        ts = await messenger.send("Hello")
        await messenger.edit(ts, "Hello **world**")
        await messenger.edit(ts, "Hello **world**, done.", final=True)
        (message,) = fake.visible("C1")
        assert message.streamed and not message.streaming
        assert message.text == "Hello **world**, done."  # Markdown as it is: Slack renders it
        start, *appends = [c for c in fake.calls if "Stream" in c.method]
        assert start.params["recipient_user_id"] == "U7"
        assert start.params["recipient_team_id"] == fake.team
        # The last words go with the stop: one call fewer.
        assert [c.method for c in appends] == ["chat.appendStream", "chat.stopStream"]
        assert [c.params.get("markdown_text") for c in appends] == [" **world**", ", done."]


async def test_stream_transport_falls_back_to_edits_where_not_offered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with (
        open_fake_slack(streams=False) as fake,
        running(fake, transport="stream") as (
            adapter,
            _,
        ),
    ):
        messenger = adapter.messenger("D1", "1700000000.000100")
        ts = await messenger.send("**first**")
        await messenger.edit(ts, "**first** and more", final=True)
        second = adapter.messenger("D1", "1700000000.000100")
        assert second.capabilities.shows_cursor  # edits from now on
        (message,) = fake.visible("D1")
        assert message.text == "*first* and more" and not message.streamed
    assert sum("refused the streaming methods" in line for line in caplog.messages) == 1


async def test_an_image_file_is_fetched_with_the_bot_token() -> None:
    async with open_fake_slack() as fake, running(fake) as (adapter, receive):
        photo = fake.add_file("cat.png", "image/png", b"\x89PNG fake")
        fake.push_message("D1", "U7", "", files=[photo])
        message = await next_message(receive)
        (attachment,) = message.attachments
        assert (attachment.mime_type, attachment.name, attachment.size) == (
            "image/png",
            "cat.png",
            9,
        )
        assert await attachment.fetch() == b"\x89PNG fake"
        assert fake.downloads == [photo["id"]]


async def test_a_silent_connection_is_replaced_after_an_unanswered_ping() -> None:
    async with open_fake_slack() as fake, httpx.AsyncClient() as client:
        config = SlackConfig(
            bot_token=fake.bot_token, app_token=fake.app_token, api_base_url=fake.base_url
        )
        adapter = SlackAdapter(
            config,
            client,
            ping_interval=0.1,
            ping_timeout=0.1,
            close_timeout=0.1,
            backoff_initial=0.05,
        )
        send, receive = trio.open_memory_channel[InboundMessage](4)
        async with trio.open_nursery() as nursery:
            await nursery.start(adapter.run, send)
            with trio.fail_after(5):
                await fake.wait_until(lambda: bool(fake._sockets))
            await trio.sleep(0.35)  # quiet but alive: pings are answered
            assert fake.connections == 1
            fake.stall()
            began = trio.current_time()
            with trio.fail_after(5):
                await fake.wait_until(lambda: bool(fake._sockets))
            assert fake.connections == 2 and trio.current_time() - began < 1
            fake.push_message("D1", "U7", "are you there?")
            assert (await next_message(receive)).text == "are you there?"
            nursery.cancel_scope.cancel()


async def test_socket_mode_turned_off_is_retried_with_backoff() -> None:
    async with open_fake_slack() as fake, running(fake) as (adapter, _):
        for _ in range(3):
            fake.disconnect("link_disabled")
            count = fake.connections
            with trio.fail_after(5):
                await fake.wait_until(lambda n=count: fake.connections > n and bool(fake._sockets))
        opens = [c.time for c in fake.calls_to("apps.connections.open")]
        # Not at once, as after a refresh: the backoff (0.05 s, then 0.1 s) waits first.
        assert opens[-1] - opens[-2] >= 0.05


async def test_an_app_token_without_connections_write_names_the_setting_and_scope() -> None:
    async with open_fake_slack() as fake, httpx.AsyncClient() as client:
        fake.fail_next("apps.connections.open", "missing_scope", needed="connections:write")
        config = SlackConfig(
            bot_token=fake.bot_token, app_token=fake.app_token, api_base_url=fake.base_url
        )
        send, _ = trio.open_memory_channel[InboundMessage](1)
        with pytest.raises(SlackTokenRejected) as caught:
            await SlackAdapter(config, client).run(send)
        assert "SLACK_APP_TOKEN" in str(caught.value)
        assert "needs connections:write" in str(caught.value)


async def test_the_fake_redelivers_what_is_not_acknowledged_in_time() -> None:
    async with open_fake_slack(redeliver_after=0.1) as fake:
        async with trio_websocket.open_websocket_url(fake.socket_url + "/link/") as socket:
            assert json.loads(await socket.get_message())["type"] == "hello"
            fake.push_message("D1", "U7", "slow")
            first = json.loads(await socket.get_message())
            with trio.fail_after(2):
                again = json.loads(await socket.get_message())
            assert again["payload"]["event_id"] == first["payload"]["event_id"]
            assert (first["retry_attempt"], again["retry_attempt"]) == (0, 1)
            assert again["retry_reason"] == "timeout"
            await socket.send_message(json.dumps({"envelope_id": again["envelope_id"]}))
            with trio.move_on_after(0.3):
                extra = await socket.get_message()
                pytest.fail(f"sent again after the ack: {extra}")


async def test_an_adapter_that_acks_at_once_gets_nothing_twice() -> None:
    async with open_fake_slack(redeliver_after=0.2) as fake, running(fake) as (_, receive):
        fake.push_message("D1", "U7", "quick")
        await next_message(receive)
        await trio.sleep(0.3)
        assert [e for e, _ in fake.acks] == ["env-1"]
        await nothing_more(receive)


async def test_a_thread_goes_on_without_mentions_for_allowed_users_only() -> None:
    async with (
        open_fake_slack() as fake,
        # As under the gateway, which refuses strangers' mentions by itself.
        running(fake, allowed_users=["U7", "U8"], filter_users=False) as (_, receive),
    ):
        first = fake.push_mention("C1", "U7", "start")
        thread = first["payload"]["event"]["ts"]
        assert (await next_message(receive)).thread_id == thread
        fake.push_message("C1", "U9", "chatting with a colleague", thread_ts=thread)
        fake.push_message("C1", "U8", "and my question", thread_ts=thread)
        follow_up = await next_message(receive)
        assert (follow_up.user_id, follow_up.text, follow_up.thread_id) == (
            "U8",
            "and my question",
            thread,
        )
        await nothing_more(receive)


async def test_every_channel_message_only_from_allowed_users_under_the_gateway() -> None:
    async with (
        open_fake_slack() as fake,
        running(fake, allowed_users=["U7"], mention_only=False, filter_users=False) as (
            _,
            receive,
        ),
    ):
        fake.push_message("C1", "U9", "lunch anyone?")  # not to the bot: no refusal
        fake.push_mention("C1", "U9", "who are you?")  # to the bot: the gateway refuses
        fake.push_message("C1", "U7", "status?")
        assert [(await next_message(receive)).text for _ in range(2)] == [
            "who are you?",
            "status?",
        ]
        await nothing_more(receive)
