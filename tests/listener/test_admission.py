"""``api_server.max_concurrent``: a fixed number, or ``auto`` — a limit that
follows the event loop's lag (``listener/admission.py``). The arithmetic
alone, with hypothesis; the trio shell on a mock clock with the times
asserted; then the real server refusing at once with the error JSON,
``Retry-After`` and the figures on ``/metrics``."""

from __future__ import annotations

import contextvars
import heapq
import itertools
import random
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from support import api_stack

from hermes_trio.config import ConfigError, load_config
from hermes_trio.listener.admission import AdaptiveLimit, FixedLimit, Refused
from hermes_trio.listener.capacity import (
    FILES_PER_CONNECTION,
    FILES_PER_TURN,
    FILES_RESERVED,
    connection_room,
)
from hermes_trio.server.admission.turn_slots import AUTO_START, TurnSlots, _Entry
from hermes_trio.server.parsing.errors import APIError
from hermes_trio.testing import TextReply
from tests.server.test_metrics import figures, moved

CHAT = {"model": "hermes-agent", "messages": [{"role": "user", "content": "hi"}]}


def test_a_fixed_limit_refuses_at_the_number() -> None:
    fixed = FixedLimit(2)
    assert fixed.admit(0.0, 1) is None
    assert fixed.admit(0.0, 2) == Refused("limit", 2)
    assert FixedLimit(0).admit(0.0, 0) == Refused("limit", 0)


def test_a_late_tick_drops_the_limit_to_three_quarters_of_the_turns_running() -> None:
    limit = AdaptiveLimit(100, floor=4)
    assert limit.limit == 100  # a fresh server is held back by its lag alone
    limit.loop_tick(0.05, 0.01, in_use=40)
    assert limit.limit == 100
    limit.loop_tick(0.4, 0.3, in_use=40)
    assert limit.limit == 30
    # At most once per interval, however late the next ticks.
    limit.loop_tick(0.75, 0.3, in_use=30)
    assert limit.limit == 30
    limit.loop_tick(0.9, 0.3, in_use=30)
    assert limit.limit == 22
    for step in range(20):
        limit.loop_tick(1.5 + step, 1.0, in_use=30)
    assert limit.limit == 4  # the floor
    idle = AdaptiveLimit(100, floor=4)
    idle.loop_tick(1.0, 2.0, in_use=4)
    assert idle.limit == 100  # late with next to nothing running: not the turns


def test_lateness_the_set_up_of_a_burst_explains_leaves_the_limit() -> None:
    limit = AdaptiveLimit(600, start=160, interval=0.5, setup=0.01)
    limit.loop_tick(0.05, 0.0, in_use=0)
    # A burst of 40 let in at once: setting them up (not their streams)
    # holds the loop 0.25 s. Arrivals meanwhile are still let in: the 40
    # more than at the last tick excuse 0.4 s of lateness...
    for n in range(40):
        assert limit.admit(0.06, n) is None
    assert limit.excused(40) == pytest.approx(0.4)
    assert limit.admit(0.35, 40) is None
    limit.loop_tick(0.35, 0.25, in_use=41)
    assert limit.limit == 160
    # ...and the late tick used up that much of the excuse.
    assert limit.excused(41) == pytest.approx(0.16)
    assert limit.admit(0.55, 41) is None
    # Lateness beyond what is left of it is the server's: 503 at once...
    assert limit.admit(0.75, 41) == Refused("lag", 160)
    # ...and a cut, once the streams alone make the loop late.
    limit.loop_tick(0.75, 0.35, in_use=41)
    assert limit.excused(41) == 0
    assert limit.limit == 30
    # A few more at once excuse a little, not a late tick's worth.
    few = AdaptiveLimit(600, start=160, setup=0.01)
    few.loop_tick(0.05, 0.0, in_use=20)
    few.loop_tick(0.3, 0.2, in_use=28)
    assert few.limit == 21


def test_turns_that_replace_ended_ones_excuse_nothing() -> None:
    limit = AdaptiveLimit(600, start=160, interval=0.5, setup=0.01)
    now = 0.0
    while now < 1.1:  # 100 running for a while: what their start excused is over
        now += 0.05
        limit.loop_tick(now, 0.0, in_use=100)
    assert limit.excused(100) == 0
    # Turnover: every tick 20 turns end and 20 start in their place, for
    # ever: their set-up is the steady work's, and it is judged in full.
    for _ in range(9):
        now += 0.05
        for n in range(20):
            assert limit.admit(now, 80 + n) is None
        limit.loop_tick(now, 0.02, in_use=100)
    assert limit.excused(100) == 0 and limit.limit == 160
    limit.loop_tick(now + 0.05, 0.12, in_use=100)
    assert limit.limit == 75


def test_the_limit_grows_only_after_a_whole_interval_that_kept_up_and_refused() -> None:
    limit = AdaptiveLimit(100, start=16, interval=0.5)
    limit.loop_tick(1.0, 0.0, in_use=3)
    limit.loop_tick(1.5, 0.0, in_use=3)
    assert limit.limit == 16  # not binding: no reason to grow
    assert limit.admit(1.5, 16) == Refused("limit", 16)
    limit.loop_tick(1.6, 0.08, in_use=16)  # under the target, but not by half
    limit.loop_tick(2.0, 0.01, in_use=16)
    assert limit.limit == 16  # that interval had a tick at 0.08
    limit.loop_tick(2.4, 0.0, in_use=16)
    assert limit.limit == 16  # within the next interval
    limit.loop_tick(2.5, 0.0, in_use=16)
    assert limit.limit == 18
    assert limit.admit(2.5, 17) is None
    assert limit.admit(2.55, 18) is not None
    limit.loop_tick(2.8, 0.0, in_use=18)
    assert limit.limit == 18
    limit.loop_tick(3.0, 0.0, in_use=18)
    assert limit.limit == 20
    top = AdaptiveLimit(20, start=19)
    top.admit(0.0, 19)
    top.loop_tick(0.0, 0.0, in_use=19)
    top.loop_tick(1.0, 0.0, in_use=19)
    assert top.limit == 20  # the ceiling


def test_an_overdue_tick_refuses_at_once() -> None:
    limit = AdaptiveLimit(100, tick=0.05, lag_target=0.1)
    assert limit.admit(5.0, 0) is None  # no tick yet: nothing known
    limit.loop_tick(10.0, 0.0, in_use=0)
    assert limit.admit(10.14, 0) is None
    assert limit.behind(10.2) == pytest.approx(0.15)
    assert limit.admit(10.2, 0) == Refused("lag", 100)


def test_bad_bounds_are_named() -> None:
    with pytest.raises(ValueError, match="floor <= ceiling"):
        AdaptiveLimit(2, floor=3)


events = st.lists(
    st.tuples(
        st.booleans(),
        st.floats(min_value=0.0, max_value=2.0),
        st.floats(min_value=0.0, max_value=1.0),
        st.integers(min_value=0, max_value=300),
    ),
    max_size=60,
)


@given(ceiling=st.integers(min_value=4, max_value=500), steps=events)
def test_the_limit_stays_in_bounds_and_moves_at_most_once_per_interval(
    ceiling: int, steps: list[tuple[bool, float, float, int]]
) -> None:
    limit = AdaptiveLimit(ceiling, floor=4, interval=0.5)
    now = 0.0
    changes: list[float] = []
    for is_tick, gap, lag, in_use in steps:
        now += gap
        before = limit.limit
        if is_tick:
            limit.loop_tick(now, lag, in_use)
        else:
            refused = limit.admit(now, in_use)
            assert (refused is None) or refused.reason in ("limit", "lag")
            if in_use >= limit.limit:
                assert refused is not None
            assert limit.limit == before  # only ticks move it
        if limit.limit != before:
            changes.append(now)
            # Down only when late, up only when keeping up.
            assert (limit.limit < before) == (lag > limit.lag_target)
        assert 4 <= limit.limit <= ceiling
    assert all(b - a >= 0.5 for a, b in itertools.pairwise(changes))


async def test_the_lag_watch_measures_a_blocked_loop_on_the_clock(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limits = AdaptiveLimit(64, tick=0.05, lag_target=0.1, interval=0.5)
    slots = TurnSlots(limits)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(slots.watch_lag)
        for _ in range(10):
            slots.acquire()
        await trio.sleep(0.21)
        assert limits.last_tick == pytest.approx(0.2) and limits.last_lag == 0
        # Something holds the loop for 0.4 s (a jump without a checkpoint):
        # every request meanwhile is refused at once with 503.
        autojump_clock.jump(0.4)
        assert trio.current_time() == pytest.approx(0.61)
        with pytest.raises(APIError) as refused:
            slots.acquire()
        assert refused.value.status == 503 and refused.value.code == "server_overloaded"
        assert refused.value.headers == {"Retry-After": "1"}
        assert slots.in_use == 10
        await trio.testing.wait_all_tasks_blocked()
        # The late tick came at 0.61, 0.36 late: the limit dropped to 3/4 of 10.
        assert limits.last_tick == pytest.approx(0.61)
        assert limits.last_lag == pytest.approx(0.36)
        assert limits.limit == 7
        with pytest.raises(APIError) as full:
            slots.acquire()
        assert full.value.status == 429 and "limit 7" in full.value.message
        for _ in range(4):
            slots.release()
        slots.acquire()
        with pytest.raises(APIError):
            slots.acquire()
        # Refused at 7 with the loop keeping up: one more, half a second
        # after the drop, and no more within the next half second.
        await trio.sleep(0.45)
        assert limits.limit == 7
        await trio.sleep(0.14)
        assert trio.current_time() == pytest.approx(1.2) and limits.limit == 8
        nursery.cancel_scope.cancel()


async def test_auto_refuses_at_once_with_the_error_json_and_counts_it() -> None:
    script = [
        TextReply("hello"),
        TextReply(tokens=["a ", "b ", "c"], delay=0.2),
        TextReply("again"),
    ]
    async with api_stack(script, api={"max_concurrent": "auto"}) as (api, _):
        root = api.base_url.removesuffix("/v1")
        limits = api.state.slots.limits
        assert isinstance(limits, AdaptiveLimit) and limits.ceiling == 256
        assert limits.limit == AUTO_START
        async with httpx.AsyncClient(timeout=15) as http:
            before = await figures(http, root)
            # Nothing runs: no late tick moves it.
            assert before[("hermes_admission_limit", ())] == AUTO_START
            ok = await http.post(f"{api.base_url}/chat/completions", json=CHAT)
            assert ok.status_code == 200, ok.text
            slots = api.state.slots
            streamed = {**CHAT, "stream": True}
            seen: list[tuple[int, int]] = []
            async with http.stream("POST", f"{api.base_url}/chat/completions", json=streamed) as s:
                async for _ in s.aiter_bytes():
                    seen.append((slots.in_use, slots.entering))
            # Let in by the front, the stream's place became its slot.
            assert seen[0] == (1, 0)
            with trio.fail_after(10):
                await slots.wait_idle()
            assert slots.entering == 0
            # A loop that has not ticked for ten seconds: behind.
            stalled = AdaptiveLimit(1, floor=1, tick=3600)
            stalled.last_tick = trio.current_time() - 3610
            api.state.slots.limits = stalled
            busy = await http.post(f"{api.base_url}/chat/completions", json=CHAT)
            assert busy.status_code == 503
            assert busy.headers["Retry-After"] == "1"
            error = busy.json()["error"]
            assert error["code"] == "server_overloaded" and error["type"]
            assert "overloaded" in error["message"]
            stalled.last_tick = trio.current_time()
            again = await http.post(f"{api.base_url}/chat/completions", json=CHAT)
            assert again.status_code == 200, again.text
            # No room: refused before the body is read (none is sent here),
            # and the connection closes after the answer.
            api.state.slots.limits = FixedLimit(0)
            head = await refused_before_the_body(api.host, api.port)
            assert head.startswith(b"HTTP/1.1 429")
            assert b"retry-after: 1" in head.lower() and b"connection: close" in head.lower()
            assert b'"code":"rate_limit_exceeded"' in head.replace(b" ", b"")
            after = await figures(http, root)
    assert moved(before, after, "hermes_admission_refused_total", reason="lag") == 1
    assert moved(before, after, "hermes_admission_refused_total", reason="limit") == 1
    assert moved(before, after, "hermes_rate_limited_total", reason="rate_limit_exceeded") == 1
    assert (
        moved(before, after, "hermes_requests_total", route="/v1/chat/completions", status="503")
        == 1
    )


@given(
    open_files=st.integers(min_value=1, max_value=2_000_000),
    wanted=st.integers(min_value=1, max_value=100_000),
)
def test_auto_sizes_the_connections_with_a_turn_each(open_files: int, wanted: int) -> None:
    # auto's ceiling is the connections served: each may hold a turn too.
    room = connection_room(open_files, wanted=wanted, turns=None)
    each = FILES_PER_CONNECTION + FILES_PER_TURN
    assert 1 <= room.max_connections <= wanted
    assert room.needed == FILES_RESERVED + each * wanted
    if room.fits > 1:
        assert (
            FILES_RESERVED + each * room.fits
            <= open_files
            < FILES_RESERVED + each * (room.fits + 1)
        )


def test_auto_under_a_1024_file_limit_still_serves_connections() -> None:
    # As a fixed number the 256 turns' files alone would not fit: 1 connection.
    assert connection_room(1024, wanted=256, turns=256).max_connections == 1
    assert connection_room(1024, wanted=256, turns=None).max_connections == 138


async def refused_before_the_body(host: str, port: int) -> bytes:
    """What the server answers a chat request whose body never comes."""
    stream = await trio.open_tcp_stream(host, port)
    async with stream:
        await stream.send_all(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        )
        answer = b""
        with trio.fail_after(5):
            while data := await stream.receive_some(65536):
                answer += data
    return answer


def test_max_concurrent_takes_a_number_or_auto(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    for given_value, expected in (("auto", "auto"), ("3", 3)):
        path.write_text(f"api_server: {{max_concurrent: {given_value}}}\n")
        assert load_config(path).api_server.max_concurrent == expected
    for bad, message in (
        ("autoo", "api_server.max_concurrent: expected an integer or 'auto', got str 'autoo'"),
        ("0", "api_server.max_concurrent: expected an integer of at least 1 or 'auto'"),
        ("true", "api_server.max_concurrent: expected an integer or 'auto', got bool True"),
    ):
        path.write_text(f"api_server: {{max_concurrent: {bad}}}\n")
        with pytest.raises(ConfigError) as error:
            load_config(path)
        assert str(error.value) == message


async def test_a_burst_let_in_counts_before_it_takes_its_slots() -> None:
    slots = TurnSlots(2)
    chat: Any = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": []}
    first, second, slow = (contextvars.copy_context() for _ in range(3))
    entries = [ctx.run(slots.shed, chat) for ctx in (first, second, slow)]
    assert all(isinstance(entry, _Entry) for entry in entries)
    one, two, upload = cast(list[_Entry], entries)
    # A request counts once its body is in: a slow upload holds no place.
    assert slots.entering == 0
    one.arrived()
    two.arrived()
    one.arrived()
    assert slots.entering == 2
    # Neither has a slot yet, but a third request would find none.
    third = slots.shed(chat)
    assert isinstance(third, APIError) and third.status == 429
    assert third.headers == {"Retry-After": "1"}
    # The first takes its slot (its place on the way becomes the slot)...
    first.run(slots.acquire)
    assert (slots.in_use, slots.entering) == (1, 1)
    one.leave()  # ...and its end gives nothing back twice
    assert (slots.in_use, slots.entering) == (1, 1)
    # The second ends without one (a bad body, say): its place is free again.
    two.leave()
    two.leave()
    upload.leave()
    assert slots.entering == 0
    assert isinstance(contextvars.copy_context().run(slots.shed, chat), _Entry)
    # Not turn work, or a session's request: never refused here.
    assert slots.shed({**chat, "method": "GET"}) is None
    assert slots.shed({**chat, "path": "/v1/approvals/x"}) is None
    assert slots.shed({**chat, "headers": [(b"x-session-id", b"s")]}) is None


@pytest.mark.parametrize("turn_seconds", [0.2, 1.0, 5.0])
def test_under_lasting_overload_the_limit_settles_where_the_loop_keeps_up(
    turn_seconds: float,
) -> None:
    # A model of a core that keeps up with 40 turns (each turn beyond adds
    # 4 ms of lateness a tick), and clients that retry at once: the turns
    # admitted replace the ones that end, for a minute.
    rnd = random.Random(1)
    limit = AdaptiveLimit(256, start=160, setup=0.01)
    now, ends, lags = 0.0, list[float](), list[float]()
    while now < 60:
        while ends and ends[0] <= now:
            heapq.heappop(ends)
        while limit.admit(now, len(ends)) is None:
            heapq.heappush(ends, now + turn_seconds * rnd.uniform(0.5, 1.5))
        lag = max(0.0, 0.004 * (len(ends) - 40))
        now += limit.tick + lag
        limit.loop_tick(now, lag, len(ends))
        lags.append(lag)
    later = lags[len(lags) // 2 :]
    assert limit.limit < 64
    assert sum(later) / len(later) < limit.lag_target
