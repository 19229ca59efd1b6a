"""The listener's intake (``listener/intake.py``, pure): new connections are
read at once while there is room and nothing waits; otherwise held unread,
served as room frees (oldest first while young, newest first once the
queue is old, never one held too long), and refused oldest first at the
budget's pace: a burst at once, a storm no faster than the budget, however
often its clients come back. And the door's reading of a held
connection's first bytes (``door.read_knock``)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_trio.listener.admission import AdaptiveLimit, FixedLimit
from hermes_trio.listener.door import read_knock
from hermes_trio.listener.intake import Intake, IntakePolicy

POLICY = IntakePolicy(refusals_per_second=10, burst=4, fifo_wait=0.5, serve_within=1.0)


def test_a_connection_is_read_at_once_while_there_is_room_and_no_one_waits() -> None:
    intake: Intake[str] = Intake(POLICY, 0.0)
    assert intake.arrive("a", 0.0, free=1)
    assert not intake.arrive("b", 0.0, free=0)
    # Room again, but "b" waits before it: "c" queues behind.
    assert not intake.arrive("c", 0.1, free=1)
    assert intake.serve(0.1, free=5) == ["b", "c"]
    assert len(intake) == 0


def test_the_held_go_oldest_first_while_young_then_newest_first() -> None:
    intake: Intake[int] = Intake(POLICY, 0.0)
    for n in range(4):
        intake.arrive(n, n * 0.1, free=0)
    assert intake.serve(0.4, free=1) == [0]  # waited 0.4 s: still first
    # Now the oldest has waited 0.8 s: the newest goes, a fresh start.
    assert intake.serve(0.8, free=2) == [3, 2]
    # 1 has waited 1.1 s, too long to start a stream now: refused only.
    assert intake.serve(1.2, free=1) == []
    assert intake.refuse(1.2, free=1) == [1]


def test_while_a_place_is_free_the_stale_are_refused_beyond_the_budget() -> None:
    intake: Intake[int] = Intake(IntakePolicy(refusals_per_second=0.1, burst=1), 0.0)
    for n in range(4):
        intake.arrive(n, 0.0, free=0)
    assert intake.refuse(0.0, free=0) == [0]  # the budget spent
    # Two places free, none fresh to take them: two stale are told at
    # once, and their clients, asking again, find the places.
    assert intake.serve(2.0, free=2) == []
    assert intake.refuse(2.0, free=2) == [1, 2]
    assert intake.refuse(2.0, free=0) == []


def test_a_burst_is_refused_at_once_and_a_storm_at_the_budgets_pace() -> None:
    intake: Intake[int] = Intake(POLICY, 0.0)
    for n in range(10):
        intake.arrive(n, 0.0, free=0)
    assert intake.refuse(0.0, free=0) == [0, 1, 2, 3]  # the burst
    assert intake.refuse(0.0, free=0) == []
    assert intake.wait(0.0) == pytest.approx(0.1)
    assert intake.refuse(0.25, free=0) == [4, 5]  # 10 a second
    # None refused while there is room and none is stale: they are served.
    assert intake.refuse(0.3, free=3) == []
    assert intake.serve(0.3, free=3) == [6, 7, 8]


def test_bad_policies_are_named() -> None:
    with pytest.raises(ValueError, match="refusals_per_second > 0"):
        IntakePolicy(refusals_per_second=0)
    with pytest.raises(ValueError, match="fifo_wait <= serve_within"):
        IntakePolicy(fifo_wait=2, serve_within=1)


_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["arrive", "serve", "refuse"]),
        st.floats(min_value=0, max_value=0.5),  # time passing before the step
        st.integers(min_value=-3, max_value=5),  # free
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(_STEPS)
def test_each_connection_comes_out_once_within_the_budget_and_fresh_when_served(
    steps: list[tuple[str, float, int]],
) -> None:
    intake: Intake[int] = Intake(POLICY, 0.0)
    now = 0.0
    arrived: dict[int, float] = {}
    out: list[int] = []
    refused = room = 0
    for n, (step, passing, free) in enumerate(steps):
        now += passing
        if step == "arrive":
            arrived[n] = now
            if intake.arrive(n, now, free):
                assert free > 0
                out.append(n)
        elif step == "serve":
            served = intake.serve(now, free)
            assert len(served) <= max(0, free)
            assert all(now - arrived[m] <= POLICY.serve_within for m in served)
            out += served
        else:
            gone = intake.refuse(now, free)
            refused += len(gone)
            out += gone
            # Never more than the burst, the pace since the start and the
            # places found free allow.
            room += max(0, free)
            assert refused <= POLICY.burst + POLICY.refusals_per_second * now + room + 1e-9
    out += intake.drain()
    assert sorted(out) == sorted(arrived)


@given(st.integers(0, 20), st.integers(0, 30), st.floats(0, 1))
def test_room_says_what_admit_would_without_changing_anything(
    limit: int, in_use: int, late: float
) -> None:
    fixed = FixedLimit(limit)
    assert (fixed.room(0, in_use) > 0) == (fixed.admit(0, in_use) is None)
    adaptive = AdaptiveLimit(max(1, limit), floor=1, start=max(1, limit))
    adaptive.loop_tick(0.0, 0.0, in_use)
    now = adaptive.tick + late
    room = adaptive.room(now, in_use)
    assert adaptive.limit == max(1, limit) and not adaptive._binding
    assert (room > 0) == (adaptive.admit(now, in_use) is None)


BODY = json.dumps({"model": "m", "messages": []}).encode()


def _request(body: bytes = BODY, length: int | None = None, extra: str = "") -> bytes:
    size = len(body) if length is None else length
    return (
        f"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: {size}\r\n"
        f"{extra}\r\n"
    ).encode() + body


def test_the_first_bytes_of_a_held_connection_are_read_as_the_door_reads_a_head() -> None:
    knock = read_knock(_request())
    assert knock is not None
    assert (knock.method, knock.path, knock.body_here) == (b"POST", b"/v1/chat/completions", True)
    assert (b"host", b"h") in knock.headers
    # A body still on its way, or chunked: not whole.
    partial = read_knock(_request(length=len(BODY) + 10))
    assert partial is not None and not partial.body_here
    chunked = read_knock(
        _request(b"", extra="Transfer-Encoding: chunked\r\n").replace(b"Content-Length: 0\r\n", b"")
    )
    assert chunked is not None and not chunked.body_here
    # A head not all there, or not HTTP: left to the listener's own reading.
    assert read_knock(b"POST /v1/chat/completions HTTP/1.1\r\nHost:") is None
    assert read_knock(b"\x16\x03\x01 not http\r\n\r\n") is None
