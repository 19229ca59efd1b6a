"""Pure tests of the message editor's decisions: splitting, the ledger, timing.

A tiny synchronous chat (``Sim``) plays the platform and a simulated clock,
so every decision of ``EditorPlan`` is checked without trio.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_trio.consumers.editor_plan import Action, EditorPlan, EditorSettings
from hermes_trio.consumers.messenger import Capabilities, LengthUnit, measure
from hermes_trio.consumers.splitting import Paginator, cut, split_all
from hermes_trio.events import (
    Commentary,
    GatewayNotice,
    LongToolHint,
    MessageChunk,
    MessageStop,
    ReasoningChunk,
    StreamEvent,
    ToolCallChunk,
    ToolCallFinished,
    ToolProgress,
    TurnFinished,
    Usage,
)

TELEGRAM = Capabilities(can_edit=True, max_length=4096, length_unit="utf16")
WHATSAPP = Capabilities(can_edit=False, max_length=4096, can_delete=False)
QUIET = EditorSettings(typing_interval=0)  # no typing indicator: keeps call lists short
EPS = 1e-6


def finished(text: str, reason: str = "stop", error: str | None = None) -> TurnFinished:
    return TurnFinished(text, Usage(), reason, error=error)


@dataclass
class Call:
    time: float
    kind: str
    message_id: str | None
    text: str
    outcome: str  # ok | rate_limited | error


@dataclass
class Sim:
    """A synchronous chat that answers the plan's calls instantly."""

    plan: EditorPlan
    caps: Capabilities
    rate_limit_at: set[int] = field(default_factory=set)
    retry_after: float = 3.0
    fail: Callable[[Action], bool] | None = None
    calls: list[Call] = field(default_factory=list)
    messages: dict[str, str] = field(default_factory=dict)
    paused_until: float = -math.inf
    now: float = 0.0
    sent: int = 0
    refuse_drafts_from: float = math.inf
    """Drafts from this time on are refused (``drafts_refused``)."""

    def step(self) -> Action | None:
        """Make at most one call now."""
        action = self.plan.next_action(self.now)
        if action is None:
            return None
        if action.kind == "typing":
            self.plan.succeeded(action, self.now)
            return action
        assert self.now >= self.paused_until, "called the platform during a 429 pause"
        index = len(self.calls)
        text = action.text
        if action.text:
            assert measure(text, self.caps.length_unit) <= self.caps.max_length
            assert text.strip()
        if index in self.rate_limit_at:
            self.calls.append(Call(self.now, action.kind, action.message_id, text, "rate_limited"))
            self.paused_until = self.now + self.retry_after
            self.plan.rate_limited(action, self.retry_after, self.now)
            return action
        if self.fail is not None and self.fail(action):
            self.calls.append(Call(self.now, action.kind, action.message_id, text, "error"))
            self.plan.failed(action, "refused", self.now)
            return action
        if action.kind == "send":
            mid = str(self.sent + 1)
            self.sent += 1
            self.calls.append(Call(self.now, "send", mid, text, "ok"))
            self.messages[mid] = text
            self.plan.succeeded(action, self.now, mid)
        elif action.kind == "draft":
            assert self.caps.drafts
            if self.now >= self.refuse_drafts_from:
                self.calls.append(Call(self.now, "draft", None, text, "error"))
                self.plan.drafts_refused(action, self.now)
            else:
                self.calls.append(Call(self.now, "draft", None, text, "ok"))
                self.plan.succeeded(action, self.now)
        elif action.kind == "edit":
            self.calls.append(Call(self.now, "edit", action.message_id, text, "ok"))
            assert action.message_id is not None
            assert self.caps.can_edit
            assert self.messages[action.message_id] != text, "identical text re-sent"
            self.messages[action.message_id] = text
            self.plan.succeeded(action, self.now)
        else:
            self.calls.append(Call(self.now, "delete", action.message_id, text, "ok"))
            assert action.message_id is not None
            del self.messages[action.message_id]
            self.plan.succeeded(action, self.now)
        return action

    def settle(self) -> list[Action]:
        """All calls due right now."""
        done = []
        while (action := self.step()) is not None:
            done.append(action)
        return done

    def feed(self, event: StreamEvent) -> list[Action]:
        self.plan.feed(event, self.now)
        return self.settle()

    def advance(self, until: float) -> None:
        """Let time pass to ``until``, making calls exactly when due."""
        while True:
            self.settle()
            wake = self.plan.wake_at(self.now)
            assert wake > self.now or self.plan.done, "plan would busy-loop"
            if wake > until:
                break
            self.now = wake
        self.now = until
        self.settle()

    def run(self, script: list[tuple[float, StreamEvent]], *, tail: float = 600.0) -> None:
        """Feed ``(time, event)`` pairs in order, then run until done."""
        pending = deque(script)
        while pending:
            at, event = pending.popleft()
            self.advance(max(at, self.now))
            self.feed(event)
        self.advance(self.now + tail)

    def edits(self, mid: str | None = None) -> list[Call]:
        return [c for c in self.calls if c.kind == "edit" and (mid is None or c.message_id == mid)]


def make(
    caps: Capabilities = TELEGRAM,
    s: EditorSettings = QUIET,
    *,
    rate_limit_at: set[int] | None = None,
    retry_after: float = 3.0,
    fail: Callable[[Action], bool] | None = None,
) -> Sim:
    return Sim(EditorPlan(s, caps), caps, rate_limit_at or set(), retry_after, fail)


def words(n: int, start: int = 0) -> list[str]:
    return [f"w{i} " for i in range(start, start + n)]


def stream(chunks: list[str], gap: float = 0.1, t0: float = 0.0) -> list[tuple[float, StreamEvent]]:
    return [(t0 + gap * (i + 1), MessageChunk(c)) for i, c in enumerate(chunks)]


# ------------------------------------------------------------------ splitting


def test_cut_prefers_paragraph_then_line_break() -> None:
    text = "a" * 30 + "\n\n" + "b" * 20 + "\n" + "c" * 40
    c = cut(text, 60, "chars")
    assert c.page == "a" * 30
    assert text[c.resume :].lstrip() == "b" * 20 + "\n" + "c" * 40
    c = cut("x" * 30 + "\n" + "y" * 20 + " " + "z" * 40, 60, "chars")
    assert c.page == "x" * 30


def test_cut_never_leaves_a_page_less_than_half_full() -> None:
    text = "hi\n" + "word " * 30
    c = cut(text, 60, "chars")
    assert len(c.page) >= 30
    assert not c.page.endswith(" ")


def test_cut_avoids_code_fence_when_it_can() -> None:
    prose = "Here is the code:\n"
    code = "```python\n" + "".join(f"x = {i}\n" for i in range(8)) + "```\n"
    text = prose + code + "after"
    c = cut(text, len(prose) + 40, "chars")
    assert c.page == "Here is the code:"
    assert c.reopen == ""


def test_cut_inside_unavoidable_fence_closes_and_reopens_it() -> None:
    code = "```python\n" + "".join(f"value_{i} = {i}\n" for i in range(20)) + "```"
    pages = split_all(code, 80, "chars")
    assert len(pages) > 1
    for page in pages:
        assert len(page) <= 80
        assert page.startswith("```python\n")
        assert page.endswith("```")
    body = "".join(p.removeprefix("```python\n").removesuffix("```") for p in pages)
    assert body.split() == code.removeprefix("```python\n").removesuffix("```").split()


def test_cut_measures_utf16_and_hard_cuts_long_words() -> None:
    text = "😀" * 100  # each emoji is two UTF-16 code units
    pages = split_all(text, 50, "utf16")
    assert [measure(p, "utf16") for p in pages] == [50, 50, 50, 50]
    assert "".join(pages) == text


def test_paginator_freezes_pages_and_reuses_them_for_the_final_text() -> None:
    p = Paginator(40, "chars", reserve=" ▌")
    snapshots: list[list[str]] = []
    for w in words(40):
        p.append(w)
        assert len(p.live() + " ▌") <= 40
        snapshots.append(list(p.frozen))
    assert len(p.frozen) >= 2
    for before, after in pairwise(snapshots):
        assert after[: len(before)] == before  # a frozen page never changes
    final = p.finalize(p.raw)
    assert final[: len(p.frozen)] == p.frozen
    assert " ".join(final).split() == p.raw.split()


def test_paginator_reopens_fence_only_once_text_follows() -> None:
    p = Paginator(40, "chars", reserve=" ▌")
    p.append("```sh\n")
    for i in range(10):
        p.append(f"echo {i}\n")
    assert p.frozen and p.frozen[0].endswith("\n```")
    assert p.live().startswith("```sh\n")


_FENCE_LINE = re.compile(r"^\s*(```|~~~)", re.M)


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(alphabet="ab \n😀é.", max_size=400),
    limit=st.integers(8, 90),
    unit=st.sampled_from(["chars", "utf16", "bytes"]),
)
def test_split_all_property(text: str, limit: int, unit: LengthUnit) -> None:
    pages = split_all(text, limit, unit)
    assert all(p.strip() and measure(p, unit) <= limit for p in pages)
    assert "".join(pages).split() == [] or re.sub(r"\s", "", "".join(pages)) == re.sub(
        r"\s", "", text
    )


@settings(max_examples=100, deadline=None)
@given(
    blocks=st.lists(
        st.tuples(st.booleans(), st.lists(st.text(alphabet="ab c", max_size=12), max_size=8)),
        max_size=6,
    ),
    limit=st.integers(40, 120),
)
def test_split_all_keeps_fences_balanced(blocks: list[tuple[bool, list[str]]], limit: int) -> None:
    parts = []
    for fenced, lines in blocks:
        body = "\n".join(lines)
        parts.append(f"```py\n{body}\n```" if fenced else body)
    text = "\n\n".join(parts)
    for page in split_all(text, limit, "chars"):
        assert len(page) <= limit
        assert len(_FENCE_LINE.findall(page)) % 2 == 0, page


# --------------------------------------------------------------------- ledger


def test_nothing_is_sent_before_min_tokens() -> None:
    sim = make()
    for w in words(19):
        assert sim.feed(MessageChunk(w)) == []
    [send] = sim.feed(MessageChunk("w19 "))
    assert send.kind == "send"
    assert send.text == "".join(words(20)).strip() + " ▌"


def test_min_tokens_counts_the_tokens_a_chunk_joins() -> None:
    sim = make()
    assert sim.feed(MessageChunk("".join(words(12)), tokens=12)) == []
    [send] = sim.feed(MessageChunk("".join(words(20)[12:]), tokens=8))
    assert send.text == "".join(words(20)).strip() + " ▌"


def test_reasoning_is_not_shown_and_typing_shows_while_waiting() -> None:
    sim = make(s=EditorSettings())
    assert [a.kind for a in sim.settle()] == ["typing"]
    assert sim.feed(ReasoningChunk("thinking hard")) == []
    sim.advance(4.0)
    assert sim.calls == []  # typing is not a message call
    assert sim.plan.wake_at(4.0) == pytest.approx(8.0)


def test_short_answer_is_one_message_without_cursor() -> None:
    sim = make()
    sim.run(
        [*stream(["Hello", " there"]), (0.3, MessageStop(True)), (0.3, finished("Hello there"))]
    )
    assert [(c.kind, c.text) for c in sim.calls] == [("send", "Hello there")]
    assert sim.plan.done and sim.plan.report().delivered
    assert sim.plan.report().final_text == "Hello there"


def test_edits_follow_the_interval_grid_and_skip_identical_text() -> None:
    sim = make()
    sim.run(stream(words(20)))  # first message at t=2.0
    sim.advance(10.0)  # no new text: no edits at all
    assert [c.kind for c in sim.calls] == ["send"]
    sim.run([(10.3, MessageChunk("late "))], tail=0)  # off the grid: waits for it
    sim.advance(12.0)
    assert [c.time for c in sim.edits()] == [pytest.approx(11.0)]
    assert sim.edits()[0].text.endswith("late ▌")


def test_final_edit_shows_turn_finished_text_without_cursor_once() -> None:
    sim = make()
    chunks = words(30)
    script = [*stream(chunks), (3.05, MessageStop(True)), (3.05, finished("The final answer."))]
    sim.run(script)
    assert list(sim.messages.values()) == ["The final answer."]
    assert [c.kind for c in sim.calls] == ["send", "edit"]
    # The final edit also waits for the message's interval (2.0 + 1.5).
    assert sim.calls[-1].time == pytest.approx(3.5)
    assert sim.plan.report().message_ids == ["1"]


def test_rate_limit_pauses_all_calls_and_reanchors_the_grid() -> None:
    sim = make(rate_limit_at={1}, retry_after=2.2)
    sim.run(stream(words(100)))
    first_edit = sim.calls[1]
    assert first_edit.outcome == "rate_limited" and first_edit.time == pytest.approx(3.5)
    later = [c.time for c in sim.calls[2:]]
    assert later[0] == pytest.approx(5.7)  # exactly retry_after later
    assert later[1] == pytest.approx(7.2)  # then on the new grid


def test_final_wins_over_sends_and_interim_edits() -> None:
    sim = make(rate_limit_at={2}, retry_after=5.0)
    sim.run([*stream(words(25)), (2.6, ToolCallChunk("search", "cats", {}, 0))], tail=0)
    # send text at 2.0, send progress at 2.6, then the final edit of the text at 3.5 is refused.
    sim.advance(3.5)
    assert [c.outcome for c in sim.calls] == ["ok", "ok", "rate_limited"]
    sim.feed(LongToolHint("search", 30.0))  # an interim edit is now owed as well
    sim.advance(8.5)
    kinds = [(c.kind, c.message_id, c.text.endswith("▌")) for c in sim.calls[3:]]
    assert kinds[0] == ("edit", "1", False)  # the final edit goes first after the pause
    assert sim.calls[3].time == pytest.approx(8.5)


def test_final_retries_are_bounded_then_a_note_is_sent() -> None:
    s = EditorSettings(typing_interval=0, final_retry_limit=3)
    sim = make(s=s, fail=lambda a: a.kind == "edit" and not a.text.endswith("▌"))
    sim.run([*stream(words(25)), (3.0, finished("done"))])
    finals = [c for c in sim.edits() if c.outcome == "error"]
    assert len(finals) == 3
    assert list(sim.messages.values())[-1].startswith("⚠️ could not deliver")
    report = sim.plan.report()
    assert sim.plan.done and not report.delivered


def test_tool_progress_is_edited_and_text_after_boundary_is_a_new_message() -> None:
    sim = make()
    script = [
        *stream(words(25)),
        (2.6, MessageStop(False)),
        (2.6, ToolCallChunk("terminal", "ls -la\n/tmp", {}, 0)),
        (3.0, ToolCallFinished("terminal", 0.4, True, 0)),
        (3.0, ToolCallChunk("read_file", "notes.txt", {}, 0)),
        (40.0, LongToolHint("read_file", 35.0)),
        (41.0, ToolCallFinished("read_file", 38.0, True, 0)),
        *stream(["Done."], t0=41.0),
        (41.2, finished("Done.")),
    ]
    sim.run(script)
    assert list(sim.messages.values()) == [
        "".join(words(25)).strip(),
        "🔧 read_file: notes.txt (35s)",
        "Done.",
    ]
    progress_calls = [c for c in sim.calls if c.message_id == "2" or "🔧" in c.text]
    assert [c.kind for c in progress_calls] == ["send", "edit", "edit"]
    assert progress_calls[0].text == "🔧 terminal: ls -la /tmp"


def test_a_tools_progress_reports_are_edited_into_its_line() -> None:
    """An MCP server's progress notifications (ToolProgress) show on the
    running tool's line, each report an edit, and go with the tool."""
    sim = make()
    script = [
        (0.0, MessageStop(False)),
        (0.0, ToolCallChunk("ev__slow", "slow {}", {}, 0)),
        (2.0, ToolProgress("ev__slow", 0, 1, 3, "step 1")),
        (4.0, ToolProgress("ev__slow", 0, 2, 3, "step 2")),
        (4.5, ToolProgress("ev__slow", 7, 9, None, "another call's")),
        (6.0, ToolCallFinished("ev__slow", 6.0, True, 0)),
        *stream(["Done."], t0=6.0),
        (6.2, finished("Done.")),
    ]
    sim.run(script)
    progress = [c.text for c in sim.calls if "🔧" in c.text]
    assert progress == [
        "🔧 ev__slow: slow {}",
        "🔧 ev__slow: slow {} · 1/3 step 1",
        "🔧 ev__slow: slow {} · 2/3 step 2",
    ]


def test_parallel_tool_calls_share_one_progress_message() -> None:
    sim = make()
    sim.feed(ToolCallChunk("a", "1", {}, 0))
    sim.feed(ToolCallChunk("b", "2", {}, 1))
    sim.advance(2.0)
    assert list(sim.messages.values()) == ["🔧 a: 1\n🔧 b: 2"]


def test_commentary_and_notices_are_their_own_messages_without_duplicates() -> None:
    sim = make()
    sim.run(
        [
            (0.1, MessageChunk("Let me look.")),
            (0.2, MessageStop(False)),
            (0.2, Commentary("Let me look.")),  # already shown as streamed text
            (0.3, Commentary("Checking twice.")),
            (0.4, GatewayNotice("restart", "Gateway restarting soon")),
            (0.5, finished("")),
        ]
    )
    assert list(sim.messages.values()) == [
        "Let me look.",
        "Checking twice.",
        "Gateway restarting soon",
    ]


def test_interrupt_keeps_text_drops_cursor_and_adds_note() -> None:
    sim = make()
    sim.run(stream(words(30)), tail=0)
    sim.advance(3.2)
    sim.plan.interrupt(sim.now)
    sim.advance(20.0)
    text = "".join(words(30)).strip()
    assert list(sim.messages.values()) == [f"{text}\n\n⏹ interrupted"]
    report = sim.plan.report()
    assert report.interrupted and report.delivered and report.final_text == text


def test_interrupt_before_anything_shown_sends_partial_text_and_note() -> None:
    sim = make()
    sim.run([(0.1, MessageChunk("Partial")), (0.2, finished("", "interrupted"))])
    assert list(sim.messages.values()) == ["Partial\n\n⏹ interrupted"]


def test_interrupt_cleanup_gives_up_at_its_deadline() -> None:
    sim = make(rate_limit_at={1}, retry_after=30.0)
    sim.run(stream(words(25)), tail=0)
    sim.advance(3.5)  # interim edit refused: paused for 30 s
    sim.plan.interrupt(sim.now)
    sim.advance(20.0)
    assert sim.plan.done and not sim.plan.report().delivered
    assert len(sim.calls) == 2


def test_error_finish_shows_partial_text_and_error() -> None:
    sim = make()
    sim.run([*stream(words(3)), (1.0, finished("", "error", "model unreachable"))])
    assert list(sim.messages.values()) == ["w0 w1 w2\n\n⚠️ model unreachable"]


def test_platform_without_edits_gets_complete_split_messages_at_the_end() -> None:
    caps = Capabilities(can_edit=False, max_length=50, can_delete=False)
    sim = make(caps=caps)
    text = "".join(words(60)).strip()
    sim.run([*stream(words(60)), (7.0, finished(text))])
    assert all(c.kind == "send" and c.time == pytest.approx(7.0) for c in sim.calls)
    assert all(len(m) <= 50 and "▌" not in m for m in sim.messages.values())
    assert " ".join(sim.messages.values()).split() == text.split()


def test_streaming_off_sends_only_the_final_message() -> None:
    sim = make(s=EditorSettings(streaming=False, typing_interval=0))
    sim.run([*stream(words(60)), (7.0, finished("short"))])
    assert [(c.kind, c.text) for c in sim.calls] == [("send", "short")]


def test_long_stream_is_split_at_a_line_break_and_continues_below() -> None:
    caps = Capabilities(can_edit=True, max_length=60, length_unit="utf16")
    sim = make(caps=caps)
    lines = [f"line {i} 😀 text\n" for i in range(12)]
    text = "".join(lines).strip()
    sim.run([*stream(lines, gap=0.5), (7.0, finished(text))])
    pages = list(sim.messages.values())
    assert len(pages) > 1
    assert all(measure(p, "utf16") <= 60 for p in pages)
    assert "\n".join(pages) == text  # every break fell on a newline


def test_shrinking_final_text_deletes_surplus_messages() -> None:
    caps = Capabilities(can_edit=True, max_length=40)
    sim = make(caps=caps)
    sim.run([*stream(words(40)), (5.0, finished("short after all"))])
    assert list(sim.messages.values()) == ["short after all"]
    assert any(c.kind == "delete" for c in sim.calls)


# ------------------------------------------------------------ property tests

chunk_text = st.text(alphabet="ab  \n😀é`", min_size=1, max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chunks=st.lists(st.tuples(st.integers(0, 50), chunk_text), min_size=1, max_size=60),
    limit=st.integers(30, 120),
    unit=st.sampled_from(["chars", "utf16"]),
    min_tokens=st.integers(1, 25),
    interval=st.sampled_from([0.5, 1.0, 1.5]),
    rate_limits=st.sets(st.integers(0, 25), max_size=3),
    retry_after=st.sampled_from([0.3, 1.0, 4.0]),
    final_gap=st.integers(0, 40),
)
def test_random_token_timings(
    chunks: list[tuple[int, str]],
    limit: int,
    unit: LengthUnit,
    min_tokens: int,
    interval: float,
    rate_limits: set[int],
    retry_after: float,
    final_gap: int,
) -> None:
    caps = Capabilities(can_edit=True, max_length=limit, length_unit=unit)
    s = EditorSettings(edit_interval=interval, min_tokens=min_tokens, typing_interval=0)
    sim = make(caps=caps, s=s, rate_limit_at=rate_limits, retry_after=retry_after)
    script: list[tuple[float, StreamEvent]] = []
    t = 0.0
    for gap, text in chunks:
        t += gap * 0.05
        script.append((t, MessageChunk(text)))
    final = "".join(text for _, text in chunks).strip()
    script.append((t + final_gap * 0.05, finished(final)))
    sim.run(script)  # Sim itself asserts: limit, no identical edits, no calls in a pause

    assert sim.plan.done
    # Every call on one message (send, edits, refused attempts) is an interval apart.
    by_message: dict[str, list[float]] = {}
    for c in sim.calls:
        if c.message_id is not None:
            by_message.setdefault(c.message_id, []).append(c.time)
    for times in by_message.values():
        assert all(b - a >= interval - EPS for a, b in pairwise(times))

    shown = list(sim.messages.values())
    assert all("▌" not in m for m in shown)
    if "`" not in final:
        assert re.sub(r"\s", "", "".join(shown)) == re.sub(r"\s", "", final)
        if measure(final, unit) <= limit:
            assert shown == ([final] if final else [])
    assert sim.plan.report().delivered


@settings(max_examples=60, deadline=None)
@given(
    chunks=st.lists(st.tuples(st.integers(0, 30), chunk_text), min_size=1, max_size=40),
    cut_at=st.integers(0, 80),
)
def test_interrupt_at_random_times_leaves_no_cursor(
    chunks: list[tuple[int, str]], cut_at: int
) -> None:
    caps = Capabilities(can_edit=True, max_length=60, length_unit="utf16")
    sim = make(caps=caps, s=EditorSettings(min_tokens=5, typing_interval=0))
    script: list[tuple[float, StreamEvent]] = []
    t = 0.0
    for gap, text in chunks:
        t += gap * 0.05
        script.append((t, MessageChunk(text)))
    stop = cut_at * 0.05
    sim.run([e for e in script if e[0] <= stop], tail=0)
    sim.advance(max(stop, sim.now))
    sim.plan.interrupt(sim.now)
    sim.advance(sim.now + 30)
    shown = list(sim.messages.values())
    assert shown and all("▌" not in m for m in shown)
    assert shown[-1].endswith("⏹ interrupted")
    assert sim.plan.done and sim.plan.report().delivered


def _event(kind: str, text: str, index: int) -> StreamEvent:
    if kind == "chunk":
        return MessageChunk(text)
    if kind == "boundary":
        return MessageStop(False)
    if kind == "tool":
        return ToolCallChunk(f"tool{index % 3}", text, {}, index % 2)
    if kind == "hint":
        return LongToolHint(f"tool{index % 3}", float(index))
    return Commentary(text)


# (gap in 50 ms units, kind, text) for _event: mostly chunks, some boundaries,
# tool calls, long-tool hints and commentary.
turn_steps = st.lists(
    st.tuples(
        st.integers(0, 40),
        st.sampled_from(["chunk"] * 6 + ["boundary", "tool", "hint", "commentary"]),
        chunk_text,
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=turn_steps,
    can_edit=st.booleans(),
    streaming=st.booleans(),
    limit=st.integers(30, 100),
    rate_limits=st.sets(st.integers(0, 30), max_size=3),
    show_tools=st.booleans(),
)
def test_random_turns_with_tools(
    steps: list[tuple[int, str, str]],
    can_edit: bool,
    streaming: bool,
    limit: int,
    rate_limits: set[int],
    show_tools: bool,
) -> None:
    caps = Capabilities(can_edit=can_edit, max_length=limit, length_unit="utf16")
    s = EditorSettings(
        min_tokens=4,
        streaming=streaming,
        typing_interval=0,
        show_tool_progress=show_tools,
        long_tool_hint="slow {tool}",
    )
    sim = make(caps=caps, s=s, rate_limit_at=rate_limits, retry_after=1.0)
    script: list[tuple[float, StreamEvent]] = []
    t = 0.0
    last_segment: list[str] = []
    for i, (gap, kind, text) in enumerate(steps):
        t += gap * 0.05
        script.append((t, _event(kind, text, i)))
        last_segment = [*last_segment, text] if kind == "chunk" else []
    final = "".join(last_segment).strip()
    script.append((t, finished(final)))
    sim.run(script)  # Sim asserts: limit, no identical edits, no calls in a pause

    report = sim.plan.report()
    assert sim.plan.done and report.delivered
    by_message: dict[str, list[float]] = {}
    for c in sim.calls:
        if c.message_id is not None:
            by_message.setdefault(c.message_id, []).append(c.time)
    for times in by_message.values():
        assert all(b - a >= s.edit_interval - EPS for a, b in pairwise(times))
    shown = list(sim.messages.values())
    assert all("▌" not in m for m in shown)
    # The hint only where progress is hidden and could be shown, at most once.
    assert not report.hinted or (can_edit and not show_tools)
    assert sum(m.startswith("slow tool") for m in shown) == int(report.hinted)
    if not can_edit:
        # Nothing before the turn ended: the whole turn is its last message(s).
        assert all(c.time >= t - EPS for c in sim.calls)
        assert all(("🔧" in m) <= show_tools for m in shown)
    if final and "`" not in final:
        # The answer is delivered exactly once, as the last message(s).
        flat = re.sub(r"\s", "", "".join(shown))
        answer = re.sub(r"\s", "", final)
        assert flat.endswith(answer)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=turn_steps,
    limit=st.integers(30, 100),
    rate_limits=st.sets(st.integers(0, 30), max_size=3),
    refuse_from=st.one_of(st.just(math.inf), st.integers(0, 100).map(lambda n: n * 0.1)),
    long_tool=st.integers(0, 120),
)
def test_random_turns_with_drafts(
    steps: list[tuple[int, str, str]],
    limit: int,
    rate_limits: set[int],
    refuse_from: float,
    long_tool: int,
) -> None:
    caps = Capabilities(can_edit=True, max_length=limit, length_unit="utf16", drafts=True)
    s = EditorSettings(min_tokens=4, typing_interval=0)
    sim = make(caps=caps, s=s, rate_limit_at=rate_limits, retry_after=1.0)
    sim.refuse_drafts_from = refuse_from
    script: list[tuple[float, StreamEvent]] = []
    t = 0.0
    last_segment: list[str] = []
    for i, (gap, kind, text) in enumerate(steps):
        t += gap * 0.05 + (long_tool if kind == "tool" and i == 0 else 0)
        script.append((t, _event(kind, text, i)))
        # The final text is what the last segment streamed (a hint does not
        # end a segment): a final text unlike the stream would rightly edit
        # a page already sent.
        if kind == "chunk":
            last_segment = [*last_segment, text]
        elif kind != "hint":
            last_segment = []
    final = "".join(last_segment).strip()
    script.append((t, finished(final)))
    sim.run(script)  # Sim asserts: limit, no identical edits, no calls in a pause

    assert sim.plan.done and sim.plan.report().delivered
    drafts = [c for c in sim.calls if c.kind == "draft"]
    refused = [c for c in drafts if c.outcome == "error"]
    assert len(refused) <= 1  # once refused, the turn edits
    if not refused:
        # Only final text is ever sent, and nothing is edited.
        assert not any(c.kind == "edit" for c in sim.calls)
        assert not any("▌" in c.text for c in sim.calls if c.kind == "send")
    assert not any("▌" in c.text for c in drafts)
    # Drafts, like edits, are an interval apart.
    assert all(b.time - a.time >= s.edit_interval - EPS for a, b in pairwise(drafts))
    shown = list(sim.messages.values())
    assert all("▌" not in m for m in shown)
    if final and "`" not in final:
        flat = re.sub(r"\s", "", "".join(shown))
        assert flat.endswith(re.sub(r"\s", "", final))
