"""The terminal consumer's pure decisions: batching, Markdown blocks, ops."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from hermes_trio.consumers.terminal import _LiveArea
from hermes_trio.consumers.terminal_plan import (
    BlockSplitter,
    CloseBox,
    MarkdownBlock,
    Notice,
    OpenBox,
    ReasoningBlock,
    ReasoningDelta,
    TerminalPlan,
    TextDelta,
    ToolLine,
    format_duration,
    spinner_frame,
    tail_lines,
)
from hermes_trio.events import (
    ApprovalRequested,
    ApprovalResolved,
    Commentary,
    ContextCompacted,
    GatewayNotice,
    MessageChunk,
    MessageStop,
    ReasoningChunk,
    StreamEvent,
    ToolCallChunk,
    ToolCallFinished,
    ToolProgress,
    TurnFinished,
    Usage,
    coalesce,
)


def split_all(text: str) -> list[str]:
    splitter = BlockSplitter()
    blocks = splitter.feed(text)
    rest = splitter.flush()
    return [*blocks, *([rest] if rest is not None else [])]


def split_pieces(pieces: list[str]) -> tuple[list[str], list[str]]:
    """(blocks completed while streaming, all blocks including the flush)."""
    splitter = BlockSplitter()
    streamed: list[str] = []
    for piece in pieces:
        streamed += splitter.feed(piece)
    rest = splitter.flush()
    return streamed, [*streamed, *([rest] if rest is not None else [])]


def chop(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


# ---------------------------------------------------------------------------
# coalesce


def test_coalesce_merges_runs_and_keeps_order() -> None:
    events: list[StreamEvent] = [
        MessageChunk("a"),
        MessageChunk("b"),
        ReasoningChunk("r1"),
        ReasoningChunk("r2"),
        MessageChunk("c"),
        MessageStop(final=True),
        MessageChunk("d"),
    ]
    assert coalesce(events) == [
        MessageChunk("ab", tokens=2),
        ReasoningChunk("r1r2"),
        MessageChunk("c"),
        MessageStop(final=True),
        MessageChunk("d"),
    ]


@given(st.lists(st.sampled_from(["x", "y ", "\n", "`"]), max_size=40))
def test_coalesce_keeps_all_text(parts: list[str]) -> None:
    merged = coalesce([MessageChunk(p) for p in parts])
    assert len(merged) <= 1
    assert "".join(e.text for e in merged if isinstance(e, MessageChunk)) == "".join(parts)
    assert sum(e.tokens for e in merged if isinstance(e, MessageChunk)) == len(parts)


# ---------------------------------------------------------------------------
# BlockSplitter


def test_paragraphs_end_at_blank_lines() -> None:
    splitter = BlockSplitter()
    assert splitter.feed("First para\nstill first") == []
    assert splitter.feed("\n\nSecond") == ["First para\nstill first"]
    assert splitter.pending == "Second"
    assert splitter.flush() == "Second"
    assert splitter.pending == ""


def test_blank_lines_inside_a_fence_do_not_split() -> None:
    text = "```python\ndef f():\n\n    return 1\n\n```\nafter\n"
    splitter = BlockSplitter()
    blocks = splitter.feed(text)
    assert blocks == ["```python\ndef f():\n\n    return 1\n\n```"]
    assert splitter.pending == "after\n"


def test_fence_is_complete_when_its_closing_line_is() -> None:
    splitter = BlockSplitter()
    assert splitter.feed("```\ncode\n``") == []
    assert splitter.in_fence
    assert splitter.feed("`") == []  # the closing line is not finished yet
    assert splitter.feed("\n") == ["```\ncode\n```"]
    assert not splitter.in_fence


def test_fence_interrupts_a_paragraph() -> None:
    assert split_all("Look:\n```sh\nls\n```\nDone.") == ["Look:", "```sh\nls\n```", "Done."]


def test_closing_fence_must_match_kind_and_length() -> None:
    text = "````\n```\nstill code\n~~~\n````\n"
    assert split_all(text) == ["````\n```\nstill code\n~~~\n````"]
    assert split_all("~~~\na\n~~~~\nb") == ["~~~\na\n~~~~", "b"]


def test_inline_triple_backticks_do_not_open_a_fence() -> None:
    assert split_all("use ```x``` here\n\nnext") == ["use ```x``` here", "next"]
    assert split_all("```x``` at start\n\nnext") == ["```x``` at start", "next"]


def test_leading_and_repeated_blank_lines_are_dropped() -> None:
    assert split_all("\n\n\nA\n\n\n\nB\n\n") == ["A", "B"]
    assert split_all("  \n\t\n") == []


def test_unclosed_fence_is_flushed_as_is() -> None:
    splitter = BlockSplitter()
    assert splitter.feed("```py\nx = 1\n\ny") == []
    assert splitter.flush() == "```py\nx = 1\n\ny"


_MD_ALPHABET = st.sampled_from(["a", "b c", " ", "\n", "\n\n", "```", "~~~", "`", "# h", "  "])


@given(st.lists(_MD_ALPHABET, max_size=60), st.lists(st.integers(0, 500), max_size=20))
def test_chunking_never_changes_the_blocks(parts: list[str], cuts: list[int]) -> None:
    text = "".join(parts)
    whole_streamed, whole = split_pieces([text])
    streamed, every = split_pieces(chop(text, cuts))
    assert every == whole
    assert streamed == whole_streamed


@given(st.lists(_MD_ALPHABET, max_size=60))
def test_blocks_keep_every_non_blank_line_in_order(parts: list[str]) -> None:
    text = "".join(parts)
    blocks = split_all(text)
    assert all(b.strip() and not b.startswith("\n") and not b.endswith("\n") for b in blocks)
    inside = [line for b in blocks for line in b.split("\n")]
    assert [ln for ln in inside if ln.strip()] == [ln for ln in text.split("\n") if ln.strip()]


def _fence_balanced(block: str) -> bool:
    """A reference check: the block does not end inside an open fence."""
    fence: tuple[str, int] | None = None
    for line in block.split("\n"):
        m = re.match(r"^ {0,3}(`{3,}|~{3,})(.*)$", line)
        if not m:
            continue
        marker, rest = m.groups()
        if fence is None:
            if not (marker[0] == "`" and "`" in rest):
                fence = (marker[0], len(marker))
        elif marker[0] == fence[0] and len(marker) >= fence[1] and not rest.strip():
            fence = None
    return fence is None


@given(st.lists(_MD_ALPHABET, max_size=80), st.lists(st.integers(0, 500), max_size=20))
def test_streamed_blocks_never_end_inside_a_fence(parts: list[str], cuts: list[int]) -> None:
    streamed, _ = split_pieces(chop("".join(parts), cuts))
    assert all(_fence_balanced(b) for b in streamed)


def test_tail_lines() -> None:
    assert tail_lines("a\nb\nc", 2) == ("b\nc", True)
    assert tail_lines("a\nb\nc", 3) == ("a\nb\nc", False)
    assert tail_lines("abc", 1) == ("abc", False)
    assert tail_lines("a\n", 1) == ("", True)
    assert tail_lines("a", 0) == ("", True)


def test_small_helpers() -> None:
    assert format_duration(1.25) == "1.2s" or format_duration(1.25) == "1.3s"
    assert format_duration(125) == "2m05s"
    assert spinner_frame(0.0) != spinner_frame(0.09)


# ---------------------------------------------------------------------------
# TerminalPlan


def finished(text: str, reason: str = "stop", error: str | None = None) -> TurnFinished:
    return TurnFinished(text, Usage(), reason, error=error)


def test_streamed_answer_opens_a_box_and_renders_blocks() -> None:
    plan = TerminalPlan()
    plan.start(0.0)
    assert plan.live().waiting_since == 0.0
    ops = plan.feed([MessageChunk("Hello "), MessageChunk("**world**\n\nSecond")], 1.0)
    assert ops == [
        OpenBox(),
        TextDelta("Hello **world**\n\nSecond"),
        MarkdownBlock("Hello **world**"),
    ]
    live = plan.live()
    assert live.in_box and live.pending_text == "Second" and live.waiting_since is None
    ops = plan.feed([MessageStop(final=True), finished("Hello **world**\n\nSecond")], 2.0)
    assert ops == [MarkdownBlock("Second"), CloseBox()]
    assert plan.end(3.0) == []
    assert plan.finished is not None and plan.finished.finish_reason == "stop"


def test_non_streaming_answer_comes_whole_from_turn_finished() -> None:
    plan = TerminalPlan()
    plan.start(0.0)
    assert plan.feed([MessageStop(final=True)], 1.0) == []
    assert plan.live().waiting_since == 0.0  # still the spinner
    ops = plan.feed([finished("A\n\nB")], 1.0)
    assert ops == [
        OpenBox(),
        TextDelta("A\n\nB"),
        MarkdownBlock("A"),
        MarkdownBlock("B"),
        CloseBox(),
    ]


def test_commentary_is_shown_only_when_it_was_not_streamed() -> None:
    streamed = TerminalPlan()
    ops = streamed.feed([MessageChunk("Looking."), Commentary("Looking."), MessageStop(False)], 0)
    assert ops == [OpenBox(), TextDelta("Looking."), MarkdownBlock("Looking."), CloseBox()]
    whole = TerminalPlan()
    ops = whole.feed([Commentary("Looking."), MessageStop(False)], 0)
    assert ops == [OpenBox(), TextDelta("Looking."), MarkdownBlock("Looking."), CloseBox()]


def test_tools_are_live_then_printed_with_their_duration() -> None:
    plan = TerminalPlan()
    plan.start(0.0)
    plan.feed([MessageStop(False), ToolCallChunk("terminal", "ls", {}, 0)], 1.0)
    live = plan.live()
    assert [t.name for t in live.tools] == ["terminal"] and live.animated
    assert live.waiting_since is None
    ops = plan.feed([ToolCallFinished("terminal", 2.5, False, 0)], 3.5)
    assert ops == [ToolLine("terminal", "ls", 2.5, "failed")]
    assert plan.live().waiting_since == 3.5  # the model is asked again


def test_a_tools_progress_shows_on_its_live_line() -> None:
    """An MCP server's progress notifications (ToolProgress) redraw the
    running tool's line in the terminal; a report for no running call is
    ignored."""
    plan = TerminalPlan()
    plan.start(0.0)
    plan.feed([MessageStop(False), ToolCallChunk("ev__slow", "slow", {}, 0)], 1.0)
    plan.feed([ToolProgress("ev__slow", 0, 3, 10, "copying"), ToolProgress("x", 5, 1)], 2.0)
    (tool,) = plan.live().tools
    assert tool.progress == "3/10 copying"
    area = _LiveArea()
    area.view, area.now = plan.live(), 2.5
    console = Console(record=True, width=80, force_terminal=False)
    console.print(area)
    assert "ev__slow  slow · 3/10 copying" in console.export_text()


def test_hidden_tools_and_reasoning() -> None:
    plan = TerminalPlan(show_tools=False, show_reasoning=False)
    ops = plan.feed(
        [
            ReasoningChunk("hmm"),
            ToolCallChunk("terminal", "ls", {}, 0),
            ToolCallFinished("terminal", 1.0, True, 0),
        ],
        0,
    )
    assert ops == [] and plan.live().tools == ()


def test_reasoning_is_committed_before_the_answer() -> None:
    plan = TerminalPlan(show_reasoning=True)
    ops = plan.feed([ReasoningChunk("step one\n\nstep")], 0)
    assert ops == [ReasoningDelta("step one\n\nstep"), ReasoningBlock("step one")]
    assert plan.live().pending_reasoning == "step"
    ops = plan.feed([MessageChunk("Answer")], 1)
    assert ops == [ReasoningBlock("step"), OpenBox(), TextDelta("Answer")]


def test_error_keeps_the_partial_answer_and_adds_one_line() -> None:
    plan = TerminalPlan()
    plan.feed([MessageChunk("partial")], 0)
    ops = plan.feed([MessageStop(True), finished("partial", "error", "upstream exploded")], 1)
    assert ops == [
        MarkdownBlock("partial"),
        CloseBox(),
        Notice("error: upstream exploded", "error"),
    ]


def test_interrupt_mid_stream_marks_the_box() -> None:
    plan = TerminalPlan()
    plan.feed([MessageChunk("para one\n\npara tw")], 0)
    ops = plan.end(1.0)
    assert ops == [MarkdownBlock("para tw"), Notice("⏹ interrupted", "interrupted"), CloseBox()]
    assert plan.finished is None and plan.end(2.0) == []
    assert plan.live().waiting_since is None


def test_interrupt_while_a_tool_runs() -> None:
    plan = TerminalPlan()
    plan.feed([MessageStop(False), ToolCallChunk("terminal", "sleep 30", {}, 0)], 1.0)
    ops = plan.end(3.0)
    assert ops == [
        ToolLine("terminal", "sleep 30", 2.0, "interrupted"),
        Notice("⏹ interrupted", "interrupted"),
    ]


def test_a_compaction_is_an_info_notice_unless_hidden() -> None:
    dropped = ContextCompacted("truncation", 12_345, 950, 3, 4096, "the summary request failed")
    line = (
        "🗜 Dropped the oldest messages to stay within the model's context "
        "(12k → 950 tokens): the summary request failed"
    )
    assert TerminalPlan().feed([dropped], 0) == [Notice(line, "info")]
    assert TerminalPlan(show_compaction=False).feed([dropped], 0) == []


def test_gateway_notice_and_length_warning() -> None:
    plan = TerminalPlan()
    ops = plan.feed([GatewayNotice("restart", "restarting"), MessageStop(True)], 0)
    assert ops == [Notice("restarting", "info")]
    ops = plan.feed([finished("cut", "length")], 0)
    assert ops[-1].kind == "warning"  # type: ignore[union-attr]


@given(
    st.lists(_MD_ALPHABET, min_size=1, max_size=40),
    st.lists(st.integers(0, 400), max_size=15),
    st.lists(st.integers(1, 5), max_size=10),
)
def test_plan_blocks_match_the_whole_text_for_any_batching(
    parts: list[str], cuts: list[int], batch_sizes: list[int]
) -> None:
    text = "".join(parts)
    events: list[StreamEvent] = [MessageChunk(p) for p in chop(text, cuts)]
    events += [MessageStop(True), finished(text)]
    plan = TerminalPlan()
    ops = []
    i = 0
    for size in [*batch_sizes, len(events)]:
        ops += plan.feed(events[i : i + size], float(i))
        i += size
    ops += plan.end(99.0)
    assert [o.text for o in ops if isinstance(o, MarkdownBlock)] == split_all(text)
    assert "".join(o.text for o in ops if isinstance(o, TextDelta)) == text
    boxes = [o for o in ops if isinstance(o, OpenBox | CloseBox)]
    assert boxes == ([OpenBox(), CloseBox()] if text.strip() else [])
    assert not plan.live().in_box


# --- approvals ----------------------------------------------------------------


def _asked(approval_id: str = "mcpr_1", timeout: float = 300.0) -> ApprovalRequested:
    return ApprovalRequested(
        approval_id, "terminal", {"command": "reboot"}, "reboot", "rebooting", timeout, timeout
    )


def test_an_approval_question_is_shown_and_awaited_until_resolved() -> None:
    plan = TerminalPlan(show_tools=False)  # the question shows even without tool lines
    ops = plan.feed([ToolCallChunk("terminal", "reboot", {}, 0), _asked()], 0.0)
    assert ops == [
        Notice("⚠ terminal needs your approval (rebooting)", "warning"),
        Notice("    reboot", "question"),
    ]
    assert plan.awaiting("mcpr_1") and not plan.awaiting("mcpr_2")
    assert plan.feed([ApprovalResolved("mcpr_1", "approved", "me")], 1.0) == [
        Notice("✓ allowed once", "approved")
    ]
    assert not plan.awaiting("mcpr_1")


def test_an_mcp_tools_question_does_not_call_it_a_dangerous_command() -> None:
    # MCP tools ask for approval too (require_approval); what they run is a
    # server's tool, not a command the safety check flagged.
    asked = ApprovalRequested(
        "mcpr_2",
        "time__convert_time",
        {"time": "12:00"},
        'convert_time {"time": "12:00"}',
        "tool 'convert_time' of the MCP server 'time'",
        300.0,
        300.0,
    )
    ops = TerminalPlan(show_tools=False).feed([asked], 0.0)
    assert ops[0] == Notice(
        "⚠ time__convert_time needs your approval (tool 'convert_time' of the MCP server 'time')",
        "warning",
    )
    assert "dangerous" not in ops[0].text


@pytest.mark.parametrize(
    ("resolved", "line"),
    [
        (
            ApprovalResolved("mcpr_1", "approved", "me", always=True),
            "✓ allowed for the rest of this session",
        ),
        (ApprovalResolved("mcpr_1", "denied", "me"), "✗ denied"),
        (ApprovalResolved("mcpr_1", "denied", "me", "not today"), "✗ denied: not today"),
        (ApprovalResolved("mcpr_1", "expired"), "✗ no answer in 90s: denied"),
        (ApprovalResolved("mcpr_1", "cancelled"), "⏹ approval cancelled: the turn was interrupted"),
    ],
)
def test_how_an_approval_ended_is_one_line(resolved: ApprovalResolved, line: str) -> None:
    plan = TerminalPlan()
    plan.feed([_asked(timeout=90.0)], 0.0)
    (notice,) = plan.feed([resolved], 90.0)
    assert isinstance(notice, Notice) and notice.text == line


def test_a_resolution_in_the_same_batch_leaves_nothing_to_ask() -> None:
    plan = TerminalPlan()
    plan.feed([_asked(), ApprovalResolved("mcpr_1", "approved", "callback")], 0.0)
    assert not plan.awaiting("mcpr_1")


def test_what_tools_and_servers_say_is_shown_escaped() -> None:
    """A tool's name, its preview (an MCP tool's server-side name and
    arguments), its progress message, an approval's reason, a denial and a
    turn's error come from outside: a newline, an escape sequence, a C1
    control or a bidirectional override in them is shown as an escape, never
    written to the terminal raw."""
    bad = "x\n12:00 forged\r\x1b[31mred\u202eevil\u2067\u200f\x9b2J\x85"
    plan = TerminalPlan()
    ops = plan.feed(
        [
            ToolCallChunk(f"srv__{bad}", f"peek{bad} {{}}", {}, 0),
            ToolProgress(f"srv__{bad}", 0, 1, 3, bad),
        ],
        0.0,
    )
    running = plan.live().tools
    ops += plan.feed(
        [
            ApprovalRequested("a1", bad, {}, bad, bad, 10.0, 10.0),
            ApprovalResolved("a1", "denied", "me", bad),
            ToolCallFinished(f"srv__{bad}", 1.0, False, 0),
            TurnFinished("", Usage(), "error", error=bad),
        ],
        1.0,
    )
    shown = [
        value
        for item in (*ops, *running)
        for value in (getattr(item, name) for name in getattr(item, "__slots__", ()))
        if isinstance(value, str)
    ]
    assert len(shown) >= 8 and all(bad not in text for text in shown)
    assert [text for text in shown if not text.isprintable()] == []
    assert any("\\x1b[31mred\\u202eevil" in text for text in shown)
    assert any("1/3 x\\x0a12:00" in tool.progress for tool in running)
