"""Retry timing, shared by every loop that retries: the model client
(jittered backoff between attempts), the gateway's adapter supervisor and
the platforms' polling (plain doubling), and ``Retry-After`` headers.

Pure arithmetic, no I/O and no clock: the callers sleep on trio's clock.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = ["Backoff", "backoff_delay", "parse_retry_after"]


class Backoff:
    """Waits that start at ``initial`` and double after every failure, up to
    ``maximum`` (never below ``initial``); ``reset()`` after a success.

    It keeps the next wait rather than a count of failures, so a loop that
    fails for days never overflows a power of two.
    """

    def __init__(self, initial: float, maximum: float) -> None:
        self.initial = initial
        self.maximum = max(maximum, initial)
        self._upcoming = initial

    @property
    def upcoming(self) -> float:
        """The wait ``next()`` will return."""
        return self._upcoming

    def next(self) -> float:
        """The wait before the next try; the one after is twice as long."""
        delay = self._upcoming
        self._upcoming = min(delay * 2, self.maximum)
        return delay

    def reset(self) -> None:
        self._upcoming = self.initial


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Delay before retry number ``attempt`` (0-based).

    "Equal jitter": half the exponential step is fixed so retries never bunch
    at zero, half is random so many clients hitting one 429 spread out.
    """
    step = min(cap, base * 2.0**attempt)
    half = step / 2
    jitter: float = rng.uniform(0, half) if rng is not None else random.uniform(0, half)
    return half + jitter


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        # An HTTP date is wall-clock by definition; this is the one place the
        # client reads the wall clock, and only to turn a date into a delay.
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)
