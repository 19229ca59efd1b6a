"""Discord's REST rate limits, tracked from response headers, as plain
bookkeeping without a clock (callers pass ``now``).

Discord groups routes into buckets it names in ``X-RateLimit-Bucket``; a
bucket's budget is separate for each value of the route's major parameter
(the channel id for everything we call), so two chats never slow each
other down. Before a call, :meth:`RateLimits.wait` says how long the call
would have to wait; the messenger raises ``RateLimited`` with that instead
of calling, so the message editor pauses the chat rather than hammering a
route into 429s (which count towards Cloudflare's ban of an IP).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["BucketState", "RateLimits", "RouteKey"]

# How many bucket states to keep; the oldest go first. A bot in many
# channels would otherwise keep one entry per channel for ever.
_MAX_BUCKETS = 4096


@dataclass(frozen=True, slots=True)
class RouteKey:
    """One route (``"PATCH /channels/{channel_id}/messages/{message_id}"``)
    for one value of its major parameter."""

    route: str
    major: str = ""


@dataclass(slots=True)
class BucketState:
    remaining: int
    reset_at: float


class RateLimits:
    def __init__(self) -> None:
        self._bucket_of: dict[str, str] = {}
        self._states: dict[tuple[str, str], BucketState] = {}
        self.global_until = 0.0

    def _state_key(self, key: RouteKey) -> tuple[str, str]:
        # Until Discord names the route's bucket, the route is its own bucket.
        return (self._bucket_of.get(key.route, key.route), key.major)

    def wait(self, key: RouteKey, now: float) -> float:
        """Seconds before a call on ``key`` may go out (0: now)."""
        waits = [self.global_until - now]
        state = self._states.get(self._state_key(key))
        if state is not None and state.remaining <= 0:
            waits.append(state.reset_at - now)
        return max(0.0, *waits)

    def acquire(self, key: RouteKey, now: float) -> float:
        """Like :meth:`wait`; when the answer is 0 the call is counted
        against the bucket at once, so calls made before the first answer
        comes back cannot overdraw it."""
        delay = self.wait(key, now)
        if delay == 0:
            state = self._states.get(self._state_key(key))
            if state is not None:
                if state.reset_at <= now:
                    # The window is over; the next answer says the new budget.
                    del self._states[self._state_key(key)]
                else:
                    state.remaining -= 1
        return delay

    def update(self, key: RouteKey, headers: Mapping[str, str], now: float) -> None:
        """Learn from a response's ``X-RateLimit-*`` headers (names in any case)."""
        lowered = {k.lower(): v for k, v in headers.items()}
        bucket = lowered.get("x-ratelimit-bucket")
        if bucket:
            self._bucket_of[key.route] = bucket
        remaining = _number(lowered.get("x-ratelimit-remaining"))
        reset_after = _number(lowered.get("x-ratelimit-reset-after"))
        if remaining is None or reset_after is None:
            return
        self._set(key, int(remaining), now + reset_after)

    def limited(self, key: RouteKey, retry_after: float, is_global: bool, now: float) -> None:
        """A 429: nothing on ``key`` (or anywhere, when global) for ``retry_after`` s."""
        until = now + max(0.0, retry_after)
        if is_global:
            self.global_until = max(self.global_until, until)
        else:
            self._set(key, 0, until)

    def _set(self, key: RouteKey, remaining: int, reset_at: float) -> None:
        state_key = self._state_key(key)
        self._states.pop(state_key, None)
        self._states[state_key] = BucketState(remaining, reset_at)
        while len(self._states) > _MAX_BUCKETS:
            del self._states[next(iter(self._states))]


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if number != number or number < 0:  # NaN or negative
        return None
    return number
