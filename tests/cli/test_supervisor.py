"""The ``serve --workers`` supervisor's loop on trio's MockClock, with
workers that are coroutines instead of processes; and how a worker's
stderr reaches the supervisor's."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import trio
import trio.testing

from hermes_trio.cli.workers import Ended, Supervisor, WorkerFailed, WorkerOutput, describe_exit


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


@dataclass(frozen=True)
class Run:
    """One life of a pretend worker."""

    start: float = 0.5
    serves: bool = True
    lives: float = math.inf
    code: int = -9
    stop_takes: float = 1.0
    ignores_stop: bool = False
    line: str = "hermes-trio serve worker 0: store.data_dir /x cannot be written"


class FakeWorkers:
    def __init__(self, runs: dict[int, list[Run]]) -> None:
        self.runs = runs
        self.launches: list[tuple[int, float]] = []
        self.killed: list[tuple[int, float]] = []
        self.stopped: list[tuple[int, float]] = []

    async def launch(self, index: int, ready: Callable[[int], None], stopping: trio.Event) -> Ended:
        planned = self.runs.get(index, [])
        run = planned.pop(0) if planned else Run()
        self.launches.append((index, trio.current_time()))
        pid = 100 * (index + 1) + sum(launched == index for launched, _ in self.launches)
        try:
            await trio.sleep(run.start)
            if not run.serves:
                return Ended(1, False, run.line)
            ready(pid)
            with trio.move_on_after(run.lives):
                await stopping.wait()
                if run.ignores_stop:
                    await trio.sleep_forever()
                await trio.sleep(run.stop_takes)
                self.stopped.append((index, trio.current_time()))
                return Ended(0, True)
            return Ended(run.code, True)
        except trio.Cancelled:
            self.killed.append((index, trio.current_time()))
            raise


async def supervise(
    workers: FakeWorkers, stop_at: float, count: int = 2
) -> tuple[Supervisor, list[tuple[float, dict[int, int]]]]:
    launched: list[tuple[float, dict[int, int]]] = []
    supervisor = Supervisor(
        count,
        workers.launch,
        grace=5.0,
        on_launched=lambda pids: launched.append((trio.current_time(), pids)),
    )
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(supervisor.run, stop)
        await trio.sleep(stop_at)
        stop.set()
    return supervisor, launched


async def test_the_server_is_up_when_every_worker_serves(autojump_clock: object) -> None:
    workers = FakeWorkers({1: [Run(start=0.8)]})
    _, launched = await supervise(workers, stop_at=5)
    assert launched == [(0.8, {0: 101, 1: 201})]
    # The stop reached both; the run ended when the last one had.
    assert sorted(workers.stopped) == [(0, 6.0), (1, 6.0)]
    assert trio.current_time() == 6.0


async def test_a_worker_that_dies_is_replaced_after_a_short_wait(autojump_clock: object) -> None:
    workers = FakeWorkers({1: [Run(lives=10), Run(lives=2), Run()]})
    supervisor, launched = await supervise(workers, stop_at=30)
    # Died at 10.5 and 10.75 + 0.5 + 2: each wait twice the one before.
    assert sorted(workers.launches) == [(0, 0), (1, 0), (1, 10.75), (1, 13.75)]
    assert len(launched) == 1
    assert supervisor.pids == {0: 101, 1: 203}


async def test_a_worker_that_cannot_start_at_launch_stops_the_rest(autojump_clock: object) -> None:
    workers = FakeWorkers({1: [Run(start=0.3, serves=False)]})
    failed = pytest.RaisesExc(WorkerFailed, match="^worker 1 could not start: store")
    with pytest.RaisesGroup(failed):
        await supervise(workers, stop_at=100)
    assert sorted(workers.launches) == [(0, 0), (1, 0)]
    # Worker 0 got the stop and ended like on SIGTERM (after its start-up).
    assert workers.stopped == [(0, 1.5)]


async def test_a_worker_ignoring_the_stop_is_cut_after_the_grace(autojump_clock: object) -> None:
    workers = FakeWorkers({0: [Run(ignores_stop=True)], 1: [Run(start=0.3, serves=False)]})
    with pytest.RaisesGroup(WorkerFailed):
        await supervise(workers, stop_at=100)
    assert workers.killed == [(0, 5.3)]


async def test_a_replacement_that_cannot_start_is_tried_three_times(autojump_clock: object) -> None:
    bad = Run(start=0.5, serves=False)
    workers = FakeWorkers({0: [Run(lives=20), bad, bad, bad]})
    with pytest.RaisesGroup(WorkerFailed):
        await supervise(workers, stop_at=100)
    # Died at 20.5; starts at 20.75, 21.75 (after 0.5) and 23.25 (after 1).
    assert [at for index, at in workers.launches if index == 0] == [0, 20.75, 21.75, 23.25]
    assert workers.stopped == [(1, 24.75)]


async def test_a_stop_during_a_restart_wait_starts_nothing(autojump_clock: object) -> None:
    workers = FakeWorkers({0: [Run(lives=2)]})
    await supervise(workers, stop_at=2.6)
    assert sorted(workers.launches) == [(0, 0), (1, 0)]
    assert trio.current_time() == 3.6


def test_exits_are_described_by_code_or_signal() -> None:
    assert describe_exit(3) == "exit code 3"
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(-77) == "killed by signal 77"


def test_a_worker_that_serves_has_its_lines_passed_on() -> None:
    written: list[bytes] = []
    output = WorkerOutput(written.append)
    output.feed(b"starting\nhalf")
    assert written == []
    output.served()
    assert written == [b"starting\n"]
    output.feed(b" a line\nlast\n")
    output.ended()
    assert written == [b"starting\n", b"half a line\n", b"last\n"]
    assert output.last_line == "last"


def test_a_worker_that_never_served_keeps_only_its_last_line_back() -> None:
    written: list[bytes] = []
    output = WorkerOutput(written.append)
    output.feed(b"Traceback (most recent call last):\n  File x\nValueError: bad\n\n")
    output.ended()
    assert written == [b"Traceback (most recent call last):\n", b"  File x\n"]
    assert output.last_line == "ValueError: bad"
    assert output.done.is_set()


def test_a_line_without_its_newline_still_counts() -> None:
    output = WorkerOutput(lambda line: None)
    output.feed(b"hermes-trio serve worker 1: cannot listen")
    output.ended()
    assert output.last_line == "hermes-trio serve worker 1: cannot listen"
