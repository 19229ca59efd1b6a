"""The message editor under trio's MockClock, over the in-memory messenger.

``autojump_clock`` is pytest-trio's fixture for ``MockClock(autojump_threshold=0)``:
a test that takes it runs on that clock, so sleeps cost no real time and every
timestamp below is exact.
"""

from __future__ import annotations

from functools import partial
from itertools import pairwise

import pytest
import trio
from editor_support import QUIET, Script, finished, produce, run, tokens, words
from trio.testing import MockClock

from hermes_trio.consumers.editor import EditorControl, run_editor
from hermes_trio.consumers.editor_plan import EditorReport, EditorSettings
from hermes_trio.consumers.messenger import Capabilities, PlatformError, RateLimited, measure
from hermes_trio.events import (
    Commentary,
    ContextCompacted,
    GatewayNotice,
    LongToolHint,
    MessageChunk,
    MessageStop,
    StreamEvent,
    ToolCallChunk,
    ToolCallFinished,
)
from hermes_trio.testing.fake_messenger import FakeMessenger

TELEGRAM = Capabilities(can_edit=True, max_length=4096, length_unit="utf16")
WHATSAPP = Capabilities(can_edit=False, max_length=80, can_delete=False, can_type=False)


def on_grid(times: list[float], start: float, interval: float) -> bool:
    return all(abs((t - start) / interval - round((t - start) / interval)) < 1e-6 for t in times)


async def test_edit_times_are_exactly_on_the_interval_grid(autojump_clock: MockClock) -> None:
    m = FakeMessenger(TELEGRAM)
    chunks = words(60)
    final = "".join(chunks).strip()
    # A quiet gap mid-stream: the next edit still waits for the grid.
    script = [*tokens(chunks[:40]), (2.2, MessageChunk("pause ")), *tokens(chunks[40:])]
    report = await run([*script, (0.05, finished(final))], m)

    send, *edits = m.message_calls()
    assert send.kind == "send" and send.time == pytest.approx(2.0)  # the 20th chunk
    assert send.text == "".join(chunks[:20]).strip() + " ▌"
    interim = [c for c in edits if c.text and c.text.endswith(" ▌")]
    assert [c.time for c in interim][:2] == [pytest.approx(3.5), pytest.approx(5.0)]
    assert on_grid([c.time for c in interim], send.time, 1.5)
    assert len(interim) >= 4
    assert all(c.outcome == "ok" for c in m.calls)  # identical text was never sent
    assert m.visible() == [final]
    assert report == EditorReport(["1"], final, delivered=True, interrupted=False)


async def test_429_pauses_edits_for_retry_after(autojump_clock: MockClock) -> None:
    m = FakeMessenger(TELEGRAM, rate_limit_at={2}, retry_after=4.0)  # the second edit
    chunks = words(100)
    await run([*tokens(chunks), (0.05, finished("".join(chunks)))], m)

    calls = m.message_calls()
    refused = calls[2]
    assert refused.outcome == "rate_limited" and refused.time == pytest.approx(5.0)
    # Nothing at all until the pause is over, then edits resume on a new grid.
    assert calls[3].time == pytest.approx(9.0)
    assert calls[4].time == pytest.approx(10.5)
    assert [c.outcome for c in calls].count("rate_limited") == 1


async def test_final_edit_lands_after_a_rate_limit(autojump_clock: MockClock) -> None:
    chunks = words(25)
    m = FakeMessenger(TELEGRAM, rate_limit_at={1}, retry_after=7.0)
    report = await run([*tokens(chunks), (0.1, finished("All done."))], m)

    _, refused, final = m.message_calls()
    assert refused.outcome == "rate_limited" and refused.text == "All done."
    assert final.time == pytest.approx(refused.time + 7.0)
    assert final.text == "All done." and final.outcome == "ok"
    assert m.visible() == ["All done."]
    assert report.delivered and report.message_ids == ["1"]


async def test_final_edit_retries_are_bounded_then_an_error_note(
    autojump_clock: MockClock,
) -> None:
    def refuse_final(kind: str, text: str | None) -> bool:
        return kind == "edit" and text is not None and not text.endswith("▌")

    m = FakeMessenger(TELEGRAM, fail_when=refuse_final)
    settings = EditorSettings(typing_interval=0, final_retry_limit=4)
    report = await run([*tokens(words(25)), (0.1, finished("answer"))], m, settings)

    assert len([c for c in m.calls if c.outcome == "error"]) == 4
    assert m.visible()[1].startswith("⚠️ could not deliver the full answer")
    assert not report.delivered


async def test_cancelled_turn_leaves_a_clean_message(autojump_clock: MockClock) -> None:
    m = FakeMessenger(TELEGRAM)
    chunks = words(80)
    send, receive = trio.open_memory_channel[StreamEvent](0)
    returned = False
    with trio.CancelScope() as turn:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce, send, tokens(chunks))

            async def consumer() -> None:
                nonlocal returned
                await run_editor(receive, m, QUIET)
                returned = True

            nursery.start_soon(consumer)
            await trio.sleep(4.25)  # the user sends /stop
            turn.cancel()
    assert turn.cancelled_caught and not returned  # Cancelled propagated
    shown = "".join(chunks[:42]).strip()
    assert m.visible() == [f"{shown}\n\n⏹ interrupted"]
    # The last edit was at 3.5: the cleanup edit waits for the grid, well within its deadline.
    assert m.calls[-1].time == pytest.approx(5.0)
    assert "▌" not in m.visible()[0]


async def test_cancel_during_a_slow_send_never_duplicates(autojump_clock: MockClock) -> None:
    m = FakeMessenger(TELEGRAM, latency=1.0)
    send, receive = trio.open_memory_channel[StreamEvent](0)
    with trio.CancelScope() as turn:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce, send, tokens(words(30)))
            nursery.start_soon(run_editor, receive, m, QUIET)
            await trio.sleep(2.55)  # the first send is on the wire until 3.0
            turn.cancel()
    assert [c.kind for c in m.message_calls()] == ["send", "edit"]
    assert m.visible() == ["".join(words(25)).strip() + "\n\n⏹ interrupted"]


async def test_cleanup_is_bounded_by_its_deadline(autojump_clock: MockClock) -> None:
    m = FakeMessenger(TELEGRAM, rate_limit_at={1}, retry_after=60.0)
    settings = EditorSettings(typing_interval=0, cleanup_deadline=5.0)
    send, receive = trio.open_memory_channel[StreamEvent](0)
    with trio.CancelScope() as turn:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce, send, tokens(words(40)))
            nursery.start_soon(run_editor, receive, m, settings)
            await trio.sleep(3.6)  # after the refused edit at 3.5
            turn.cancel()
    assert trio.current_time() == pytest.approx(3.6 + 5.0)


async def test_stream_closed_without_turn_finished_counts_as_interrupted(
    autojump_clock: MockClock,
) -> None:
    m = FakeMessenger(TELEGRAM)
    report = await run(tokens(words(30)), m)
    assert report.interrupted and report.delivered
    assert m.visible() == ["".join(words(30)).strip() + "\n\n⏹ interrupted"]


async def test_tool_progress_is_edited_and_text_continues_below(
    autojump_clock: MockClock,
) -> None:
    m = FakeMessenger(TELEGRAM)
    first = words(25)
    script: Script = [
        *tokens(first),
        (0.1, MessageStop(False)),
        (0.0, ToolCallChunk("terminal", "ls -la", {"command": "ls -la"}, 0)),
        (1.0, ToolCallFinished("terminal", 1.0, True, 0)),
        (0.0, ToolCallChunk("web_search", "trio nurseries", {}, 0)),
        (30.0, LongToolHint("web_search", 30.0)),
        (5.0, ToolCallFinished("web_search", 35.0, True, 0)),
        (0.0, Commentary("Found it.")),
        *tokens(["The ", "answer."]),
        (0.1, finished("The answer.")),
    ]
    report = await run(script, m)
    assert m.visible() == [
        "".join(first).strip(),
        "🔧 web_search: trio nurseries (30s)",
        "Found it.",
        "The answer.",
    ]
    assert [c.kind for c in m.message_calls() if c.message_id == "2"] == ["send", "edit", "edit"]
    assert report.message_ids == ["1", "2", "3", "4"]


async def test_platform_without_edits_gets_one_complete_answer(
    autojump_clock: MockClock,
) -> None:
    m = FakeMessenger(WHATSAPP)
    chunks = words(60)
    final = "".join(chunks).strip()
    script: Script = [
        (0.0, ToolCallChunk("terminal", "date", {}, 0)),
        (0.5, ToolCallFinished("terminal", 0.5, True, 0)),
        *tokens(chunks),
        (0.1, GatewayNotice("restart", "restarting soon")),
        (0.1, finished(final)),
    ]
    report = await run(script, m)
    assert all(c.kind == "send" for c in m.calls)
    messages = m.visible()
    # A notice goes out when it comes; the tool line waits for the answer.
    assert messages[0] == "restarting soon"
    assert messages[1].startswith("🔧 terminal: date\n\nw0 w1")
    assert " ".join(messages[1:]).split() == ["🔧", "terminal:", "date", *final.split()]
    assert all(len(t) <= 80 for t in messages)
    assert min(c.time for c in m.calls if c.text in messages[1:]) == pytest.approx(6.7)
    assert report.delivered


FOLDED_TURN: Script = [
    *tokens(["Let ", "me ", "look."]),
    (0.1, Commentary("Let me look.")),
    (0.0, MessageStop(False)),
    (0.0, ToolCallChunk("terminal", "ls", {}, 0)),
    (20.0, LongToolHint("terminal", 20.0)),
    (5.0, ToolCallFinished("terminal", 25.0, True, 0)),
    (0.0, ToolCallChunk("read_file", "notes.txt", {}, 1)),
    (0.5, ToolCallFinished("read_file", 0.5, True, 1)),
    *tokens(["Two ", "files."]),
    (0.1, finished("Two files.")),
]


@pytest.mark.parametrize(
    ("show_tools", "expected"),
    [
        (True, "Let me look.\n\n🔧 terminal: ls\n🔧 read_file: notes.txt\n\nTwo files."),
        (False, "Let me look.\n\nTwo files."),
    ],
)
async def test_a_platform_without_edits_gets_the_whole_turn_in_one_message(
    autojump_clock: MockClock, show_tools: bool, expected: str
) -> None:
    m = FakeMessenger(Capabilities(can_edit=False, max_length=4096, can_delete=False))
    settings = EditorSettings(
        typing_interval=0, show_tool_progress=show_tools, long_tool_hint="slow {tool}"
    )
    report = await run(FOLDED_TURN, m, settings)
    assert [(c.kind, c.text) for c in m.calls] == [("send", expected)]
    # Sent when the turn ended, never before; no hint where nothing can be edited.
    assert m.calls[0].time == pytest.approx(26.2)
    assert report.delivered and not report.hinted


async def test_a_hidden_long_tool_gets_one_hint_and_verbose_shows_it_at_once(
    autojump_clock: MockClock,
) -> None:
    m = FakeMessenger(TELEGRAM)
    settings = EditorSettings(
        typing_interval=0, show_tool_progress=False, long_tool_hint="⏳ {tool} is slow: /verbose"
    )
    control = EditorControl()
    script: Script = [
        (0.0, ToolCallChunk("terminal", "make", {}, 0)),
        (10.0, LongToolHint("terminal", 10.0)),
        (10.0, LongToolHint("terminal", 20.0)),
        (10.0, ToolCallFinished("terminal", 30.0, True, 0)),
        (0.0, ToolCallChunk("terminal", "make test", {}, 1)),
        (10.0, LongToolHint("terminal", 10.0)),
        (1.0, ToolCallFinished("terminal", 11.0, True, 1)),
        (0.1, finished("built")),
    ]
    verbose = partial(control.show_tools, True)
    report = await run(script, m, settings, control=control, at=(25.0, verbose))
    sends = [(c.time, c.text) for c in m.calls if c.kind == "send"]
    # One hint at the first long-tool event, none at the second; /verbose at
    # 25 s shows the running tool at once, with how long it has run.
    assert sends == [
        (10.0, "⏳ terminal is slow: /verbose"),
        (25.0, "🔧 terminal: make (20s)"),
        (41.1, "built"),
    ]
    edits = [(c.time, c.text) for c in m.calls if c.kind == "edit"]
    assert edits[0] == (31.0, "🔧 terminal: make test")  # on the 1.5 s grid from 25.0
    assert edits[-1] == (40.0, "🔧 terminal: make test (10s)")
    assert report.hinted and report.delivered


async def test_verbose_off_mid_turn_stops_the_progress_message_where_it_is(
    autojump_clock: MockClock,
) -> None:
    m = FakeMessenger(TELEGRAM)
    control = EditorControl()
    control.show_tools(False)  # asked before the editor started: applies when it does
    control.show_tools(True)
    script: Script = [
        (0.0, ToolCallChunk("terminal", "one", {}, 0)),
        (2.0, ToolCallFinished("terminal", 2.0, True, 0)),
        (0.0, ToolCallChunk("terminal", "two", {}, 1)),
        (2.0, ToolCallFinished("terminal", 2.0, True, 1)),
        (0.1, finished("done")),
    ]
    await run(script, m, control=control, at=(1.0, partial(control.show_tools, False)))
    assert m.visible() == ["🔧 terminal: one", "done"]
    control.show_tools(True)  # after the turn: nothing happens


async def test_streaming_off_sends_one_message_at_the_end(autojump_clock: MockClock) -> None:
    m = FakeMessenger(TELEGRAM)
    settings = EditorSettings(streaming=False, typing_interval=0)
    await run([*tokens(words(50)), (0.1, finished("final"))], m, settings)
    assert [(c.kind, c.text, c.time) for c in m.calls] == [("send", "final", pytest.approx(5.1))]


async def test_long_answer_is_split_by_telegram_utf16_limit(autojump_clock: MockClock) -> None:
    m = FakeMessenger(TELEGRAM)
    paragraph = "Emoji 😀 count twice in UTF-16. " * 20 + "\n\n"
    chunks = [paragraph] * 14  # ≈ 9,000 UTF-16 code units
    final = "".join(chunks).strip()
    report = await run([*tokens(chunks, gap=0.5), (0.1, finished(final))], m)
    pages = m.visible()
    assert len(pages) == 3
    assert all(measure(p, "utf16") <= 4096 for p in pages)
    assert " ".join(pages).split() == final.split()
    assert all(p.startswith("Emoji") and p.endswith("UTF-16.") for p in pages)  # paragraph cuts
    assert report.message_ids == ["1", "2", "3"]


async def test_typing_indicator_while_nothing_is_shown(autojump_clock: MockClock) -> None:
    m = FakeMessenger(TELEGRAM)
    await run([(9.0, MessageChunk("hi")), (0.1, finished("hi"))], m, EditorSettings())
    assert [c.time for c in m.calls if c.kind == "typing"] == [0.0, 4.0, 8.0]


async def test_a_slow_platform_never_slows_the_producer(autojump_clock: MockClock) -> None:
    m = FakeMessenger(TELEGRAM, latency=2.0)
    send, receive = trio.open_memory_channel[StreamEvent](0)  # unbuffered
    produced_at: list[float] = []

    async def producer() -> None:
        async with send:
            for chunk in words(50):
                await trio.sleep(0.1)
                await send.send(MessageChunk(chunk))
                produced_at.append(trio.current_time())
            await send.send(finished("".join(words(50))))
            produced_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(producer)
        report = await run_editor(receive, m, QUIET)
    assert produced_at[-1] == pytest.approx(5.0)
    assert report.delivered and m.visible() == ["".join(words(50)).strip()]


async def test_fake_messenger_behaves_like_a_strict_platform(autojump_clock: MockClock) -> None:
    m = FakeMessenger(
        Capabilities(can_edit=True, max_length=10), rate_limit_after=2, retry_after=3.0
    )
    mid = await m.send("hello")
    await m.edit(mid, "hello")  # "not modified" is success, but recorded
    assert m.calls[-1].outcome == "not_modified"
    with pytest.raises(RateLimited) as limited:
        await m.edit(mid, "hi")
    assert limited.value.retry_after == 3.0
    await trio.sleep(1.0)
    with pytest.raises(RateLimited) as again:  # still paused: the remaining time
        await m.typing()
    assert again.value.retry_after == pytest.approx(2.0)
    await trio.sleep(2.0)
    with pytest.raises(PlatformError, match="too long"):
        await m.edit(mid, "x" * 11)
    with pytest.raises(PlatformError, match="empty"):
        await m.send("  ")
    await m.delete(mid)
    assert m.visible() == [] and m.history[mid] == ["hello"]


NOTICE_NOW = GatewayNotice("online", "back online")
NOTICE_LATER = GatewayNotice("long_turn", "still working")


async def test_scheduled_notices_appear_on_time_and_not_after_the_turn(
    autojump_clock: MockClock,
) -> None:
    m = FakeMessenger(WHATSAPP)
    send, receive = trio.open_memory_channel[StreamEvent](0)
    script: Script = [(5.0, MessageChunk("answer ")), (0.0, finished("answer"))]
    never = GatewayNotice("long_turn", "too late")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce, send, script)
        report = await run_editor(
            receive, m, QUIET, notices=[(60.0, never), (3.0, NOTICE_LATER), (0.0, NOTICE_NOW)]
        )
    assert [(c.text, c.time) for c in m.calls] == [
        ("back online", 0.0),
        ("still working", 3.0),
        ("answer", 5.0),
    ]
    # The editor returned once the answer was out, not when the last notice was due.
    assert trio.current_time() == 5.0 and report.delivered


async def _cut_off(m: FakeMessenger, *, crash: bool) -> tuple[list[str], BaseException | None]:
    send, receive = trio.open_memory_channel[StreamEvent](0)
    stopping = GatewayNotice("restart", "the gateway is stopping")
    raised: BaseException | None = None
    with trio.CancelScope() as outer:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(produce, send, tokens(words(30)))
                nursery.start_soon(
                    partial(run_editor, receive, m, QUIET, interrupt_notice=lambda: stopping)
                )
                await trio.sleep(3.0)
                if crash:
                    m.fail_when = lambda kind, text: True
                    raise RuntimeError("boom")
                outer.cancel()
        except BaseException as exc:
            raised = exc
    return m.visible(), raised


async def test_a_cancel_from_outside_shows_the_interrupt_notice(autojump_clock: MockClock) -> None:
    shown, _ = await _cut_off(FakeMessenger(TELEGRAM), crash=False)
    (text,) = shown
    assert text.endswith("\n\nthe gateway is stopping") and "▌" not in text


async def test_a_crash_is_not_told_as_the_interrupt_notice(autojump_clock: MockClock) -> None:
    m = FakeMessenger(TELEGRAM)
    shown, raised = await _cut_off(m, crash=True)
    assert raised is not None
    everything = [text for texts in m.history.values() for text in texts]
    assert everything and not any("gateway is stopping" in text for text in everything)


NATIVE_STREAM = Capabilities(can_edit=True, max_length=4000, shows_cursor=False)


async def test_a_platform_with_its_own_indicator_gets_no_cursor_and_a_final_edit(
    autojump_clock: MockClock,
) -> None:
    m = FakeMessenger(NATIVE_STREAM)
    chunks = words(40)
    final = "".join(chunks).strip()
    await run([*tokens(chunks), (0.1, finished(final))], m)
    texts = [c.text for c in m.message_calls()]
    assert not any("▌" in text for text in texts)
    # Without a cursor the text only grows: every interim text starts the next.
    assert all(b.startswith(a.strip()) for a, b in pairwise(texts))
    assert [c.final for c in m.message_calls()] == [False] * (len(texts) - 1) + [True]
    assert m.visible() == [final]


COMPACTED = ContextCompacted("summary", 41_234, 9_020, 14, 32_768, summary="what came before")
SUMMARY_LINE = (
    "🗜 Summarised the earlier conversation to stay within the model's context "
    "(41k → 9k tokens)."
)


async def test_a_compaction_is_one_short_line_before_the_answer(autojump_clock: MockClock) -> None:
    script: Script = [
        (0.0, ToolCallChunk("terminal", "date", {}, 0)),
        (0.5, ToolCallFinished("terminal", 0.5, True, 0)),
        (0.0, MessageStop(False)),
        (0.1, COMPACTED),
        *tokens(words(5)),
        (0.1, finished("".join(words(5)))),
    ]
    m = FakeMessenger(TELEGRAM)
    await run(script, m)
    shown = m.visible()
    assert SUMMARY_LINE in shown
    assert shown.index(SUMMARY_LINE) == len(shown) - 2  # just above the answer
    assert "what came before" not in " ".join(shown)


async def test_a_truncation_line_says_why_and_display_can_hide_it(
    autojump_clock: MockClock,
) -> None:
    dropped = ContextCompacted("truncation", 41_000, 30_500, 6, 32_768, "the summary took 60 s")
    line = (
        "🗜 Dropped the oldest messages to stay within the model's context "
        "(41k → 30k tokens): the summary took 60 s"
    )
    no_edits = Capabilities(can_edit=False, max_length=500, can_delete=False, can_type=False)
    for caps, show, expected in (
        (TELEGRAM, True, [line, "ok"]),
        # A platform without edits gets it folded into its one answer.
        (no_edits, True, [f"{line}\n\nok"]),
        (TELEGRAM, False, ["ok"]),
    ):
        m = FakeMessenger(caps)
        settings = EditorSettings(show_compaction=show, typing_interval=0)
        await run([(0.0, dropped), (0.1, finished("ok"))], m, settings)
        assert m.visible() == expected
