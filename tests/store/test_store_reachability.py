"""The PostgreSQL store's circuit breaker: after a failed connection every
statement is refused at once (503 ``store_unreachable``) instead of waiting
for the pool's timeout, until the background probe connects again. The
decisions are pure (:class:`Reachability`); the store's shell runs here on
``MockClock`` with a pool that fails and a scripted probe."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.store import PostgresStore, StoreError
from hermes_trio.store.reachability import PROBE_FIRST, PROBE_MOST, Reachability


def test_an_outage_begins_once_and_probes_back_off_to_a_bound() -> None:
    reach = Reachability()
    assert reach.up and reach.next_probe is None
    assert reach.lost(10.0) is True
    assert not reach.up and reach.down_since == 10.0 and reach.next_probe == 10.25
    # More failures during the outage change nothing.
    assert reach.lost(10.1) is False and reach.next_probe == 10.25
    probes = []
    now = 10.25
    for _ in range(8):
        reach.probe_failed(now)
        assert reach.next_probe is not None
        probes.append(reach.next_probe - now)
        now = reach.next_probe
    assert probes == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0, 5.0]
    assert reach.found(now) == pytest.approx(now - 10.0)
    assert reach.up and reach.next_probe is None
    # The next outage starts from the first interval again.
    assert reach.lost(100.0) is True and reach.next_probe == 100.0 + PROBE_FIRST


@given(st.lists(st.sampled_from(["lost", "probe_failed", "found"]), max_size=40))
def test_probes_are_never_further_apart_than_the_bound(steps: list[str]) -> None:
    reach = Reachability()
    now = 0.0
    for step in steps:
        now += 0.1
        if step == "lost":
            began = reach.up
            assert reach.lost(now) is began
        elif step == "probe_failed":
            reach.probe_failed(now)
            assert reach.up or (reach.next_probe is not None and reach.next_probe > now)
        else:
            reach.found(now)
        assert reach.up == (reach.next_probe is None) == (reach.down_since is None)
        if reach.next_probe is not None:
            assert reach.next_probe <= now + PROBE_MOST


class FlakyPool:
    """A pool whose connections fail while ``down`` (as psycopg's does when
    the server is gone), counting every use."""

    def __init__(self) -> None:
        self.down = True
        self.uses = 0

    @contextmanager
    def connection(self) -> Iterator[Any]:
        self.uses += 1
        if self.down:
            raise psycopg.OperationalError("connection refused")
        yield _Conn()


class _Conn:
    @contextmanager
    def transaction(self) -> Iterator[None]:
        yield

    def execute(self, query: str, params: Any = ()) -> Any:
        return _NoRows()


class _NoRows:
    def fetchone(self) -> None:
        return None

    def fetchall(self) -> list[Any]:
        return []


async def test_statements_fail_at_once_until_the_probe_connects(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = PostgresStore("postgresql://hermes@127.0.0.1:1/none")
    pool = FlakyPool()
    store._pool = pool  # type: ignore[assignment]
    probes: list[float] = []
    answers = iter([False, False, True])

    async def probe() -> bool:
        probes.append(trio.current_time())
        works = next(answers)
        pool.down = not works
        return works

    store._probe_once = probe  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        await nursery.start(store.keep_reachable)
        await trio.sleep(1.0)
        # The first statement meets the failed connection.
        with pytest.raises(StoreError) as first:
            await store.conversation("k")
        began = trio.current_time()
        assert first.value.code == "store_unreachable" and first.value.status == 503
        assert pool.uses == 1
        # Every one after it is refused without waiting and without the pool.
        for _ in range(5):
            before = trio.current_time()
            with pytest.raises(StoreError) as refused:
                await store.conversation("k")
            assert trio.current_time() == before
            assert refused.value.code == "store_unreachable"
            assert refused.value.message.endswith("try again later")
        assert pool.uses == 1
        await trio.sleep_until(began + 1.74)
        assert not store.reachability.up
        await trio.sleep_until(began + 1.76)
        assert store.reachability.up
        assert probes == pytest.approx([began + 0.25, began + 0.75, began + 1.75])
        # Reachable again: statements go to the pool.
        assert await store.conversation("k") is None
        assert pool.uses == 2
        nursery.cancel_scope.cancel()


async def test_a_failure_that_is_not_the_connection_opens_no_breaker(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = PostgresStore("postgresql://hermes@127.0.0.1:1/none")

    class FullDisk(FlakyPool):
        @contextmanager
        def connection(self) -> Iterator[Any]:
            self.uses += 1
            raise psycopg.errors.DiskFull("no space left")
            yield

    pool = FullDisk()
    store._pool = pool  # type: ignore[assignment]
    for _ in range(2):
        with pytest.raises(StoreError) as refused:
            await store.conversation("k")
        assert refused.value.code == "store_full"
    assert pool.uses == 2 and store.reachability.up
