"""The message editor on a platform with drafts (Telegram's
``sendMessageDraft``), under trio's MockClock over the in-memory messenger.

The growing text is the chat's draft, updated on the edit grid and re-sent
before the platform lets it vanish; final text is sent as messages, once;
a refused draft turns the turn to edits."""

from __future__ import annotations

from itertools import pairwise

import pytest
import trio
from editor_support import QUIET, Script, finished, produce, run, tokens, words
from trio.testing import MockClock

from hermes_trio.consumers.editor import run_editor
from hermes_trio.consumers.messenger import Capabilities
from hermes_trio.events import (
    GatewayNotice,
    LongToolHint,
    MessageStop,
    StreamEvent,
    ToolCallChunk,
    ToolCallFinished,
)
from hermes_trio.testing.fake_messenger import FakeCall, FakeMessenger

DRAFTS = Capabilities(can_edit=True, max_length=4096, length_unit="utf16", drafts=True)
CURSOR = " ▌"


def drafts(m: FakeMessenger) -> list[FakeCall]:
    return [c for c in m.calls if c.kind == "draft"]


async def test_growing_text_is_a_draft_and_the_final_text_one_message(
    autojump_clock: MockClock,
) -> None:
    m = FakeMessenger(DRAFTS)
    chunks = words(60)
    final = "".join(chunks).strip()
    report = await run([*tokens(chunks), (0.1, finished(final))], m)

    shown = drafts(m)
    # The first draft once min_tokens (20) arrived, then on the 1.5 s grid.
    assert [c.time for c in shown] == pytest.approx([2.0, 3.5, 5.0])
    assert all(c.outcome == "ok" for c in shown)
    # The same preview growing, without a cursor: the platform animates it.
    texts = [c.text or "" for c in shown]
    assert all(b.startswith(a) and len(b) > len(a) for a, b in pairwise(texts))
    assert not any("▌" in t for t in texts)
    assert final.startswith(texts[-1])
    # Exactly one message, with the final text, and nothing edited.
    assert [(c.kind, c.text, c.time) for c in m.message_calls()] == [
        ("send", final, pytest.approx(6.1))
    ]
    assert m.visible() == [final]
    assert report.delivered and report.message_ids == ["1"]


async def test_the_draft_is_refreshed_while_a_long_tool_runs(autojump_clock: MockClock) -> None:
    m = FakeMessenger(DRAFTS)
    first = words(25)
    script: Script = [
        *tokens(first),
        (0.1, MessageStop(False)),
        (0.0, ToolCallChunk("terminal", "sleep 70", {"command": "sleep 70"}, 0)),
        (40.0, LongToolHint("terminal", 40.0)),
        (30.0, ToolCallFinished("terminal", 70.0, True, 0)),
        *tokens(["The ", "answer."]),
        (0.1, finished("The answer.")),
    ]
    report = await run(script, m)

    progress = "🔧 terminal: sleep 70"
    assert [(c.time, c.text) for c in drafts(m)] == [
        (pytest.approx(2.0), "".join(first[:20]).strip()),
        # The segment closed at 2.6 (its text is a message): the tools are
        # the draft, on the grid.
        (pytest.approx(3.5), progress),
        # Re-sent unchanged every 20 s, well before Telegram's 30 s are up ...
        (pytest.approx(23.5), progress),
        # ... updated on the grid when the hint changes it (at 42.6) ...
        (pytest.approx(43.0), f"{progress} (40s)"),
        # ... and re-sent again until the answer comes.
        (pytest.approx(63.0), f"{progress} (40s)"),
    ]
    gaps = [b.time - a.time for a, b in pairwise(drafts(m))]
    assert max(gaps) <= 20.0 + 1e-6
    assert m.visible() == ["".join(first).strip(), "The answer."]
    assert [c.kind for c in m.message_calls()] == ["send", "send"]
    assert report.delivered


async def test_a_429_on_a_draft_waits_retry_after(autojump_clock: MockClock) -> None:
    m = FakeMessenger(DRAFTS, rate_limit_at={1}, retry_after=3.0)  # the second draft
    chunks = words(100)
    final = "".join(chunks).strip()
    await run([*tokens(chunks), (0.1, finished(final))], m)

    assert [(c.kind, c.outcome, c.time) for c in m.calls] == [
        ("draft", "ok", pytest.approx(2.0)),
        ("draft", "rate_limited", pytest.approx(3.5)),
        # Nothing during the pause; then on a grid anchored at its end.
        ("draft", "ok", pytest.approx(6.5)),
        ("draft", "ok", pytest.approx(8.0)),
        ("draft", "ok", pytest.approx(9.5)),
        ("send", "ok", pytest.approx(10.1)),
    ]
    assert m.visible() == [final]


async def test_a_refused_draft_turns_the_turn_to_edits_with_the_final_text_intact(
    autojump_clock: MockClock,
) -> None:
    m = FakeMessenger(DRAFTS, refuse_drafts=True)
    chunks = words(60)
    final = "".join(chunks).strip()
    report = await run([*tokens(chunks), (0.1, finished(final))], m)

    # One draft tried; what it would have shown is a message at once, then
    # edited on the grid like on any editing platform.
    assert [(c.kind, c.outcome) for c in drafts(m)] == [("draft", "error")]
    calls = m.message_calls()
    assert calls[0].kind == "send" and calls[0].time == pytest.approx(2.0)
    assert calls[0].text == "".join(chunks[:20]).strip() + CURSOR
    assert [c.kind for c in calls[1:]] == ["edit"] * (len(calls) - 1)
    assert [c.time for c in calls[1:-1]] == pytest.approx([3.5, 5.0])
    assert calls[-1].final and calls[-1].text == final
    assert m.visible() == [final]
    assert m.history["1"].count(final) == 1
    assert report.delivered and report.message_ids == ["1"]


async def test_a_refused_draft_during_tools_keeps_only_current_progress(
    autojump_clock: MockClock,
) -> None:
    m = FakeMessenger(DRAFTS)
    script: Script = [
        (0.0, ToolCallChunk("terminal", "date", {}, 0)),
        (1.0, ToolCallFinished("terminal", 1.0, True, 0)),
        (0.0, ToolCallChunk("web_search", "trio", {}, 0)),
        (5.0, ToolCallFinished("web_search", 5.0, True, 0)),
        *tokens(words(30)),
        (0.1, finished("done")),
    ]

    async def refuse_later() -> None:
        await trio.sleep(3.0)
        m.refuse_drafts = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(refuse_later)
        report = await run(script, m)
    assert [(c.text, c.outcome) for c in drafts(m)] == [
        ("🔧 terminal: date", "ok"),
        ("🔧 web_search: trio", "ok"),
        ("".join(words(30)).strip(), "error"),  # on the grid at 9.0
    ]
    # The answer's text became a message and was edited; the finished tools'
    # progress was only ever a draft.
    assert m.visible() == ["done"]
    assert report.delivered


async def test_a_notice_mid_answer_is_a_message_and_the_draft_goes_on(
    autojump_clock: MockClock,
) -> None:
    m = FakeMessenger(DRAFTS)
    chunks = words(60)
    final = "".join(chunks).strip()
    script: Script = [
        *tokens(chunks[:30]),
        (0.0, GatewayNotice("long_turn", "⏳ Still working on it")),
        *tokens(chunks[30:]),
        (0.1, finished(final)),
    ]
    await run(script, m)
    assert m.visible() == ["⏳ Still working on it", final]
    later = [c for c in drafts(m) if c.time > 3.0]
    assert later and all((c.text or "").startswith("".join(chunks[:30])) for c in later)


async def test_an_interrupted_draft_answer_ends_as_one_message(autojump_clock: MockClock) -> None:
    m = FakeMessenger(DRAFTS)
    chunks = words(80)
    send, receive = trio.open_memory_channel[StreamEvent](0)
    with trio.CancelScope() as turn:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce, send, tokens(chunks))
            nursery.start_soon(run_editor, receive, m, QUIET)
            await trio.sleep(4.25)
            turn.cancel()
    shown = "".join(chunks[:42]).strip()
    assert m.visible() == [f"{shown}\n\n⏹ interrupted"]
    assert [c.kind for c in m.message_calls()] == ["send"]
    assert m.calls[-1].time == pytest.approx(4.25)
