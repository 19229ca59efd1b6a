"""Events construct with the defaults a user expects (the seeds' own):
only what says which event it is must be given."""

from __future__ import annotations

from hermes_trio.events import (
    ContextCompacted,
    GatewayNotice,
    LongToolHint,
    MessageStop,
    ToolCallChunk,
    ToolCallFinished,
    ToolProgress,
    TurnFinished,
    Usage,
)


def test_message_stop_alone_is_the_final_stop() -> None:
    assert MessageStop() == MessageStop(final=True)


def test_a_tool_call_needs_only_its_tool() -> None:
    assert ToolCallChunk("x") == ToolCallChunk("x", preview="", args={}, index=0)
    assert ToolCallChunk("x").args is not ToolCallChunk("y").args
    assert ToolCallFinished("x") == ToolCallFinished("x", duration=0.0, ok=True, index=0)
    assert LongToolHint("x") == LongToolHint("x", duration=0.0)
    assert ToolProgress("x") == ToolProgress("x", index=0, progress=0.0)


def test_a_notice_needs_only_its_kind() -> None:
    assert GatewayNotice("restart") == GatewayNotice("restart", text="", extra={})


def test_a_turn_and_a_compaction_need_only_what_they_are() -> None:
    assert TurnFinished("done") == TurnFinished("done", usage=Usage(), finish_reason="stop")
    assert ContextCompacted("summary") == ContextCompacted(
        "summary", tokens_before=0, tokens_after=0, folded=0
    )
