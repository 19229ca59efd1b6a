"""Grouped event writes (store/grouped.py): one write per interval
under load, at once after a quiet spell, every caller told of its own
batch's fate; on trio's MockClock, with the times asserted."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from hermes_trio.store import StoreError
from hermes_trio.store.grouped import GroupedWrites
from hermes_trio.store.statements import Rows


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


def rows(response_id: str, *seqs: int) -> Rows:
    return [(response_id, seq, "t", "{}") for seq in seqs]


class Recorder:
    def __init__(self, fail: StoreError | None = None, takes: float = 0.005) -> None:
        self.writes: list[tuple[float, dict[str, list[int]]]] = []
        self.fail = fail
        self.takes = takes

    async def __call__(self, grouped: dict[str, Rows]) -> None:
        started = trio.current_time()
        await trio.sleep(self.takes)
        if self.fail is not None:
            # A new exception per write, as a real store raises.
            raise StoreError(self.fail.code, self.fail.message)
        self.writes.append((started, {k: [r[1] for r in v] for k, v in grouped.items()}))


async def test_a_batch_after_a_quiet_spell_is_written_at_once(autojump_clock) -> None:
    write = Recorder()
    grouped = GroupedWrites(write, interval=0.02)
    await grouped.add("a", rows("a", 0, 1))
    assert trio.current_time() == pytest.approx(0.005)
    await trio.sleep(1)
    await grouped.add("b", rows("b", 0))
    assert write.writes == [(0.0, {"a": [0, 1]}), (pytest.approx(1.005), {"b": [0]})]


async def test_batches_arriving_meanwhile_share_one_write_per_interval(autojump_clock) -> None:
    write = Recorder()
    grouped = GroupedWrites(write, interval=0.02)
    returned: dict[str, float] = {}

    async def add(response_id: str, at: float, *seqs: int) -> None:
        await trio.sleep(at)
        await grouped.add(response_id, rows(response_id, *seqs))
        returned[f"{response_id}{seqs[0]}"] = trio.current_time()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(add, "a", 0.0, 0)
        nursery.start_soon(add, "b", 0.001, 0)
        nursery.start_soon(add, "c", 0.003, 0, 1)
        nursery.start_soon(add, "a", 0.006, 1)
        nursery.start_soon(add, "b", 0.030, 1)
    # The first alone at once; the next three together 20 ms after it;
    # the last 20 ms after that one.
    assert write.writes == [
        (0.0, {"a": [0]}),
        (pytest.approx(0.02), {"b": [0], "c": [0, 1], "a": [1]}),
        (pytest.approx(0.04), {"b": [1]}),
    ]
    assert returned == {
        "a0": pytest.approx(0.005),
        "b0": pytest.approx(0.025),
        "c0": pytest.approx(0.025),
        "a1": pytest.approx(0.025),
        "b1": pytest.approx(0.045),
    }


async def test_every_caller_of_a_failed_write_gets_the_store_error(autojump_clock) -> None:
    write = Recorder(fail=StoreError("store_full", "the disk is full"))
    grouped = GroupedWrites(write, interval=0.02)
    await trio.sleep(1)
    errors: list[StoreError] = []

    async def add(response_id: str, at: float) -> None:
        await trio.sleep(at)
        try:
            await grouped.add(response_id, rows(response_id, 0))
        except StoreError as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(add, "a", 0.0)
        nursery.start_soon(add, "b", 0.001)
        nursery.start_soon(add, "c", 0.002)
    assert [(e.code, e.message) for e in errors] == [("store_full", "the disk is full")] * 3
    # Three exceptions, not one shared between tasks.
    assert len({id(e) for e in errors}) == 3


async def test_a_cancelled_caller_does_not_lose_the_others_batches(autojump_clock) -> None:
    write = Recorder()
    grouped = GroupedWrites(write, interval=0.02)
    await grouped.add("x", rows("x", 0))  # written at 0, until 0.005
    returned: dict[str, float] = {}

    async def add(response_id: str, at: float) -> None:
        await trio.sleep(at)
        await grouped.add(response_id, rows(response_id, 0))
        returned[response_id] = trio.current_time()

    async with trio.open_nursery() as nursery:
        # "b" joins the group "a" leads; "a" is cancelled while it waits
        # for the interval, "c" while it waits for the group's write.
        nursery.start_soon(add, "b", 0.001)
        async with trio.open_nursery() as inner:
            inner.start_soon(add, "a", 0.0)
            inner.start_soon(add, "c", 0.002)
            await trio.sleep(0.003)
            inner.cancel_scope.cancel()
    assert write.writes[-1] == (pytest.approx(0.02), {"a": [0], "b": [0], "c": [0]})
    # "b" was told once its batch was stored; the cancelled "c" never was.
    assert returned["b"] == pytest.approx(0.025)
    assert "c" not in returned
