"""The terminal consumer: a thin trio shell around :mod:`.terminal_plan`.

It reads a turn's events, drains whatever else is already waiting in the
channel (so a fast model never makes rendering fall behind), feeds the batch
to the pure plan and paints the resulting ops once. Two painters:

* :class:`RichPainter` for a terminal: answers in a box, Markdown rendered
  block by block (code highlighted), a live area at the bottom for the block
  being written, running tools and spinners. rich needs no event loop and
  runs no thread here (``auto_refresh=False``; the shell redraws on events
  and on a tick while something animates).
* :class:`PlainPainter` for pipes and files: the answer's raw text on stdout
  as it arrives, tool lines and notices on stderr, no control codes.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Protocol, TextIO

import trio
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from ..channels import drain_after_cancel
from ..events import ApprovalRequested, StreamEvent, TurnFinished
from .terminal_plan import (
    CloseBox,
    LiveView,
    MarkdownBlock,
    Notice,
    Op,
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

__all__ = [
    "AskApproval",
    "PlainPainter",
    "RichPainter",
    "TerminalSettings",
    "TerminalView",
    "run_terminal",
]

BORDER_STYLE = Style(color="bright_black")
TITLE_STYLE = Style(color="cyan", bold=True)
REASONING_STYLE = Style(dim=True, italic=True)
CURSOR = "▌"
_TOOL_MARKS = {"ok": ("✓", "green"), "failed": ("✗", "red"), "interrupted": ("⏹", "yellow")}
_NOTICE_STYLES = {
    "info": Style(dim=True),
    "warning": Style(color="yellow"),
    "error": Style(color="red", bold=True),
    "interrupted": Style(color="yellow", bold=True),
    "question": Style(bold=True),
    "approved": Style(color="green"),
}

AskApproval = Callable[[ApprovalRequested], Awaitable[object]]
"""Asks the person at the terminal about one ``ApprovalRequested`` and
answers it by id (:func:`hermes_trio.approvals.answer_approval`); returns
by the request's deadline at the latest."""


@dataclass(frozen=True)
class TerminalSettings:
    show_reasoning: bool = False
    show_tools: bool = True
    show_compaction: bool = True
    plain: bool = False
    """Plain text only (output is not a terminal): no box, colours or spinner."""
    title: str = "Hermes"
    tick: float = 0.1
    """Seconds between redraws while only a spinner or a clock changes."""
    frame: float = 1 / 30
    """Shortest time between two redraws of a terminal."""
    code_theme: str = "monokai"
    err: TextIO | None = None
    """Where a plain painter writes tool lines and notices (default stderr)."""


class Painter(Protocol):
    def begin(self) -> None: ...

    def apply(self, ops: Sequence[Op], view: LiveView, now: float) -> None: ...

    def suspend(self) -> None: ...

    def finish(self) -> None: ...


# ---------------------------------------------------------------------------
# rich


def _blank(line: list[Segment]) -> bool:
    # A code block's padding rows have a background colour: they are content.
    return all(
        not seg.text.strip() and (seg.style is None or seg.style.bgcolor is None) for seg in line
    )


class _Gutter:
    """Draws the box's side borders around any renderable.

    Blank rows at either end are dropped (rich puts one before a list, for
    instance), so the spacing between blocks is the painter's alone.
    """

    def __init__(self, renderable: RenderableType, *, space_before: bool = False) -> None:
        self.renderable = renderable
        self.space_before = space_before

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        inner = max(1, options.max_width - 4)
        lines = console.render_lines(
            self.renderable, options.update(width=inner, height=None), pad=True
        )
        while lines and _blank(lines[0]):
            lines.pop(0)
        while lines and _blank(lines[-1]):
            lines.pop()
        if self.space_before:
            lines.insert(0, [Segment(" " * inner)])
        left, right = Segment("│ ", BORDER_STYLE), Segment(" │", BORDER_STYLE)
        for line in lines:
            yield left
            yield from line
            yield right
            yield Segment.line()


def _border(width: int, title: str | None) -> Text:
    if title is None:
        return Text("╰" + "─" * max(0, width - 2) + "╯", style=BORDER_STYLE)
    head = Text("╭─ ", style=BORDER_STYLE)
    head.append(title, style=TITLE_STYLE)
    head.append(" ", style=BORDER_STYLE)
    head.append("─" * max(0, width - head.cell_len - 1) + "╮", style=BORDER_STYLE)
    return head


def _tool_text(mark: str, color: str, name: str, preview: str, seconds: float) -> Text:
    text = Text("  ")
    text.append(mark, style=color)
    text.append(" ")
    text.append(name, style="bold")
    if preview:
        text.append("  ")
        text.append(preview, style="bright_black")
    text.append(f"  {format_duration(seconds)}", style="dim")
    text.no_wrap = True
    text.overflow = "ellipsis"
    return text


class _LiveArea:
    """The redrawn bottom of the output, cropped to fit the screen.

    Anything taller than the terminal could not be erased and redrawn (rich
    can only move the cursor within the visible screen), so only the tail of
    the block being written is shown; the whole block is printed once it is
    complete.
    """

    def __init__(self) -> None:
        self.view = LiveView("", "", (), None, False, False)
        self.now = 0.0
        self.space_before = False

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        view, now = self.view, self.now
        budget = max(1, (options.height or console.height) - 1)
        bottom: list[Text] = []
        for tool in view.tools:
            bottom.append(
                _tool_text(
                    spinner_frame(now),
                    "cyan",
                    tool.name,
                    f"{tool.preview} · {tool.progress}" if tool.progress else tool.preview,
                    now - tool.started,
                )
            )
        if view.waiting_since is not None:
            line = Text("  ")
            line.append(spinner_frame(now), style="cyan")
            line.append(f" thinking… {format_duration(now - view.waiting_since)}", style="dim")
            bottom.append(line)
        bottom = bottom[-budget:]
        budget -= len(bottom)
        top: list[list[Segment]] = []
        if view.pending_reasoning and budget > 0:
            text, _ = tail_lines(view.pending_reasoning[-budget * options.max_width :], budget)
            top += self._tail(console, options, Text(text, style=REASONING_STYLE), budget)
        # A row holds at most `width` characters, so this many from the end
        # cover the rows shown even for one long unbroken paragraph.
        keep = budget * options.max_width
        pending = view.pending_text[-keep:].lstrip("\n")
        if view.in_box and budget - len(top) > 0:
            text, _ = tail_lines(pending, budget - len(top))
            body = Text(text)
            body.append(CURSOR, style="bright_black")
            # The blank row the block will get once printed, so it does not jump.
            gutter = _Gutter(body, space_before=self.space_before and bool(pending))
            top += self._tail(console, options, gutter, budget - len(top))
        for row in top[-budget:] if budget > 0 else []:
            yield from row
            yield Segment.line()
        yield from bottom

    @staticmethod
    def _tail(
        console: Console, options: ConsoleOptions, renderable: RenderableType, budget: int
    ) -> list[list[Segment]]:
        lines = console.render_lines(renderable, options.update(height=None), pad=False)
        return lines[-budget:]


class RichPainter:
    """Paints ops on a terminal with rich."""

    def __init__(self, console: Console, settings: TerminalSettings) -> None:
        self.console = console
        self.settings = settings
        self._area = _LiveArea()
        self._live: Live | None = None
        self._in_box = False
        self._blocks = 0  # blocks printed in the open box (for spacing)
        self._prev: type | None = None

    def begin(self) -> None:
        self._in_box = False
        self._blocks = 0
        self._prev = None

    def apply(self, ops: Sequence[Op], view: LiveView, now: float) -> None:
        printed = [r for r in (self._render(op) for op in ops) if r is not None]
        self._area.view, self._area.now = view, now
        self._area.space_before = self._blocks > 0
        if self._live is None and not view.empty:
            # A fresh Live each time: a stopped one still remembers the height
            # of its last drawing and would erase that many lines on restart.
            self._live = Live(
                self._area,
                console=self.console,
                auto_refresh=False,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
                vertical_overflow="crop",
            )
            self._live.start()
        if printed:
            # One print for the batch: with a Live running, each print redraws
            # the live area, so this keeps it to one redraw per batch.
            self.console.print(Group(*printed))
        elif self._live is not None:
            self._live.refresh()

    def suspend(self) -> None:
        self._stop_live()

    def finish(self) -> None:
        self._stop_live()
        if self._in_box:
            self.console.print(_border(self.console.width, None))
            self._in_box = False

    def _stop_live(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            self._area.view = LiveView("", "", (), None, False, False)
            live.stop()

    def _render(self, op: Op) -> RenderableType | None:
        prev, self._prev = self._prev, type(op)
        width = self.console.width
        if isinstance(op, OpenBox):
            self._in_box, self._blocks = True, 0
            return _border(width, self.settings.title)
        if isinstance(op, CloseBox):
            self._in_box = False
            return _border(width, None)
        if isinstance(op, MarkdownBlock):
            markdown = Markdown(op.text, code_theme=self.settings.code_theme)
            return self._boxed(markdown)
        if isinstance(op, ReasoningBlock):
            text = Text(op.text, style=REASONING_STYLE)
            if not self._in_box:
                return Padding(text, (1 if prev is ReasoningBlock else 0, 0, 0, 2))
            return self._boxed(text)
        if isinstance(op, ToolLine):
            mark, color = _TOOL_MARKS[op.status]
            return _tool_text(mark, color, op.name, op.preview, op.duration)
        if isinstance(op, Notice):
            text = Text(op.text, style=_NOTICE_STYLES[op.kind])
            if self._in_box:
                return self._boxed(text)
            return Padding(text, (0, 0, 0, 2))
        return None  # deltas: the live area shows them until their block is done

    def _boxed(self, renderable: RenderableType) -> RenderableType:
        if not self._in_box:
            return Padding(renderable, (0, 0, 0, 2))
        self._blocks += 1
        return _Gutter(renderable, space_before=self._blocks > 1)


# ---------------------------------------------------------------------------
# plain


class PlainPainter:
    """Raw text for pipes: the answer on ``out``, everything else on ``err``."""

    def __init__(self, out: IO[str], err: IO[str]) -> None:
        self.out = out
        self.err = err
        self._at_line_start = True
        self._reasoning_open = False

    def begin(self) -> None:
        self._at_line_start = True

    def apply(self, ops: Sequence[Op], view: LiveView, now: float) -> None:
        for op in ops:
            if isinstance(op, TextDelta):
                self._end_reasoning()
                self.out.write(op.text)
                self._at_line_start = op.text.endswith("\n")
            elif isinstance(op, CloseBox):
                self._newline()
            elif isinstance(op, ReasoningDelta):
                self._reasoning_open = True
                self.err.write(op.text)
            elif isinstance(op, ToolLine):
                self._end_reasoning()
                mark = _TOOL_MARKS[op.status][0]
                preview = f": {op.preview}" if op.preview else ""
                self.err.write(f"{mark} {op.name}{preview} ({format_duration(op.duration)})\n")
            elif isinstance(op, Notice):
                self._end_reasoning()
                self._newline()
                self.err.write(op.text + "\n")
        self.out.flush()
        self.err.flush()

    def suspend(self) -> None:
        self.out.flush()

    def finish(self) -> None:
        self._end_reasoning()
        self._newline()
        self.out.flush()

    def _newline(self) -> None:
        if not self._at_line_start:
            self.out.write("\n")
            self._at_line_start = True

    def _end_reasoning(self) -> None:
        if self._reasoning_open:
            self.err.write("\n")
            self._reasoning_open = False


# ---------------------------------------------------------------------------
# the shell


class TerminalView:
    """Renders turns on one console; one per chat session.

    :meth:`paused` lets a prompt (tool approval) take the terminal in the
    middle of a turn: the live area is erased and events wait in the channel
    until the prompt is done, so nothing is drawn over what the user types.
    """

    def __init__(self, console: Console, settings: TerminalSettings) -> None:
        self.console = console
        self.settings = settings
        self.painter: Painter
        if settings.plain:
            self.painter = PlainPainter(console.file, settings.err or sys.stderr)
        else:
            self.painter = RichPainter(console, settings)
        self._paused = False
        self._resumed = trio.Event()

    @contextmanager
    def paused(self) -> Iterator[None]:
        self.painter.suspend()
        self._paused = True
        self._resumed = trio.Event()
        try:
            yield
        finally:
            self._paused = False
            self._resumed.set()

    async def render_turn(
        self,
        receive: trio.MemoryReceiveChannel[StreamEvent],
        *,
        ask: AskApproval | None = None,
    ) -> TurnFinished | None:
        """Show one turn; return its ``TurnFinished`` (None: interrupted).

        An approval the turn asks for is shown with the question; ``ask``
        (if given) then takes the terminal to get the answer, while the
        turn's events wait in the channel. How it ended is shown when its
        ``ApprovalResolved`` comes, also after an interrupt (read from the
        channel in the cancelled turn's last second).
        """
        plan = TerminalPlan(
            show_reasoning=self.settings.show_reasoning,
            show_tools=self.settings.show_tools,
            show_compaction=self.settings.show_compaction,
        )
        painter = self.painter
        painter.begin()
        animates = not self.settings.plain
        frame = self.settings.frame
        last_paint = -math.inf
        try:
            self._paint(plan.start(trio.current_time()), plan)
            closed = False
            while not closed:
                idle = self.settings.tick if animates and plan.live().animated else math.inf
                batch, closed = await self._next_batch(receive, trio.current_time() + idle)
                # A paint costs far more than a receive, and it runs on this
                # thread, so the producer cannot refill the channel during one.
                # Hence at most one paint per frame, with the channel drained
                # all the while so a fast model never waits on the screen. The
                # first event after a quiet spell still paints at once.
                frame_end = last_paint + frame
                while not closed and trio.current_time() < frame_end:
                    more, closed = await self._next_batch(receive, frame_end)
                    batch += more
                while self._paused:
                    await self._resumed.wait()
                self._paint(plan.feed(batch, trio.current_time()), plan)
                last_paint = trio.current_time()
                if ask is not None:
                    for event in batch:
                        if isinstance(event, ApprovalRequested) and plan.awaiting(event.id):
                            painter.suspend()
                            await ask(event)
        except trio.Cancelled:
            # What the cancelled turn still says (an approval question it
            # will not wait for) comes before the channel ends.
            rest = await drain_after_cancel(receive)
            self._paint(plan.feed(rest, trio.current_time()), plan)
            raise
        finally:
            # Synchronous, so it runs even while this task is being cancelled:
            # whatever was shown stays, marked as interrupted.
            self._paint(plan.end(trio.current_time()), plan)
            painter.finish()
        return plan.finished

    def _paint(self, ops: Iterable[Op], plan: TerminalPlan) -> None:
        self.painter.apply(list(ops), plan.live(), trio.current_time())

    @staticmethod
    async def _next_batch(
        receive: trio.MemoryReceiveChannel[StreamEvent], deadline: float
    ) -> tuple[list[StreamEvent], bool]:
        """Wait for one event (or the deadline), then take all that are waiting."""
        batch: list[StreamEvent] = []
        with trio.move_on_at(deadline):
            try:
                batch.append(await receive.receive())
            except (trio.EndOfChannel, trio.ClosedResourceError):
                return batch, True
        while True:
            try:
                batch.append(receive.receive_nowait())
            except trio.WouldBlock:
                return batch, False
            except (trio.EndOfChannel, trio.ClosedResourceError):
                return batch, True


async def run_terminal(
    receive: trio.MemoryReceiveChannel[StreamEvent],
    console: Console,
    settings: TerminalSettings,
) -> TurnFinished | None:
    """Render one turn's events on ``console``; None if it was interrupted."""
    return await TerminalView(console, settings).render_turn(receive)
