"""Waiting out a platform's rate limit, within bounds: the one loop every
one-off message call shares (a reply, an approval prompt). The message
editor plans its own waits (``editor_plan``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from .messenger import RateLimited

__all__ = ["waiting_out_rate_limits"]

T = TypeVar("T")


async def waiting_out_rate_limits(
    call: Callable[[], Awaitable[T]], *, within: float, attempts: int = 5
) -> T:
    """``call()``, waiting out each ``RateLimited`` while the wait ends
    within ``within`` seconds from now, ``attempts`` calls at most; the
    ``RateLimited`` that would need more is raised at once (a platform
    asking for an hour must not hold a turn or a reply for an hour)."""
    deadline = trio.current_time() + within
    for _ in range(attempts - 1):
        try:
            return await call()
        except RateLimited as exc:
            if trio.current_time() + exc.retry_after > deadline:
                raise
            await trio.sleep(exc.retry_after)
    return await call()
