"""TelegramAdapter against the fake Bot API over real loopback sockets, and
in process on MockClock where the test is about when things happen
(long polls, backoff, retry_after)."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
import trio
import trio.testing
from trio.testing import MockClock

from hermes_trio.config import TelegramConfig
from hermes_trio.consumers.messenger import PlatformError, RateLimited
from hermes_trio.platforms.base import InboundMessage
from hermes_trio.platforms.telegram.adapter import TelegramAdapter, TokenRejected
from hermes_trio.testing import FakeTelegram, FakeTransport, open_fake_telegram

TOKEN = "424242:AAH-secret_token_value_XYZ"


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as c:
        yield c


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with open_fake_telegram(TOKEN) as f:
        yield f


def make_adapter(fake: FakeTelegram, client: httpx.AsyncClient, **kw: object) -> TelegramAdapter:
    config = TelegramConfig(
        token=kw.pop("token", TOKEN),  # type: ignore[arg-type]
        api_base_url=fake.base_url,
        poll_timeout=kw.pop("poll_timeout", 2),  # type: ignore[arg-type]
        allowed_users=kw.pop("allowed_users", []),  # type: ignore[arg-type]
    )
    return TelegramAdapter(config, client, backoff_initial=0.01, backoff_max=0.05, **kw)  # type: ignore[arg-type]


def in_process_adapter(
    fake: FakeTelegram, **kw: object
) -> tuple[TelegramAdapter, httpx.AsyncClient]:
    """An adapter reaching ``fake`` without a socket; backoff 1 s doubling to 4 s."""
    client = httpx.AsyncClient(transport=FakeTransport(fake.handle))
    config = TelegramConfig(
        token=TOKEN,
        api_base_url="http://telegram.test",
        poll_timeout=kw.pop("poll_timeout", 30),  # type: ignore[arg-type]
    )
    return TelegramAdapter(config, client, backoff_initial=1.0, backoff_max=4.0), client


async def receive(
    channel: trio.MemoryReceiveChannel[InboundMessage], n: int
) -> list[InboundMessage]:
    with trio.fail_after(5):
        return [await channel.receive() for _ in range(n)]


async def test_poll_delivers_text_messages(fake: FakeTelegram, client: httpx.AsyncClient) -> None:
    adapter = make_adapter(fake, client)
    send, recv = trio.open_memory_channel[InboundMessage](10)
    update = fake.push_message(chat_id=-100123, user_id=7, text="hello bot", user_name="alice")
    async with trio.open_nursery() as nursery:
        await nursery.start(adapter.run, send)
        (msg,) = await receive(recv, 1)
        nursery.cancel_scope.cancel()
    assert msg == InboundMessage(
        platform="telegram",
        chat_id="-100123",
        user_id="7",
        text="hello bot",
        message_id="1",
        user_name="alice",
        sent_at=float(update["message"]["date"]),
    )
    call = fake.calls_to("getUpdates")[0]
    assert call.params["allowed_updates"] == ["message", "callback_query"]
    assert call.params["timeout"] == 2


async def test_long_poll_waits_for_a_message(autojump_clock: MockClock) -> None:
    fake = FakeTelegram(TOKEN)
    adapter, client = in_process_adapter(fake, poll_timeout=30)
    send, recv = trio.open_memory_channel[InboundMessage](10)
    async with client, trio.open_nursery() as nursery:
        await nursery.start(adapter.run, send)
        await trio.sleep(12)
        fake.push_message(1, 2, "late")
        (msg,) = await receive(recv, 1)
        arrived = trio.current_time()
        await trio.sleep(100)
        nursery.cancel_scope.cancel()
    assert msg.text == "late" and arrived == 12.0
    polls = fake.calls_to("getUpdates")
    # Answered at once by the poll that was already waiting, not by a new
    # one; then each empty poll lasts its whole 30 s timeout.
    assert polls[0].time == 0.0 and polls[0].response["result"][0]["message"]["text"] == "late"
    assert [c.time for c in polls[1:]] == [12.0, 42.0, 72.0, 102.0]
    assert all(c.params["timeout"] == 30 for c in polls)


async def test_offsets_mean_no_update_is_handled_twice_even_across_restarts(
    fake: FakeTelegram, client: httpx.AsyncClient
) -> None:
    adapter = make_adapter(fake, client)
    send, recv = trio.open_memory_channel[InboundMessage](10)
    first = fake.push_message(1, 2, "one")
    fake.push_message(1, 2, "two")
    async with trio.open_nursery() as nursery:
        await nursery.start(adapter.run, send)
        got = await receive(recv, 2)
        nursery.cancel_scope.cancel()
    assert [m.text for m in got] == ["one", "two"]
    assert adapter.offset == first["update_id"] + 2

    fake.push_message(1, 2, "three")
    async with trio.open_nursery() as nursery:
        await nursery.start(adapter.run, send)
        got = await receive(recv, 1)
        # Let it poll again: nothing old comes back.
        with trio.fail_after(5):
            await fake.wait_until(lambda: fake.confirmed_offset == first["update_id"] + 3)
        # Everything is confirmed: no poll can hand an old update back.
        assert fake.updates == []
        nursery.cancel_scope.cancel()
    assert [m.text for m in got] == ["three"]
    assert recv.statistics().current_buffer_used == 0
    offsets = [c.params.get("offset") for c in fake.calls_to("getUpdates")]
    assert offsets[0] is None
    assert first["update_id"] + 2 in offsets and first["update_id"] + 3 in offsets


async def test_stopping_confirms_handled_updates_so_a_new_process_skips_them(
    fake: FakeTelegram, client: httpx.AsyncClient
) -> None:
    # Room for one message: the adapter hands over "one" and is stopped while
    # waiting to hand over "two", before any later poll could confirm "one".
    send, recv = trio.open_memory_channel[InboundMessage](1)
    first = fake.push_message(1, 2, "one")
    fake.push_message(1, 2, "two")
    async with trio.open_nursery() as nursery:
        await nursery.start(make_adapter(fake, client).run, send)
        with trio.fail_after(5):
            await trio.testing.wait_all_tasks_blocked()
        assert recv.statistics().tasks_waiting_send == 1
        nursery.cancel_scope.cancel()
    assert fake.confirmed_offset == first["update_id"] + 1
    assert [m.text for m in await receive(recv, 1)] == ["one"]

    # A new process starts without an offset.
    async with trio.open_nursery() as nursery:
        await nursery.start(make_adapter(fake, client).run, send)
        got = await receive(recv, 1)
        nursery.cancel_scope.cancel()
    assert [m.text for m in got] == ["two"]


async def test_non_text_updates_and_disallowed_users_are_skipped(
    fake: FakeTelegram, client: httpx.AsyncClient
) -> None:
    adapter = make_adapter(fake, client, allowed_users=[7])
    send, recv = trio.open_memory_channel[InboundMessage](10)
    fake.push_update(
        {"message": {"message_id": 5, "chat": {"id": 1}, "from": {"id": 7}, "photo": []}}
    )
    fake.push_message(1, 8, "stranger")
    fake.push_message(1, 7, "friend")
    async with trio.open_nursery() as nursery:
        await nursery.start(adapter.run, send)
        got = await receive(recv, 1)
        nursery.cancel_scope.cancel()
    assert [m.text for m in got] == ["friend"]
    assert adapter.offset == 4


async def test_poll_errors_are_retried_with_backoff(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hermes_trio.platforms.telegram")
    fake = FakeTelegram(TOKEN)
    adapter, client = in_process_adapter(fake)
    send, recv = trio.open_memory_channel[InboundMessage](10)
    fake.fail_next("getMe", 500, "Internal Server Error")
    fake.fail_next("getUpdates", 502, "Bad Gateway", times=2)
    fake.fail_next(
        "getUpdates", 429, "Too Many Requests: retry after 5", parameters={"retry_after": 5}
    )
    fake.fail_next("getUpdates", 502, "Bad Gateway")
    fake.push_message(1, 2, "eventually")
    async with client, trio.open_nursery() as nursery:
        # Telegram down at startup does not hold up whoever starts the adapter.
        await nursery.start(adapter.run, send)
        assert trio.current_time() == 0.0
        msg = await recv.receive()
        nursery.cancel_scope.cancel()
    assert msg.text == "eventually"
    polls = [(c.time, c.status) for c in fake.calls_to("getUpdates")]
    # Backoff 1 s, then 2 s; a 429 waits its retry_after and does not grow
    # the backoff; the next failure waits 4 s; a success resets it.
    assert polls[:5] == [(0.0, 502), (1.0, 502), (3.0, 429), (8.0, 502), (12.0, 200)]
    # One outage, told once when it began and once when it ended; no line per retry.
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    failed = [line for line in warnings if "polling failed" in line]
    assert len(failed) == 1 and "retrying with backoff" in failed[0]
    assert "telegram: polling works again after 12 s" in caplog.messages


async def test_unreachable_api_at_startup_does_not_block_start(autojump_clock: MockClock) -> None:
    attempts: list[tuple[float, str]] = []

    def unreachable(request: httpx.Request) -> httpx.Response:
        attempts.append((trio.current_time(), request.url.path.rsplit("/", 1)[-1]))
        raise httpx.ConnectError("connection refused", request=request)

    config = TelegramConfig(token=TOKEN, api_base_url="http://telegram.test")
    async with httpx.AsyncClient(transport=httpx.MockTransport(unreachable)) as client:
        adapter = TelegramAdapter(config, client, backoff_initial=1.0, backoff_max=4.0)
        send, _recv = trio.open_memory_channel[InboundMessage](1)
        async with trio.open_nursery() as nursery:
            await nursery.start(adapter.run, send)
            assert trio.current_time() == 0.0
            await trio.sleep(20)
            nursery.cancel_scope.cancel()
    # Failed polls back off 1, 2, 4, 4, ... s and never crash the adapter.
    assert attempts == [(0.0, "getMe")] + [
        (t, "getUpdates") for t in (0.0, 1.0, 3.0, 7.0, 11.0, 15.0, 19.0)
    ]


async def test_bad_token_is_a_clear_error_without_the_token(
    fake: FakeTelegram, client: httpx.AsyncClient
) -> None:
    wrong = "999:WRONG-token-value"
    adapter = make_adapter(fake, client, token=wrong)
    send, _recv = trio.open_memory_channel[InboundMessage](1)
    with trio.fail_after(5), pytest.raises(TokenRejected) as info:
        await adapter.run(send)
    assert "token was rejected" in str(info.value)
    assert wrong not in str(info.value)
    with pytest.raises(TokenRejected):
        await adapter.messenger("1").send("hi")


async def test_malformed_token_404_is_fatal_at_start(client: httpx.AsyncClient) -> None:
    async with open_fake_telegram(TOKEN) as fake:
        # Real Telegram answers 404 for a token it cannot even parse.
        fake.fail_next("getMe", 404, "Not Found")
        adapter = make_adapter(fake, client)
        send, _recv = trio.open_memory_channel[InboundMessage](1)
        with trio.fail_after(5), pytest.raises(TokenRejected, match="404"):
            await adapter.run(send)


# -- sending ----------------------------------------------------------------


async def test_send_edit_not_modified_and_finalise(
    fake: FakeTelegram, client: httpx.AsyncClient
) -> None:
    m = make_adapter(fake, client).messenger("42")
    assert m.capabilities.can_edit and m.capabilities.max_length == 4096
    assert m.capabilities.length_unit == "utf16"
    with trio.fail_after(5):
        mid = await m.send("Hello")
        await m.edit(mid, "Hello **wor")
        await m.edit(mid, "Hello **world**")
        await m.edit(mid, "Hello **world**")  # "not modified" is success
        await m.edit(mid, "Hello **world**!")
    (msg,) = fake.visible(42)
    assert str(msg.message_id) == mid
    assert msg.text == "Hello world!"
    assert msg.entities == ({"type": "bold", "offset": 6, "length": 5},)
    assert msg.history == ["Hello", "Hello **wor", "Hello world", "Hello world!"]
    edits = fake.calls_to("editMessageText")
    assert [c.status for c in edits] == [200, 200, 400, 200]
    assert "message is not modified" in edits[2].response["description"]
    assert all(c.params["parse_mode"] == "MarkdownV2" for c in edits)


async def test_edit_rate_limit_raises_rate_limited(client: httpx.AsyncClient) -> None:
    async with open_fake_telegram(TOKEN, edit_limit=2, edit_window=30) as fake:
        m = make_adapter(fake, client).messenger("1")
        with trio.fail_after(5):
            mid = await m.send("a")
            await m.edit(mid, "ab")
            await m.edit(mid, "abc")
            with pytest.raises(RateLimited) as info:
                await m.edit(mid, "abcd")
    assert 1 <= info.value.retry_after <= 30
    assert fake.texts(1) == ["abc"]
    assert fake.calls_to("editMessageText")[-1].response["parameters"]["retry_after"] >= 1


async def test_refused_markup_is_resent_as_plain_text(
    fake: FakeTelegram, client: httpx.AsyncClient
) -> None:
    m = make_adapter(fake, client).messenger("5")
    fake.fail_next(
        "sendMessage",
        400,
        "Bad Request: can't parse entities: Character '.' is reserved and must be escaped "
        "with the preceding '\\'",
    )
    with trio.fail_after(5):
        mid = await m.send("Total: **3.5**")
    first, second = fake.calls_to("sendMessage")
    assert first.params["parse_mode"] == "MarkdownV2" and first.status == 400
    assert "parse_mode" not in second.params
    assert second.params["text"] == "Total: **3.5**"
    assert fake.texts(5) == ["Total: **3.5**"]
    assert mid == str(fake.visible(5)[0].message_id)

    fake.fail_next("editMessageText", 400, "Bad Request: can't parse entities: oops")
    with trio.fail_after(5):
        await m.edit(mid, "Total: **4.5**")
    assert fake.texts(5) == ["Total: **4.5**"]


async def test_markup_real_telegram_would_reject_is_escaped(
    fake: FakeTelegram, client: httpx.AsyncClient
) -> None:
    m = make_adapter(fake, client).messenger("5")
    tricky = "Costs: 1.5-2 (approx)! a_b *x* [y](https://e.com/(z)) `c\\` # > | {}"
    with trio.fail_after(5):
        await m.send(tricky)
    assert [c.status for c in fake.calls_to("sendMessage")] == [200]


async def test_too_long_is_an_error(fake: FakeTelegram, client: httpx.AsyncClient) -> None:
    m = make_adapter(fake, client).messenger("9")
    with trio.fail_after(5):
        await m.send("😀" * 2048)  # 4096 UTF-16 code units: fits
        with pytest.raises(PlatformError, match="message is too long"):
            await m.send("😀" * 2048 + "x")
    assert len(fake.visible(9)) == 1


async def test_typing_and_delete(fake: FakeTelegram, client: httpx.AsyncClient) -> None:
    m = make_adapter(fake, client).messenger("3")
    with trio.fail_after(5):
        await m.typing()
        mid = await m.send("temp")
        await m.delete(mid)
        await m.delete(mid)  # already gone: fine
        with pytest.raises(PlatformError, match="message to edit not found"):
            await m.edit(mid, "again")
    assert [(chat, action) for chat, action, _ in fake.chat_actions] == [("3", "typing")]
    assert fake.texts(3) == []
    assert fake.messages["3"][0].deleted


async def test_token_never_logged_or_in_errors(
    fake: FakeTelegram, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    adapter = make_adapter(fake, client)
    m = adapter.messenger("1")
    errors: list[str] = []
    with trio.fail_after(5):
        await m.send("hi")
        fake.fail_next("sendMessage", 400, "Bad Request: can't parse entities: x")
        await m.send("fallback")
        fake.fail_next("sendMessage", 500, "Internal Server Error")
        with pytest.raises(PlatformError) as info:
            await m.send("x")
        errors.append(str(info.value))

    # Network failure: httpx errors may carry the URL.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = TelegramAdapter(
        TelegramConfig(token=TOKEN, api_base_url=f"http://127.0.0.1:{port}"), client
    )
    with trio.fail_after(5), pytest.raises(PlatformError) as info:
        await dead.messenger("1").send("x")
    errors.append(str(info.value))
    errors.append(repr(info.value))
    bad_url = TelegramAdapter(TelegramConfig(token=TOKEN, api_base_url="ftp://nowhere"), client)
    with trio.fail_after(5), pytest.raises(PlatformError) as info:
        await bad_url.messenger("1").send("x")
    errors.append(str(info.value))

    assert "network error" in errors[1]
    for text in errors:
        assert TOKEN not in text
    assert caplog.records, "expected httpx request logging to be captured"
    assert "HTTP Request" in caplog.text
    assert TOKEN not in caplog.text
    assert TOKEN.split(":")[1] not in caplog.text
    assert TOKEN not in repr(adapter)


def test_media_become_attachments_and_only_topics_are_threads() -> None:
    from hermes_trio.platforms.telegram.adapter import _to_inbound

    def fetcher(file_id: str) -> Callable[[], Awaitable[bytes]]:
        async def fetch() -> bytes:
            return file_id.encode()

        return fetch

    base = {"message_id": 5, "chat": {"id": -100}, "from": {"id": 7}, "date": 1_700_000_000}
    voice = _to_inbound({**base, "voice": {"file_id": "v1", "file_size": 10}}, fetcher)
    assert voice is not None and voice.text == ""
    (attachment,) = voice.attachments
    assert (attachment.mime_type, attachment.name, attachment.size) == ("audio/ogg", "voice", 10)
    assert voice.sent_at == 1_700_000_000.0 and voice.thread_id is None
    sticker = _to_inbound({**base, "sticker": {"file_id": "s", "is_animated": True}}, fetcher)
    assert sticker is not None and sticker.attachments[0].mime_type == "application/x-tgsticker"
    # A reply in an ordinary group has a message_thread_id, but no topic to send to.
    reply = _to_inbound({**base, "text": "hi", "message_thread_id": 3}, fetcher)
    assert reply is not None and reply.thread_id is None
    topic = {**base, "text": "hi", "message_thread_id": 3, "is_topic_message": True}
    in_topic = _to_inbound(topic, fetcher)
    assert in_topic is not None and in_topic.thread_id == "3"
    # A service message (someone joined) has neither text nor media: nothing to answer.
    assert _to_inbound({**base, "new_chat_members": [{"id": 9}]}, fetcher) is None


async def test_a_press_from_outside_the_allow_list_still_reaches_the_gateway(
    fake: FakeTelegram, client: httpx.AsyncClient
) -> None:
    """An approver need not be allowed to talk to the bot: the approval
    decides whether a press counts (and acknowledges it either way), so the
    adapter passes every press on; messages stay filtered."""
    adapter = make_adapter(fake, client, allowed_users=[7])
    send, recv = trio.open_memory_channel[InboundMessage](10)
    query = {
        "id": "q1",
        "from": {"id": 8, "username": "approver"},
        "message": {"message_id": 3, "chat": {"id": 7, "type": "private"}},
        "data": "y:mcpr_x",
    }
    await adapter._handle_update({"update_id": 1, "callback_query": query}, send)
    await adapter._handle_update(
        {
            "update_id": 2,
            "message": {"message_id": 4, "chat": {"id": 1}, "from": {"id": 8}, "text": "hi"},
        },
        send,
    )
    (got,) = [recv.receive_nowait()]
    assert got.press is not None and got.user_id == "8" and got.press.data == "y:mcpr_x"
    with pytest.raises(trio.WouldBlock):
        recv.receive_nowait()
