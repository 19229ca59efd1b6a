"""The terminal consumer's trio shell: batching, painting, pausing, interrupts."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

import trio
import trio.testing
from rich.console import Console

from hermes_trio.consumers.terminal import TerminalSettings, TerminalView, run_terminal
from hermes_trio.consumers.terminal_plan import LiveView, Op, TextDelta
from hermes_trio.events import (
    ContextCompacted,
    MessageChunk,
    MessageStop,
    StreamEvent,
    ToolCallChunk,
    ToolCallFinished,
    TurnFinished,
    Usage,
)

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ANSWER = "Some **bold** words.\n\n```python\nprint('hi')\n```\n\nThe end."


def rich_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=60, height=20, color_system="256")
    return console, out


def answer_events(text: str = ANSWER) -> list[StreamEvent]:
    words = [w + " " for w in text.split(" ")]
    words[-1] = words[-1][:-1]
    return [
        *(MessageChunk(w) for w in words),
        MessageStop(final=True),
        TurnFinished(text, Usage(), "stop"),
    ]


async def feed(events: Sequence[StreamEvent], *, close: bool = True, size: int = 256):
    send, receive = trio.open_memory_channel[StreamEvent](size)
    for event in events:
        send.send_nowait(event)
    if close:
        send.close()
    return send, receive


async def test_rich_output_has_a_box_and_rendered_markdown() -> None:
    console, out = rich_console()
    _, receive = await feed(answer_events())
    result = await run_terminal(receive, console, TerminalSettings())
    assert result is not None and result.finish_reason == "stop"
    raw = out.getvalue()
    assert "\x1b[" in raw  # colours and cursor control: it is a terminal
    text = ANSI.sub("", raw)
    assert "╭─ Hermes" in text and "╰" in text
    assert "**bold**" not in text and "```" not in text  # rendered, not raw
    assert "print" in text and "The end." in text


async def test_plain_output_is_the_raw_text_without_control_codes() -> None:
    out, err = io.StringIO(), io.StringIO()
    console = Console(file=out, force_terminal=False, no_color=True)
    events: list[StreamEvent] = [
        MessageStop(final=False),
        ToolCallChunk("terminal", "ls", {}, 0),
        ToolCallFinished("terminal", 0.25, True, 0),
        *answer_events(),
    ]
    _, receive = await feed(events)
    await run_terminal(receive, console, TerminalSettings(plain=True, err=err))
    assert out.getvalue() == ANSWER + "\n"
    assert "\x1b" not in out.getvalue() + err.getvalue()
    assert err.getvalue() == "✓ terminal: ls (0.2s)\n" or "terminal: ls" in err.getvalue()


async def test_plain_non_streaming_answer_and_error_line() -> None:
    out, err = io.StringIO(), io.StringIO()
    console = Console(file=out, force_terminal=False)
    _, receive = await feed(
        [MessageStop(True), TurnFinished("", Usage(), "error", error="model unreachable")]
    )
    result = await run_terminal(receive, console, TerminalSettings(plain=True, err=err))
    assert result is not None and result.error == "model unreachable"
    assert out.getvalue() == ""
    assert err.getvalue() == "error: model unreachable\n"


class SpyPainter:
    def __init__(self) -> None:
        self.calls: list[tuple[list[Op], LiveView]] = []
        self.suspended = 0

    def begin(self) -> None:
        pass

    def apply(self, ops: Sequence[Op], view: LiveView, now: float) -> None:
        self.calls.append((list(ops), view))

    def suspend(self) -> None:
        self.suspended += 1

    def finish(self) -> None:
        pass


def spy_view() -> tuple[TerminalView, SpyPainter]:
    console, _ = rich_console()
    view = TerminalView(console, TerminalSettings())
    spy = SpyPainter()
    view.painter = spy
    return view, spy


async def test_waiting_events_are_drawn_in_one_batch() -> None:
    view, spy = spy_view()
    events = answer_events(" ".join(["word"] * 200))
    _, receive = await feed(events)
    await view.render_turn(receive)
    # start, one batch holding all 202 events, end
    assert len(spy.calls) == 3
    deltas = [op for op in spy.calls[1][0] if isinstance(op, TextDelta)]
    assert len(deltas) == 1  # 200 chunks became one delta


async def test_end_of_channel_without_turn_finished_is_an_interrupt() -> None:
    console, out = rich_console()
    _, receive = await feed([MessageChunk("half an ans")])
    result = await run_terminal(receive, console, TerminalSettings())
    assert result is None
    text = out.getvalue()
    assert "half an ans" in text and "⏹ interrupted" in text
    assert text.rstrip().endswith("╯") or "╰" in text


async def test_cancelling_the_consumer_still_marks_the_answer() -> None:
    console, out = rich_console()
    send, receive = await feed([MessageChunk("partial")], close=False)
    with trio.move_on_after(0.5):
        await run_terminal(receive, console, TerminalSettings())
    assert "partial" in out.getvalue() and "interrupted" in out.getvalue()
    send.close()


async def test_nothing_is_drawn_while_paused(autojump_clock: trio.testing.MockClock) -> None:
    view, spy = spy_view()
    send, receive = trio.open_memory_channel[StreamEvent](16)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(view.render_turn, receive)
        await trio.sleep(0.01)
        with view.paused():
            assert spy.suspended == 1
            drawn = len(spy.calls)
            await send.send(MessageChunk("during the prompt"))
            await trio.sleep(5)
            assert len(spy.calls) == drawn
        await trio.sleep(0.01)
        assert any(TextDelta("during the prompt") in ops for ops, _ in spy.calls)
        send.close()


async def test_running_tools_redraw_on_a_tick(autojump_clock: trio.testing.MockClock) -> None:
    view, spy = spy_view()
    send, receive = trio.open_memory_channel[StreamEvent](16)

    async def produce() -> None:
        async with send:
            await send.send(MessageStop(False))
            await send.send(ToolCallChunk("terminal", "sleep 1", {}, 0))
            await trio.sleep(1.0)
            await send.send(ToolCallFinished("terminal", 1.0, True, 0))
            await send.send(MessageStop(True))
            await send.send(TurnFinished("", Usage(), "stop"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        await view.render_turn(receive)
    ticks = [view_ for ops, view_ in spy.calls if not ops and view_.tools]
    assert 8 <= len(ticks) <= 12  # every 0.1 s for a second


async def test_long_pending_block_is_cropped_to_the_screen() -> None:
    console, out = rich_console()
    send, receive = await feed([MessageChunk("\n".join(f"line {i}" for i in range(200)))])
    await run_terminal(receive, console, TerminalSettings())
    # The live area never drew more rows than the screen has; the block is
    # printed whole once (at the interrupt).
    text = out.getvalue()
    assert text.count("line 0 ") + text.count("line 0\n") >= 1
    assert "line 199" in text
    send.close()


async def test_a_fast_producer_is_coalesced_into_few_paints(
    autojump_clock: trio.testing.MockClock,
) -> None:
    view, spy = spy_view()
    send, receive = trio.open_memory_channel[StreamEvent](4)

    async def produce() -> None:
        async with send:
            for _ in range(1000):
                await send.send(MessageChunk("tok "))
                await trio.sleep(0.001)  # a model at 1000 tokens/s
            await send.send(MessageStop(True))
            await send.send(TurnFinished("", Usage(), "stop"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        await view.render_turn(receive)
    # About one paint per 1/30 s over one second, not one per token.
    assert 20 <= len(spy.calls) <= 45
    text = "".join(op.text for ops, _ in spy.calls for op in ops if isinstance(op, TextDelta))
    assert text == "tok " * 1000


async def test_a_compaction_is_a_dim_line_before_the_answer() -> None:
    compacted = ContextCompacted("summary", 41_000, 9_000, 12, 32_768, summary="secret")
    line = (
        "🗜 Summarised the earlier conversation to stay within the model's context "
        "(41k → 9k tokens)."
    )
    console, out = rich_console()
    console.width = 120
    _, receive = await feed([compacted, *answer_events("Hi.")])
    await run_terminal(receive, console, TerminalSettings())
    raw = out.getvalue()
    assert "\x1b[2m" + line in raw  # dim
    assert "secret" not in raw
    # Plain output: on stderr with the other notices; display can hide it.
    for show in (True, False):
        out_p, err = io.StringIO(), io.StringIO()
        plain = Console(file=out_p, force_terminal=False, no_color=True)
        _, receive = await feed([compacted, *answer_events("Hi.")])
        settings = TerminalSettings(plain=True, err=err, show_compaction=show)
        await run_terminal(receive, plain, settings)
        assert err.getvalue() == (line + "\n" if show else "")
        assert out_p.getvalue() == "Hi.\n"
