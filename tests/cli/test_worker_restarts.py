"""When ``serve --workers`` starts a worker again, and when it gives up
(pure decisions, :mod:`hermes_trio.cli.worker_restarts`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.cli.worker_restarts import RestartPlan


def launched(count: int = 2, **kwargs: float) -> RestartPlan:
    plan = RestartPlan(count, **kwargs)  # type: ignore[arg-type]
    for index in range(count):
        plan.served(index)
    return plan


def test_the_server_is_up_once_every_worker_served() -> None:
    plan = RestartPlan(3)
    assert [plan.served(i) for i in (0, 2, 0, 1)] == [False, False, False, True]
    assert plan.launched
    # A replacement serving later is not the start of the server.
    assert plan.served(1) is False


def test_a_worker_that_cannot_start_at_launch_ends_the_supervisor_at_once() -> None:
    plan = RestartPlan(2)
    plan.served(0)
    assert plan.ended(1, ran=0.8, served=False) is None


def test_a_worker_that_served_before_the_launch_ended_is_restarted() -> None:
    plan = RestartPlan(2)
    plan.served(0)
    assert plan.ended(0, ran=0.5, served=True) == 0.25


def test_a_dying_worker_waits_longer_each_time_up_to_the_maximum() -> None:
    plan = launched(initial=0.25, maximum=2.0)
    delays = [plan.ended(0, ran=1.0, served=True) for _ in range(6)]
    assert delays == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    # Worker 1 has its own backoff.
    assert plan.ended(1, ran=1.0, served=True) == 0.25


def test_a_healthy_run_starts_the_backoff_over() -> None:
    plan = launched(healthy_run=30.0)
    for _ in range(4):
        plan.ended(0, ran=1.0, served=True)
    assert plan.ended(0, ran=30.0, served=True) == 0.25


def test_a_replacement_that_cannot_start_is_tried_three_times() -> None:
    plan = launched()
    assert plan.ended(0, ran=50.0, served=True) == 0.25
    assert plan.ended(0, ran=0.9, served=False) == 0.5
    assert plan.ended(0, ran=0.9, served=False) == 1.0
    assert plan.ended(0, ran=0.9, served=False) is None


def test_serving_again_forgets_failed_starts() -> None:
    plan = launched()
    plan.ended(0, ran=0.9, served=False)
    plan.ended(0, ran=0.9, served=False)
    plan.served(0)
    assert plan.ended(0, ran=1.0, served=True) is not None
    assert plan.ended(0, ran=0.9, served=False) is not None
    assert plan.ended(0, ran=0.9, served=False) is not None
    assert plan.ended(0, ran=0.9, served=False) is None


@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.floats(0, 100), st.booleans(), st.booleans()),
        max_size=60,
    )
)
def test_every_wait_is_bounded_and_only_failed_starts_give_up(
    events: list[tuple[int, float, bool, bool]],
) -> None:
    plan = launched(3, initial=0.25, maximum=8.0)
    failed_in_a_row = [0, 0, 0]
    for index, ran, served, serves_again in events:
        if served:
            # A worker that served said so before it ended.
            plan.served(index)
        delay = plan.ended(index, ran=ran, served=served)
        failed_in_a_row[index] = 0 if served else failed_in_a_row[index] + 1
        if delay is None:
            assert failed_in_a_row[index] == 3
            return
        assert 0.25 <= delay <= 8.0
        if serves_again:
            plan.served(index)
            failed_in_a_row[index] = 0
