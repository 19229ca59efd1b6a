"""Discord's rate-limit buckets, kept from headers with explicit times."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.platforms.discord.ratelimit import RateLimits, RouteKey

EDIT = "PATCH /channels/{channel_id}/messages/{message_id}"
SEND = "POST /channels/{channel_id}/messages"


def headers(bucket: str, remaining: int, reset_after: float) -> dict[str, str]:
    return {
        "X-RateLimit-Bucket": bucket,
        "X-RateLimit-Limit": "5",
        "X-RateLimit-Remaining": str(remaining),
        "X-RateLimit-Reset-After": str(reset_after),
    }


def test_an_unknown_route_may_go() -> None:
    assert RateLimits().wait(RouteKey(SEND, "1"), 0.0) == 0.0


def test_an_empty_bucket_waits_until_its_reset() -> None:
    limits = RateLimits()
    key = RouteKey(SEND, "1")
    limits.update(key, headers("abc", 0, 2.5), 10.0)
    assert limits.wait(key, 10.0) == 2.5
    assert limits.wait(key, 11.0) == 1.5
    assert limits.wait(key, 12.5) == 0.0
    assert limits.acquire(key, 12.5) == 0.0  # a new window: the next answer tells
    assert limits.wait(key, 12.5) == 0.0


def test_buckets_are_per_channel() -> None:
    limits = RateLimits()
    limits.update(RouteKey(SEND, "1"), headers("abc", 0, 5), 0.0)
    assert limits.wait(RouteKey(SEND, "1"), 1.0) == 4.0
    assert limits.wait(RouteKey(SEND, "2"), 1.0) == 0.0


def test_routes_sharing_a_bucket_share_its_budget() -> None:
    limits = RateLimits()
    limits.update(RouteKey(SEND, "1"), headers("shared", 3, 5), 0.0)
    limits.update(RouteKey(EDIT, "1"), headers("shared", 0, 5), 0.1)
    assert limits.wait(RouteKey(SEND, "1"), 1.0) == 4.1


def test_acquire_counts_calls_before_their_answers() -> None:
    limits = RateLimits()
    key = RouteKey(SEND, "1")
    limits.update(key, headers("abc", 2, 5), 0.0)
    assert limits.acquire(key, 0.1) == 0.0
    assert limits.acquire(key, 0.2) == 0.0
    assert limits.acquire(key, 0.3) == 4.7


def test_a_429_blocks_the_route_and_a_global_one_every_route() -> None:
    limits = RateLimits()
    limits.limited(RouteKey(EDIT, "1"), 3.0, False, 0.0)
    assert limits.wait(RouteKey(EDIT, "1"), 1.0) == 2.0
    assert limits.wait(RouteKey(SEND, "1"), 1.0) == 0.0
    limits.limited(RouteKey(EDIT, "1"), 10.0, True, 1.0)
    assert limits.wait(RouteKey(SEND, "9"), 2.0) == 9.0
    assert limits.wait(RouteKey("GET /gateway/bot"), 11.0) == 0.0


def test_bad_headers_are_ignored() -> None:
    limits = RateLimits()
    key = RouteKey(SEND, "1")
    for remaining, reset in [("x", "1"), ("0", "nan"), ("0", "-1"), ("0", None)]:
        sent = {"x-ratelimit-remaining": remaining}
        if reset is not None:
            sent["x-ratelimit-reset-after"] = reset
        limits.update(key, sent, 0.0)
        assert limits.wait(key, 0.0) == 0.0


def test_the_number_of_buckets_is_bounded() -> None:
    limits = RateLimits()
    for channel in range(5000):
        limits.update(RouteKey(SEND, str(channel)), headers("abc", 0, 60), 0.0)
    assert len(limits._states) == 4096
    assert limits.wait(RouteKey(SEND, "0"), 1.0) == 0.0  # the oldest went first
    assert limits.wait(RouteKey(SEND, "4999"), 1.0) == 59.0


@given(
    limit=st.integers(1, 10),
    window=st.floats(0.5, 10),
    gaps=st.lists(st.floats(0, 3), min_size=1, max_size=60),
)
def test_calls_that_go_never_exceed_the_budget_discord_announced(
    limit: int, window: float, gaps: list[float]
) -> None:
    """Against a server with ``limit`` calls per fixed window, a client that
    only calls when ``acquire`` says 0 is never answered 429."""
    limits = RateLimits()
    key = RouteKey(SEND, "1")
    now = 0.0
    window_start: float | None = None
    used = 0
    for gap in gaps:
        now += gap
        if window_start is not None and now >= window_start + window:
            window_start, used = None, 0
        if limits.acquire(key, now) > 0:
            continue
        if window_start is None:
            window_start = now
        used += 1
        assert used <= limit
        limits.update(key, headers("b", limit - used, window_start + window - now), now)
