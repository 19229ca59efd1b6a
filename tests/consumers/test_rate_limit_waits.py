"""A platform's rate limit is waited out within bounds by the one helper
every one-off message call shares: an approval prompt and a reply give up
at once when the platform asks for longer than they may wait, instead of
holding the turn or the session for as long as it asks."""

from __future__ import annotations

import pytest
import trio
from test_approval_prompts import ASKED
from trio.testing import MockClock

from hermes_trio.consumers.approval_prompts import PROMPT_RATE_LIMIT_WAIT, ApprovalPrompts
from hermes_trio.consumers.messenger import RateLimited
from hermes_trio.consumers.rate_limits import waiting_out_rate_limits
from hermes_trio.testing import FakeMessenger


async def test_a_prompt_gives_up_at_once_on_a_wait_longer_than_it_may_take(
    autojump_clock: MockClock,
) -> None:
    chat = FakeMessenger(rate_limit_at={0}, retry_after=3600.0)
    prompts = ApprovalPrompts(chat)
    await prompts.ask(ASKED)
    # Not an hour later: at once, with the question still open (it may be
    # answered elsewhere, or expire).
    assert trio.current_time() == 0.0
    assert prompts.open == [ASKED.id] and chat.messages == {}


async def test_a_prompt_waits_out_a_short_limit(autojump_clock: MockClock) -> None:
    chat = FakeMessenger(rate_limit_at={0}, retry_after=2.0)
    await ApprovalPrompts(chat).ask(ASKED)
    assert trio.current_time() == 2.0 and len(chat.messages) == 1


async def test_the_waits_are_bounded_in_time_and_in_calls(autojump_clock: MockClock) -> None:
    calls: list[float] = []

    async def always_limited() -> None:
        calls.append(trio.current_time())
        raise RateLimited(1.0)

    with pytest.raises(RateLimited):
        await waiting_out_rate_limits(always_limited, within=2.5)
    # 1 s waits while they end within 2.5 s: calls at 0, 1, 2; the next
    # wait would end at 3.
    assert calls == [0.0, 1.0, 2.0]
    calls.clear()
    with pytest.raises(RateLimited):
        await waiting_out_rate_limits(always_limited, within=100.0, attempts=3)
    assert calls == [2.0, 3.0, 4.0]
    assert PROMPT_RATE_LIMIT_WAIT <= 10.0
