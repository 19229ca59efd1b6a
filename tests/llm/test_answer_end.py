"""The decision when a streamed answer that said it finished is over, on its own."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.llm.answer_end import DRAIN_GRACE, USAGE_GRACE, AnswerEnd

IDLE = 60.0


def test_before_any_finish_reason_silence_is_the_watchdogs() -> None:
    assert AnswerEnd(wants_usage=True).grace(IDLE) is None


@pytest.mark.parametrize(
    ("wants_usage", "usage_known", "grace"),
    [(True, False, USAGE_GRACE), (True, True, DRAIN_GRACE), (False, False, DRAIN_GRACE)],
)
def test_a_finish_chunk_of_its_own_waits_briefly(
    wants_usage: bool, usage_known: bool, grace: float
) -> None:
    end = AnswerEnd(wants_usage=wants_usage)
    end.finish(with_answer=False, usage_known=usage_known)
    assert end.grace(IDLE) == grace
    assert end.owes_usage == (grace == USAGE_GRACE)


def test_the_usage_chunk_after_it_ends_the_answer() -> None:
    end = AnswerEnd(wants_usage=True)
    end.finish(with_answer=False, usage_known=False)
    end.usage()
    assert end.grace(IDLE) == DRAIN_GRACE and not end.owes_usage


def test_a_finish_reason_with_text_may_be_followed_by_more() -> None:
    end = AnswerEnd(wants_usage=True)
    end.finish(with_answer=True, usage_known=False)
    assert end.grace(IDLE) == IDLE
    end.usage()  # ... unless the usage chunk came after it
    assert end.grace(IDLE) == DRAIN_GRACE


def test_once_the_answer_went_on_after_a_finish_reason_later_ones_are_doubted() -> None:
    end = AnswerEnd(wants_usage=True)
    end.finish(with_answer=False, usage_known=False)
    end.more()
    assert end.grace(IDLE) == IDLE
    end.finish(with_answer=False, usage_known=False)
    assert end.grace(IDLE) == IDLE and not end.owes_usage
    end.usage()
    assert end.grace(IDLE) == DRAIN_GRACE


def test_usage_before_the_finish_reason_does_not_end_it_early() -> None:
    end = AnswerEnd(wants_usage=True)
    end.usage()  # nothing said yet: ignored
    end.finish(with_answer=True, usage_known=True)
    assert end.grace(IDLE) == IDLE


_steps = st.lists(st.sampled_from(["finish", "finish_with_text", "more", "usage"]), max_size=12)


@given(steps=_steps, wants_usage=st.booleans())
def test_the_grace_is_always_one_of_three_and_idle_after_more(
    steps: list[str], wants_usage: bool
) -> None:
    end = AnswerEnd(wants_usage=wants_usage)
    went_on = False
    for step in steps:
        if step == "finish":
            end.finish(with_answer=False, usage_known=False)
        elif step == "finish_with_text":
            end.finish(with_answer=True, usage_known=False)
        elif step == "more" and end.said:
            end.more()
            went_on = True
            assert end.grace(IDLE) == IDLE
        elif step == "usage":
            end.usage()
    grace = end.grace(IDLE)
    if not any(s.startswith("finish") for s in steps):
        assert grace is None
    else:
        assert grace in (USAGE_GRACE, DRAIN_GRACE, IDLE)
        # The short wait for usage only ever follows a first, plain finish.
        if grace == USAGE_GRACE:
            assert wants_usage and not went_on and steps[-1] == "finish"
