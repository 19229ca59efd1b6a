"""What a person reads about the model's context: pure text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.consumers.context_lines import (
    compact_reply,
    compaction_line,
    context_line,
    short_tokens,
)
from hermes_trio.events import ContextCompacted


@pytest.mark.parametrize(
    ("tokens", "shown"),
    [
        (0, "0"),
        (-5, "0"),
        (950, "950"),
        (999, "999"),
        (1_000, "1k"),
        (1_250, "1.2k"),
        (9_020, "9k"),
        (9_960, "10k"),
        (12_345, "12k"),
        (41_234, "41k"),
        (131_072, "131k"),
        (999_600, "1M"),
        (1_500_000, "1.5M"),
        (2_000_000, "2M"),
    ],
)
def test_short_tokens(tokens: int, shown: str) -> None:
    assert short_tokens(tokens) == shown


@given(st.integers(0, 10**8))
def test_short_tokens_is_short_and_never_ends_in_a_dot_or_zero_decimal(tokens: int) -> None:
    shown = short_tokens(tokens)
    assert len(shown) <= 4
    assert not shown.endswith(".") and ".0" not in shown


def test_lines() -> None:
    summary = ContextCompacted("summary", 41_234, 9_020, 14, 32_768, summary="s")
    assert compaction_line(summary) == (
        "🗜 Summarised the earlier conversation to stay within the model's context "
        "(41k → 9k tokens)."
    )
    dropped = ContextCompacted("truncation", 41_000, 30_000, 4, 32_768)
    assert compaction_line(dropped).endswith("(41k → 30k tokens).")
    why = ContextCompacted("truncation", 41_000, 30_000, 4, 32_768, "the summary failed")
    assert compaction_line(why).endswith("(41k → 30k tokens): the summary failed")
    assert compact_reply(summary) == compaction_line(summary)
    assert compact_reply(None).startswith("Nothing to compact")
    assert context_line(12_345, 32_768, 41) == "Context: 12k of 33k tokens (38%), 41 messages"
    assert context_line(10, 0, 1) == "Context: 10 of 0 tokens (0%), 1 message"
