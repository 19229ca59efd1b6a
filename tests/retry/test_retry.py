"""Retry timing shared by the model client, the supervisor and polling."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from hermes_trio.retry import Backoff, backoff_delay, parse_retry_after


def test_backoff_doubles_up_to_its_maximum_and_starts_over() -> None:
    backoff = Backoff(1.0, 5.0)
    assert [backoff.next() for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    backoff.reset()
    assert backoff.upcoming == 1.0
    assert backoff.next() == 1.0
    assert backoff.upcoming == 2.0


def test_a_maximum_below_the_first_wait_keeps_the_first_wait() -> None:
    backoff = Backoff(2.0, 0.5)
    assert [backoff.next() for _ in range(3)] == [2.0, 2.0, 2.0]


def test_backoff_never_overflows() -> None:
    backoff = Backoff(1.0, 60.0)
    for _ in range(5000):
        backoff.next()
    assert backoff.upcoming == 60.0


@pytest.mark.parametrize("attempt", range(6))
def test_jittered_delay_stays_within_half_and_whole_step(attempt: int) -> None:
    rng = random.Random(attempt)
    step = min(10.0, 0.5 * 2**attempt)
    for _ in range(50):
        assert step / 2 <= backoff_delay(attempt, 0.5, 10.0, rng) <= step


def test_retry_after_seconds_and_dates() -> None:
    now = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after("Mon, 01 Jan 2024 12:00:30 GMT", now=now) == 30.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("") is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("nan") is None
