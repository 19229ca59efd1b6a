"""DiscordAdapter against the fake Discord: in process on MockClock (REST
through ``FakeTransport``, the gateway through the fake's in-memory
sockets) where the test is about when things happen, and over real
loopback sockets for the websocket and HTTP path itself."""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio
import trio.lowlevel
from trio.testing import MockClock

from hermes_trio.config import DiscordConfig, UserId
from hermes_trio.consumers.messenger import PlatformError, RateLimited
from hermes_trio.platforms.base import InboundMessage
from hermes_trio.platforms.discord.adapter import (
    DISCORD_CAPABILITIES,
    DiscordAdapter,
    GatewayRefused,
)
from hermes_trio.platforms.discord.rest import TokenRejected
from hermes_trio.testing import FakeDiscord, FakeTransport, open_fake_discord

TOKEN = "MTAxNTU.discord-secret-token.value_XYZ"
DM = "300"
USER = "7"


def adapter_for(
    fake: FakeDiscord, client: httpx.AsyncClient, *, in_memory: bool = True, **config: Any
) -> DiscordAdapter:
    settings = DiscordConfig(
        token=config.pop("token", TOKEN),
        api_base_url=fake.base_url or "http://discord.test/api/v10",
        **config,
    )
    kwargs: dict[str, Any] = {"rng": random.Random(1)}
    if in_memory:
        kwargs["connect"] = fake.connect
    return DiscordAdapter(settings, client, **kwargs)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with open_fake_discord(TOKEN) as f:
        yield f


async def receive(
    channel: trio.MemoryReceiveChannel[InboundMessage], n: int
) -> list[InboundMessage]:
    with trio.fail_after(5):
        return [await channel.receive() for _ in range(n)]


def in_process(**kw: Any) -> tuple[FakeDiscord, httpx.AsyncClient]:
    fake = FakeDiscord(TOKEN, **kw)
    return fake, httpx.AsyncClient(transport=FakeTransport(fake.handle))


# -- over loopback -------------------------------------------------------------


async def test_a_direct_message_arrives_over_a_real_websocket(fake: FakeDiscord) -> None:
    send, recv = trio.open_memory_channel[InboundMessage](10)
    async with httpx.AsyncClient() as client, trio.open_nursery() as nursery:
        adapter = adapter_for(fake, client, in_memory=False)
        await nursery.start(adapter.run, send)
        with trio.fail_after(5):
            await fake.wait_until(lambda: fake.ready)
        pushed = fake.push_message(
            DM, USER, "hello **bot**", attachments=[("a.png", "image/png", b"PNG")]
        )
        (message,) = await receive(recv, 1)
        data = await message.attachments[0].fetch()
        message_id = await adapter.messenger(DM).send("Hi <@&1> @everyone")
        nursery.cancel_scope.cancel()
    assert message.platform == "discord" and message.chat_id == DM and message.user_id == USER
    assert message.text == "hello **bot**" and message.message_id == pushed["id"]
    assert message.user_name == "Tester" and message.thread_id is None
    assert message.sent_at is not None
    (attachment,) = message.attachments
    assert (attachment.mime_type, attachment.name, attachment.size) == ("image/png", "a.png", 3)
    assert data == b"PNG"
    (sent,) = fake.visible(DM)
    assert sent.id == message_id and sent.allowed_mentions == {"parse": []}
    identify = fake.ops(2)[0].d
    assert identify["token"] == TOKEN
    assert identify["intents"] == (1 << 9) | (1 << 12) | (1 << 15)
    assert adapter.bot_user is not None and adapter.bot_user["username"] == "hermes_test_bot"
    assert fake.connections[0].path == "/" and fake.connections[0].closed_by == "client"


async def test_a_bad_token_is_rejected_before_started_in_one_line(fake: FakeDiscord) -> None:
    send, _ = trio.open_memory_channel[InboundMessage](10)
    async with httpx.AsyncClient() as client:
        adapter = adapter_for(fake, client, token="wrong-token-wrong-token")
        with pytest.RaisesGroup(TokenRejected) as caught:
            async with trio.open_nursery() as nursery:
                await nursery.start(adapter.run, send)
    line = str(caught.value.exceptions[0])
    assert "\n" not in line and "DISCORD_BOT_TOKEN" in line
    assert "platforms.discord.token" in line and "wrong-token" not in line
    assert fake.connections == []


async def test_dropped_socket_resumes_and_replays_without_duplicates(fake: FakeDiscord) -> None:
    send, recv = trio.open_memory_channel[InboundMessage](10)
    async with httpx.AsyncClient() as client, trio.open_nursery() as nursery:
        adapter = adapter_for(fake, client, in_memory=False)
        await nursery.start(adapter.run, send)
        with trio.fail_after(5):
            await fake.wait_until(lambda: fake.ready)
        fake.push_message(DM, USER, "one")
        await receive(recv, 1)
        fake.online = False
        fake.drop_connection()
        fake.push_message(DM, USER, "two")  # while nobody is connected
        fake.replay_from = 0  # the RESUME also replays "one"
        fake.online = True
        (two,) = await receive(recv, 1)
        with trio.move_on_after(0.2):
            extra = await recv.receive()
            raise AssertionError(f"answered twice: {extra}")
        nursery.cancel_scope.cancel()
    assert two.text == "two"
    first, second = fake.connections
    assert first.closed_by == "server" and first.close_code is None
    assert second.path == "/resume" and second.resumed
    (resume,) = fake.ops(6)
    assert resume.d["session_id"] == fake.session_id and resume.d["seq"] == 2


# -- in process, on MockClock ----------------------------------------------------


async def test_heartbeats_follow_the_interval_with_a_jittered_first(
    autojump_clock: MockClock,
) -> None:
    fake, client = in_process(heartbeat_interval=40.0)
    send, _ = trio.open_memory_channel[InboundMessage](10)
    async with client, trio.open_nursery() as nursery:
        await nursery.start(adapter_for(fake, client).run, send)
        await trio.sleep(200)
        nursery.cancel_scope.cancel()
    first = random.Random(1).random() * 40.0
    times = [op.time for op in fake.ops(1)]
    assert times == pytest.approx([first + 40.0 * n for n in range(len(times))])
    assert len(times) == 5
    assert all(op.d == 1 for op in fake.ops(1))  # the READY's sequence


async def test_a_zombie_connection_is_closed_and_resumed(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="hermes_trio.platforms.discord")
    fake, client = in_process(heartbeat_interval=40.0)
    send, _ = trio.open_memory_channel[InboundMessage](10)
    adapter = adapter_for(fake, client)
    async with client, trio.open_nursery() as nursery:
        await nursery.start(adapter.run, send)
        await trio.sleep(50)
        fake.ack_heartbeats = False
        await fake.wait_until(lambda: len(fake.connections) == 2 and fake.ready)
        resumed_at = trio.current_time()
        await trio.testing.wait_all_tasks_blocked()
        assert adapter.connected
        nursery.cancel_scope.cancel()
    first = random.Random(1).random() * 40.0
    # Beats at first and first+40 are answered, the one at first+80 is not;
    # when the next is due the connection is a zombie.
    assert resumed_at == pytest.approx(first + 120.0)
    assert fake.connections[0].close_code == 4000  # closed so the session stays resumable
    assert fake.connections[1].resumed
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "zombie" in warnings[0].getMessage()
    assert any("reconnected after 0 s" in r.getMessage() for r in caplog.records)


async def test_an_outage_is_logged_once_however_many_attempts(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hermes_trio.platforms.discord")
    fake, client = in_process()
    send, recv = trio.open_memory_channel[InboundMessage](10)
    adapter = adapter_for(fake, client)
    async with client, trio.open_nursery() as nursery:
        await nursery.start(adapter.run, send)
        while not adapter.connected:
            await trio.lowlevel.checkpoint()
        caplog.clear()
        fake.online = False
        fake.drop_connection()
        await trio.sleep(100)
        fake.push_message(DM, USER, "during")
        fake.online = True
        message = await recv.receive()
        back = trio.current_time()
        while not adapter.connected:  # the replay comes before RESUMED
            await trio.lowlevel.checkpoint()
        nursery.cancel_scope.cancel()
    assert message.text == "during"
    # Reconnects at once, then after 1, 2, 4, 8, 16, 32, 60 s of failures.
    attempts = len(fake.connections)
    assert attempts == 2
    assert back == 1 + 2 + 4 + 8 + 16 + 32 + 60
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0][0] == "WARNING" and "closed" in lines[0][1]
    assert lines[1] == ("INFO", f"discord: reconnected after {back:.0f} s")


async def test_reconnect_request_resumes_quietly(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    fake, client = in_process()
    send, recv = trio.open_memory_channel[InboundMessage](10)
    async with client, trio.open_nursery() as nursery:
        await nursery.start(adapter_for(fake, client).run, send)
        await fake.wait_until(lambda: fake.ready)
        fake.reconnect()
        fake.push_message(DM, USER, "after the reconnect")
        (message,) = await receive(recv, 1)
        nursery.cancel_scope.cancel()
    assert message.text == "after the reconnect"
    assert [c.path for c in fake.connections] == ["/", "/resume"]
    assert fake.connections[0].close_code == 4000
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_invalid_session_identifies_afresh_after_a_wait(autojump_clock: MockClock) -> None:
    fake, client = in_process()
    send, _ = trio.open_memory_channel[InboundMessage](10)
    async with client, trio.open_nursery() as nursery:
        await nursery.start(adapter_for(fake, client).run, send)
        await fake.wait_until(lambda: fake.ready)
        start = trio.current_time()
        fake.invalidate_session(resumable=False)
        await fake.wait_until(lambda: len(fake.ops(2)) == 2)
        waited = trio.current_time() - start
        nursery.cancel_scope.cancel()
    assert 1.0 <= waited <= 5.0
    assert fake.ops(6) == []  # no RESUME
    assert fake.connections[1].path == "/"


async def test_resumable_invalid_session_resumes(autojump_clock: MockClock) -> None:
    fake, client = in_process()
    send, _ = trio.open_memory_channel[InboundMessage](10)
    async with client, trio.open_nursery() as nursery:
        await nursery.start(adapter_for(fake, client).run, send)
        await fake.wait_until(lambda: fake.ready)
        fake.invalidate_session(resumable=True)
        await fake.wait_until(lambda: len(fake.ops(6)) == 1 and fake.ready)
        nursery.cancel_scope.cancel()
    assert trio.current_time() == 0.0


@pytest.mark.parametrize(
    ("code", "error", "words"),
    [
        (4004, TokenRejected, "DISCORD_BOT_TOKEN"),
        (4014, GatewayRefused, "Message Content"),
        (4011, GatewayRefused, "sharding"),
        (4013, GatewayRefused, "intents"),
    ],
)
async def test_fatal_close_codes_stop_the_adapter_with_one_line(
    autojump_clock: MockClock, code: int, error: type[Exception], words: str
) -> None:
    fake, client = in_process()
    send, _ = trio.open_memory_channel[InboundMessage](10)
    async with client:
        adapter = adapter_for(fake, client)
        with pytest.RaisesGroup(error) as caught:
            async with trio.open_nursery() as nursery:
                await nursery.start(adapter.run, send)
                await fake.wait_until(lambda: fake.ready)
                fake.close_connection(code)
                await trio.sleep(3600)
    line = str(caught.value.exceptions[0])
    assert words in line and "\n" not in line
    assert len(fake.connections) == 1


async def test_the_message_content_intent_switched_off_is_explained(
    autojump_clock: MockClock,
) -> None:
    fake, client = in_process()
    fake.message_content_allowed = False
    send, _ = trio.open_memory_channel[InboundMessage](10)
    async with client:
        with pytest.RaisesGroup(pytest.RaisesExc(GatewayRefused, match="Developer Portal")):
            async with trio.open_nursery() as nursery:
                await nursery.start(adapter_for(fake, client).run, send)
                await trio.sleep(3600)


async def test_other_close_codes_resume(autojump_clock: MockClock) -> None:
    fake, client = in_process()
    send, _ = trio.open_memory_channel[InboundMessage](10)
    async with client, trio.open_nursery() as nursery:
        await nursery.start(adapter_for(fake, client).run, send)
        await fake.wait_until(lambda: fake.ready)
        fake.close_connection(4000)
        await fake.wait_until(lambda: len(fake.connections) == 2 and fake.ready)
        fake.close_connection(4009)  # session timed out: identify afresh
        await fake.wait_until(lambda: len(fake.connections) == 3 and fake.ready)
        nursery.cancel_scope.cancel()
    assert len(fake.ops(6)) == 1 and len(fake.ops(2)) == 2


async def test_discord_down_at_start_does_not_block_started(autojump_clock: MockClock) -> None:
    fake, client = in_process()
    fake.online = False
    send, _ = trio.open_memory_channel[InboundMessage](10)
    async with client, trio.open_nursery() as nursery:
        await nursery.start(adapter_for(fake, client).run, send)
        started_at = trio.current_time()
        fake.online = True
        await fake.wait_until(lambda: fake.ready)
        nursery.cancel_scope.cancel()
    assert started_at == 0.0


async def test_the_allow_list_filters_when_asked(autojump_clock: MockClock) -> None:
    fake, client = in_process()
    send, recv = trio.open_memory_channel[InboundMessage](10)
    async with client, trio.open_nursery() as nursery:
        adapter = adapter_for(fake, client, allowed_users=[UserId("8")])
        await nursery.start(adapter.run, send)
        await fake.wait_until(lambda: fake.ready)
        fake.push_message(DM, USER, "not allowed")
        fake.push_message(DM, "8", "allowed")
        (message,) = await receive(recv, 1)
        nursery.cancel_scope.cancel()
    assert message.text == "allowed"


async def test_guild_messages_need_a_mention_and_bots_are_ignored(
    autojump_clock: MockClock,
) -> None:
    fake, client = in_process()
    send, recv = trio.open_memory_channel[InboundMessage](10)
    async with client, trio.open_nursery() as nursery:
        await nursery.start(adapter_for(fake, client).run, send)
        await fake.wait_until(lambda: fake.ready)
        fake.push_message("51", USER, "chatter", guild_id="9")
        fake.push_message("51", "99", "a bot", guild_id="9", mention=True, bot_author=True)
        fake.push_message(DM, "99", "a bot in DM", bot_author=True)
        fake.push_message("51", USER, " what time is it?", guild_id="9", legacy_mention=True)
        fake.push_message(
            "51", USER, "", guild_id="9", mention=True, attachments=[("x.txt", None, b"x")]
        )
        first, second = await receive(recv, 2)
        nursery.cancel_scope.cancel()
    assert first.text == "what time is it?" and first.chat_id == "51"
    assert second.text == "" and second.attachments[0].mime_type is None


async def test_mention_only_off_answers_every_guild_message(autojump_clock: MockClock) -> None:
    fake, client = in_process()
    send, recv = trio.open_memory_channel[InboundMessage](10)
    async with client, trio.open_nursery() as nursery:
        await nursery.start(adapter_for(fake, client, mention_only=False).run, send)
        await fake.wait_until(lambda: fake.ready)
        fake.push_message("51", USER, "chatter", guild_id="9")
        (message,) = await receive(recv, 1)
        nursery.cancel_scope.cancel()
    assert message.text == "chatter"


# -- REST ------------------------------------------------------------------------


async def test_messenger_calls_and_capabilities(autojump_clock: MockClock) -> None:
    fake, client = in_process()
    async with client:
        chat = adapter_for(fake, client).messenger(DM)
        message_id = await chat.send("first")
        await chat.edit(message_id, "second")
        await chat.edit(message_id, "second")  # identical: fine
        await chat.typing()
        await chat.delete(message_id)
        await chat.delete(message_id)  # already gone: fine
        with pytest.raises(PlatformError, match="50035"):
            await chat.send("x" * 2001)
    (message,) = fake.messages[DM]
    assert message.history == ["first", "second"] and message.deleted
    assert fake.typing == [(DM, 0.0)]
    assert DISCORD_CAPABILITIES.max_length == 2000
    assert DISCORD_CAPABILITIES.length_unit == "chars" and DISCORD_CAPABILITIES.can_edit
    assert await_send_limit_ok()


def await_send_limit_ok() -> bool:
    # 2000 code points of a character outside the BMP are 4000 UTF-16 units;
    # Discord (and the fake) accept them.
    return len("😀" * 2000) == 2000


async def test_emoji_answer_of_2000_code_points_is_accepted(autojump_clock: MockClock) -> None:
    fake, client = in_process()
    async with client:
        await adapter_for(fake, client).messenger(DM).send("😀" * 2000)
    assert fake.texts(DM) == ["😀" * 2000]


async def test_an_empty_bucket_refuses_before_calling(autojump_clock: MockClock) -> None:
    fake, client = in_process(bucket_limit=2, bucket_window=5.0)
    async with client:
        chat = adapter_for(fake, client).messenger(DM)
        message_id = await chat.send("a")
        await chat.edit(message_id, "b")
        await chat.edit(message_id, "c")
        with pytest.raises(RateLimited) as caught:
            await chat.edit(message_id, "d")
        calls = len(fake.calls)
        other = adapter_for(fake, client)  # its own bookkeeping
        other_chat = other.messenger("301")
        await other_chat.send("another channel is not limited")
        await trio.sleep(caught.value.retry_after)
        await chat.edit(message_id, "d")
    assert caught.value.retry_after == pytest.approx(5.0)
    assert calls == 3  # the refused edit never went out
    assert fake.texts(DM) == ["d"]
    assert all(c.status != 429 for c in fake.calls)


async def test_a_429_raises_rate_limited_and_blocks_the_route(autojump_clock: MockClock) -> None:
    fake, client = in_process()
    fake.rate_limit_next("PATCH", retry_after=2.5)
    async with client:
        chat = adapter_for(fake, client).messenger(DM)
        message_id = await chat.send("a")
        with pytest.raises(RateLimited) as first:
            await chat.edit(message_id, "b")
        with pytest.raises(RateLimited) as second:
            await chat.edit(message_id, "b")
        await chat.send("sending is another route")
        await trio.sleep(2.5)
        await chat.edit(message_id, "b")
    assert first.value.retry_after == 2.5 and second.value.retry_after == 2.5
    assert len(fake.calls_to("PATCH")) == 2


async def test_a_global_429_blocks_every_route(autojump_clock: MockClock) -> None:
    fake, client = in_process()
    fake.rate_limit_next("POST", r"/channels/\d+/messages", retry_after=3.0, is_global=True)
    async with client:
        adapter = adapter_for(fake, client)
        with pytest.raises(RateLimited, match="global"):
            await adapter.messenger(DM).send("a")
        with pytest.raises(RateLimited):
            await adapter.messenger("999").typing()
        await trio.sleep(3.0)
        await adapter.messenger("999").typing()
    assert len(fake.calls) == 2


async def test_rest_401_is_token_rejected(autojump_clock: MockClock) -> None:
    fake, client = in_process()
    async with client:
        chat = adapter_for(fake, client, token="another-token-entirely").messenger(DM)
        with pytest.raises(TokenRejected, match="DISCORD_BOT_TOKEN"):
            await chat.send("hi")


async def test_an_attachment_that_is_gone_raises_platform_error(fake: FakeDiscord) -> None:
    async with httpx.AsyncClient() as client:
        adapter = adapter_for(fake, client)
        fetch = adapter.rest.fetcher(fake.files_url + "/attachments/1/2/x.png")
        with pytest.raises(PlatformError, match="404"):
            await fetch()


def test_no_token_names_the_setting() -> None:
    with pytest.raises(PlatformError, match="DISCORD_BOT_TOKEN"):
        DiscordAdapter(DiscordConfig(), httpx.AsyncClient())
