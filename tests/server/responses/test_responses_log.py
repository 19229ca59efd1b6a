"""The Responses SSE writer and event log: replay-then-follow, keep-alive,
coalescing and backpressure, in memory with trio's MockClock."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from hermes_trio.consumers.responses_sse import (
    PAGE_EVENTS,
    EventLog,
    LogFollower,
    write_response_events,
)
from hermes_trio.events import (
    MessageChunk,
    MessageStop,
    ReasoningChunk,
    StreamEvent,
    TurnFinished,
    Usage,
    coalesce,
)
from hermes_trio.wire.responses_out import ResponseBuilder, ResponseEvent
from hermes_trio.wire.sse import KEEPALIVE, SSEDecoder, SSEEvent


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


def events(n: int, start: int = 0) -> list[ResponseEvent]:
    return [ResponseEvent.make(i, "t", f'{{"sequence_number":{i}}}') for i in range(start, n)]


def numbers(raw: bytes) -> list[int]:
    decoded = SSEDecoder().feed(raw)
    return [int(e.id or -1) for e in decoded if isinstance(e, SSEEvent)]


async def read_all(follower: LogFollower) -> list[bytes]:
    pieces = []
    while True:
        try:
            pieces.append(await follower.receive())
        except trio.EndOfChannel:
            return pieces


def test_coalesce_merges_runs_only() -> None:
    stop = MessageStop(final=False)
    assert coalesce(
        [
            MessageChunk("a"),
            MessageChunk("b"),
            ReasoningChunk("r"),
            ReasoningChunk("s"),
            MessageChunk("c"),
            stop,
            MessageChunk("d"),
        ]
    ) == [MessageChunk("ab", 2), ReasoningChunk("rs"), MessageChunk("c"), stop, MessageChunk("d")]
    assert coalesce([]) == []


def test_log_keeps_sequence_numbers_as_positions() -> None:
    log = EventLog()
    log.extend(events(3))
    log.extend([])
    with pytest.raises(ValueError):
        log.extend(events(6, start=5))
    log.close()
    log.close()
    with pytest.raises(trio.ClosedResourceError):
        log.extend(events(4, start=3))
    assert len(log) == 3


async def test_replay_then_follow_without_gap_or_repeat() -> None:
    log = EventLog()
    log.extend(events(4))
    follower = LogFollower(log, after=1, keepalive=60)
    assert numbers(await follower.receive()) == [2, 3]

    async def write_more() -> None:
        for n in range(4, 8):
            await trio.sleep(0.01)
            log.extend(events(n + 1, start=n))
        log.close()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_more)
        pieces = await read_all(follower)
    assert [n for piece in pieces for n in numbers(piece)] == [4, 5, 6, 7]


async def test_whole_log_and_past_the_end() -> None:
    log = EventLog()
    log.extend(events(3))
    log.close()
    assert numbers(b"".join(await read_all(LogFollower(log)))) == [0, 1, 2]
    assert await read_all(LogFollower(log, after=10)) == []


async def test_a_long_log_is_replayed_a_page_per_read() -> None:
    log = EventLog()
    log.extend(events(2 * PAGE_EVENTS + 3))
    log.close()
    pieces = await read_all(LogFollower(log))
    assert [len(numbers(piece)) for piece in pieces] == [PAGE_EVENTS, PAGE_EVENTS, 3]
    assert [n for piece in pieces for n in numbers(piece)] == list(range(2 * PAGE_EVENTS + 3))


async def test_a_durable_log_shows_what_was_published() -> None:
    log = EventLog(durable=True)
    log.extend(events(4))
    follower = LogFollower(log, keepalive=60)
    assert log.visible == 0
    log.publish(2)
    assert numbers(await follower.receive()) == [0, 1]
    with pytest.raises(ValueError):
        log.truncate(1)
    log.truncate(3)
    # Closing shows the rest: whoever closes has stored it.
    log.close()
    assert numbers(b"".join(await read_all(follower))) == [2]


async def test_keepalive_while_silent(autojump_clock: trio.testing.MockClock) -> None:
    log = EventLog()
    follower = LogFollower(log, keepalive=10)
    start = trio.current_time()
    assert await follower.receive() == KEEPALIVE
    assert trio.current_time() - start == pytest.approx(10)
    log.extend(events(1))
    assert numbers(await follower.receive()) == [0]
    log.close()
    with pytest.raises(trio.EndOfChannel):
        await follower.receive()


async def test_primary_reader_bounds_the_writer() -> None:
    log = EventLog()
    follower = LogFollower(log, primary=True)
    log.extend(events(5))
    # Not read yet: the writer waits for no one (its response may never be
    # sent at all).
    with trio.fail_after(1):
        await log.wait_for_primary(window=3)
    assert numbers(await follower.receive()) == [0, 1, 2, 3, 4]
    log.extend(events(10, start=5))
    with trio.move_on_after(0.05) as blocked:
        await log.wait_for_primary(window=3)
    assert blocked.cancelled_caught
    await follower.receive()
    with trio.fail_after(1):
        await log.wait_for_primary(window=3)
    log.extend(events(15, start=10))
    follower.detach()
    follower.detach()
    # Without a primary reader nothing waits (a background response).
    with trio.fail_after(1):
        await log.wait_for_primary(window=3)


async def test_writer_turns_channel_events_into_the_log() -> None:
    builder = ResponseBuilder("resp_1", created_at=1, model="m")
    log = EventLog()
    send, receive = trio.open_memory_channel[StreamEvent](16)
    turn: list[StreamEvent] = [
        MessageChunk("a"),
        MessageChunk("b"),
        MessageChunk("c"),
        MessageStop(final=True),
        TurnFinished("abc", Usage(), "stop"),
    ]
    with send:
        for event in turn:
            send.send_nowait(event)
    await write_response_events(receive, builder, log)
    kinds = [e.type for e in log.events]
    # Everything waiting at once became one batch: one delta for "abc".
    assert kinds.count("response.output_text.delta") == 1
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [e.sequence_number for e in log.events] == list(range(len(log)))
    assert not log.closed


async def test_writer_waits_for_a_slow_primary_reader() -> None:
    builder = ResponseBuilder("resp_1", created_at=1, model="m")
    log = EventLog()
    follower = LogFollower(log, primary=True, keepalive=1)
    log.extend(builder.start())
    assert numbers(await follower.receive())
    send, receive = trio.open_memory_channel[StreamEvent](0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: write_response_events(receive, builder, log, window=4))
        async with send:
            for n in range(20):
                with trio.move_on_after(0.05) as scope:
                    await send.send(MessageChunk(str(n)))
                if scope.cancelled_caught:
                    break
            # The writer stopped taking events: the reader is too far behind.
            assert len(log) - (follower.log.primary or 0) > 4
            assert n < 19
            # Once it has read, the writer takes events again.
            assert numbers(await follower.receive())
            with trio.fail_after(1):
                await send.send(MessageChunk("more"))
        follower.detach()


async def test_zero_keepalive_means_none() -> None:
    log = EventLog()
    follower = LogFollower(log, keepalive=0)
    with trio.move_on_after(0.05) as scope:
        await follower.receive()
    assert scope.cancelled_caught


async def test_the_log_wakes_its_followers_only_when_it_grows(autojump_clock) -> None:
    log = EventLog()
    log.attach_primary()
    woken = 0

    async def follower() -> None:
        nonlocal woken
        await log.wait_beyond(0)
        woken = 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(follower)
        await trio.sleep(0.1)
        # The primary reader moving on is no news for someone waiting for
        # events: it stays asleep (before, every advance woke it).
        parked = trio.lowlevel.current_statistics().tasks_runnable
        log.advance_primary(0)
        assert trio.lowlevel.current_statistics().tasks_runnable == parked
        await trio.sleep(0.1)
        assert woken == 0
        log.extend([ResponseEvent.make(0, "t", "{}")])
        assert trio.lowlevel.current_statistics().tasks_runnable == parked + 1
    assert woken == 1
