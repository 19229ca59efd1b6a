"""What the terminal shows for a stream of turn events — pure decisions.

No trio, no rich, no clock: the trio shell in ``terminal.py`` passes the time
in, feeds batches of events and executes the returned ops. Keeping this pure
is what lets the tricky parts (Markdown block boundaries across arbitrary
chunking, which box is open, what an interrupt leaves on screen) be tested
exhaustively.

Two kinds of output come out of a :class:`TerminalPlan`:

* *ops* — things printed once and never redrawn (a box border, a finished
  Markdown block, a tool's result line, an error). Each op carries enough
  for both a rich painter (which uses the complete blocks) and a plain-text
  painter (which writes the raw deltas as they come).
* a :class:`LiveView` snapshot — the part of the screen that changes until it
  is committed: the Markdown block still being written, running tools with
  their elapsed time, the "thinking" spinner.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ..escapes import escape_controls
from ..events import (
    ApprovalRequested,
    ApprovalResolved,
    Commentary,
    ContextCompacted,
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
    coalesce,
)
from ..markdown_fence import Fence, open_fence
from .context_lines import compaction_line

__all__ = [
    "SPINNER_FRAMES",
    "BlockSplitter",
    "CloseBox",
    "LiveView",
    "MarkdownBlock",
    "Notice",
    "Op",
    "OpenBox",
    "ReasoningBlock",
    "ReasoningDelta",
    "RunningTool",
    "TerminalPlan",
    "TextDelta",
    "ToolLine",
    "format_duration",
    "spinner_frame",
    "tail_lines",
]

SPINNER_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SPINNER_INTERVAL = 0.08

# ---------------------------------------------------------------------------
# Markdown blocks


class BlockSplitter:
    """Cut streamed Markdown into blocks that can be rendered for good.

    A block is complete at a blank line outside a code fence, when a fence
    closes, or just before a fence opens (a fence interrupts a paragraph).
    Blank lines inside a fence never end a block, so a code block is always
    rendered whole. Blocks come out without their surrounding blank lines.
    """

    def __init__(self) -> None:
        self._buf = ""  # text of the block being written, from its start
        self._scan = 0  # everything before this index in _buf is complete lines already seen
        self._content = False  # the block has a non-blank line already
        self._fence: Fence | None = None

    @property
    def pending(self) -> str:
        """The incomplete block, as written so far."""
        return self._buf

    @property
    def in_fence(self) -> bool:
        return self._fence is not None

    def feed(self, text: str) -> list[str]:
        """Add text; return the blocks it completed, in order."""
        self._buf += text
        blocks: list[str] = []
        while True:
            end = self._buf.find("\n", self._scan)
            if end < 0:
                break
            start, self._scan = self._scan, end + 1
            line = self._buf[start:end]
            if self._fence is not None:
                if self._fence.closes(line):
                    self._fence = None
                    self._emit(blocks, self._scan)
                continue
            fence = open_fence(line)
            if fence is not None:
                if self._content:
                    self._emit(blocks, start)
                    self._scan = end + 1 - start
                self._fence = fence
                self._content = True
            elif not line.strip():
                if self._content:
                    self._emit(blocks, start)
                else:
                    # Blank lines between blocks are the renderer's business.
                    self._buf = self._buf[self._scan :]
                    self._scan = 0
            else:
                self._content = True
        return blocks

    def flush(self) -> str | None:
        """End of the text: the incomplete block (if any) as a last block."""
        rest = self._buf.strip("\n")
        self._buf, self._scan, self._content, self._fence = "", 0, False, None
        return rest if rest.strip() else None

    def _emit(self, blocks: list[str], upto: int) -> None:
        block = self._buf[:upto].strip("\n")
        if block.strip():
            blocks.append(block)
        self._buf = self._buf[upto:]
        self._scan = 0
        self._content = False


def tail_lines(text: str, max_lines: int) -> tuple[str, bool]:
    """The last ``max_lines`` lines of ``text`` and whether lines were cut.

    The live area redraws on every batch; looking only at the tail keeps that
    cost flat however long the block being written gets.
    """
    if max_lines <= 0:
        return "", bool(text)
    cut = len(text)
    for _ in range(max_lines):
        cut = text.rfind("\n", 0, cut)
        if cut < 0:
            return text, False
    return text[cut + 1 :], True


# ---------------------------------------------------------------------------
# Ops


@dataclass(frozen=True, slots=True)
class OpenBox:
    """The first text of an assistant segment arrived: draw the top border."""


@dataclass(frozen=True, slots=True)
class CloseBox:
    """The segment ended: draw the bottom border."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Raw assistant text as it arrived (plain painters write this)."""

    text: str


@dataclass(frozen=True, slots=True)
class MarkdownBlock:
    """A complete Markdown block (rich painters render this)."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningBlock:
    text: str


@dataclass(frozen=True, slots=True)
class ToolLine:
    """A tool call is over; ``status`` says how."""

    name: str
    preview: str
    duration: float
    status: Literal["ok", "failed", "interrupted"]


@dataclass(frozen=True, slots=True)
class Notice:
    """A one-line message about the turn, not from the model."""

    text: str
    kind: Literal["info", "warning", "error", "interrupted", "question", "approved"]


Op = (
    OpenBox
    | CloseBox
    | TextDelta
    | MarkdownBlock
    | ReasoningDelta
    | ReasoningBlock
    | ToolLine
    | Notice
)


@dataclass(frozen=True, slots=True)
class RunningTool:
    index: int
    name: str
    preview: str
    started: float
    # The tool's last progress report ("3/10 copying"), if it sends any.
    progress: str = ""


@dataclass(frozen=True, slots=True)
class LiveView:
    """The redrawn part of the screen, bottom of the output."""

    pending_text: str
    pending_reasoning: str
    tools: tuple[RunningTool, ...]
    waiting_since: float | None  # "thinking" spinner when not None
    in_box: bool
    in_fence: bool

    @property
    def animated(self) -> bool:
        """Whether the view changes with time alone (spinners, clocks)."""
        return bool(self.tools) or self.waiting_since is not None

    @property
    def empty(self) -> bool:
        return (
            not (self.pending_text or self.pending_reasoning or self.tools)
            and self.waiting_since is None
        )


def spinner_frame(now: float) -> str:
    return SPINNER_FRAMES[int(now / SPINNER_INTERVAL) % len(SPINNER_FRAMES)]


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


def _resolution(event: ApprovalResolved, timeout: float | None) -> Notice:
    """The line that says how an approval question ended."""
    if event.outcome == "approved":
        if event.always:
            return Notice("✓ allowed for the rest of this session", "approved")
        return Notice("✓ allowed once", "approved")
    if event.outcome == "denied":
        said = f": {escape_controls(event.reason)}" if event.reason else ""
        return Notice(f"✗ denied{said}", "error")
    if event.outcome == "expired":
        waited = f" in {timeout:g}s" if timeout is not None else " in time"
        return Notice(f"✗ no answer{waited}: denied", "error")
    return Notice("⏹ approval cancelled: the turn was interrupted", "interrupted")


# ---------------------------------------------------------------------------
# The plan


class TerminalPlan:
    """Turns one turn's events into ops and a live view.

    Each assistant text segment (commentary before tools, the final answer)
    gets its own box, opened by its first text and closed by its
    ``MessageStop``. A non-streaming turn delivers its text only in
    ``Commentary`` / ``TurnFinished``; those are shown as a whole box when
    nothing of them was streamed.
    """

    def __init__(
        self, *, show_reasoning: bool = False, show_tools: bool = True, show_compaction: bool = True
    ) -> None:
        self.show_reasoning = show_reasoning
        self.show_tools = show_tools
        self.show_compaction = show_compaction
        self._text = BlockSplitter()
        self._reasoning = BlockSplitter()
        self._box = False
        self._streamed = False  # the current segment got text
        self._last_streamed = False  # ... and so did the segment last stopped
        self._tools: dict[int, RunningTool] = {}
        self._waiting_since: float | None = None
        # Approvals asked and not yet resolved: id -> seconds they wait.
        self._asked: dict[str, float] = {}
        self.finished: TurnFinished | None = None
        self.ended = False

    def awaiting(self, approval_id: str) -> bool:
        """Whether this approval was asked and has not been resolved yet."""
        return approval_id in self._asked

    # -- feeding -------------------------------------------------------------

    def start(self, now: float) -> list[Op]:
        """The turn began (the request is on its way)."""
        self._waiting_since = now
        return []

    def feed(self, events: Sequence[StreamEvent], now: float) -> list[Op]:
        ops: list[Op] = []
        for event in coalesce(events):
            self._event(event, now, ops)
        self._update_waiting(now)
        return ops

    def end(self, now: float) -> list[Op]:
        """The event stream ended. Without ``TurnFinished`` that means the
        turn was cancelled: keep what was shown and mark it interrupted."""
        if self.ended:
            return []
        self.ended = True
        ops: list[Op] = []
        if self.finished is not None:
            return ops
        self._flush_reasoning(ops)
        for tool in sorted(self._tools.values(), key=lambda t: t.index):
            ops.append(ToolLine(tool.name, tool.preview, now - tool.started, "interrupted"))
        self._tools.clear()
        self._flush_text(ops)
        ops.append(Notice("⏹ interrupted", "interrupted"))
        if self._box:
            ops.append(CloseBox())
            self._box = False
        self._waiting_since = None
        return ops

    def _event(self, event: StreamEvent, now: float, ops: list[Op]) -> None:
        if isinstance(event, MessageChunk):
            self._add_text(event.text, ops)
        elif isinstance(event, ReasoningChunk):
            if self.show_reasoning and event.text:
                ops.append(ReasoningDelta(event.text))
                ops.extend(ReasoningBlock(b) for b in self._reasoning.feed(event.text))
        elif isinstance(event, Commentary):
            if not self._streamed:
                self._add_text(event.text, ops)
        elif isinstance(event, MessageStop):
            self._flush_reasoning(ops)
            self._flush_text(ops)
            if self._box:
                ops.append(CloseBox())
                self._box = False
            self._last_streamed, self._streamed = self._streamed, False
        elif isinstance(event, ToolCallChunk):
            if self.show_tools:
                # Names, previews and progress come from the model and
                # from tools' servers: escaped, as everything not ours is.
                self._tools[event.index] = RunningTool(
                    event.index,
                    escape_controls(event.tool_name),
                    escape_controls(event.preview),
                    now,
                )
        elif isinstance(event, ToolCallFinished):
            tool = self._tools.pop(event.index, None)
            if self.show_tools:
                preview = tool.preview if tool is not None else ""
                status: Literal["ok", "failed"] = "ok" if event.ok else "failed"
                name = escape_controls(event.tool_name)
                ops.append(ToolLine(name, preview, event.duration, status))
        elif isinstance(event, LongToolHint):
            pass  # the live tool line already shows how long it has run
        elif isinstance(event, ToolProgress):
            running = self._tools.get(event.index)
            if running is not None:
                progress = escape_controls(event.describe())
                self._tools[event.index] = replace(running, progress=progress)
        elif isinstance(event, GatewayNotice):
            ops.append(Notice(escape_controls(event.text), "info"))
        elif isinstance(event, ContextCompacted):
            if self.show_compaction:
                ops.append(Notice(compaction_line(event), "info"))
        elif isinstance(event, ApprovalRequested):
            self._asked[event.id] = event.timeout
            self._flush_reasoning(ops)
            ops.append(
                Notice(
                    escape_controls(f"⚠ {event.tool_name} needs your approval ({event.reason})"),
                    "warning",
                )
            )
            ops.append(Notice("    " + escape_controls(event.command), "question"))
        elif isinstance(event, ApprovalResolved):
            ops.append(_resolution(event, self._asked.pop(event.id, None)))
        elif isinstance(event, TurnFinished):
            self._finish(event, ops)

    def _finish(self, event: TurnFinished, ops: list[Op]) -> None:
        self._asked.clear()
        self.finished = event
        self._flush_reasoning(ops)
        if self._streamed:
            # A stream that ended without MessageStop: close it like one.
            self._flush_text(ops)
            self._last_streamed, self._streamed = True, False
        if event.text and not self._last_streamed:
            self._add_text(event.text, ops)
            self._flush_text(ops)
        if self._box:
            ops.append(CloseBox())
            self._box = False
        if event.finish_reason == "error":
            error = escape_controls(event.error or "the model request failed")
            ops.append(Notice(f"error: {error}", "error"))
        elif event.finish_reason == "length":
            if not event.text.startswith("(Stopped:"):
                ops.append(Notice("(answer cut off at the model's length limit)", "warning"))
        self._tools.clear()
        self._waiting_since = None

    def _add_text(self, text: str, ops: list[Op]) -> None:
        if not text:
            return
        if not self._box and text.strip():
            # Whitespace alone would draw an empty box.
            self._flush_reasoning(ops)
            ops.append(OpenBox())
            self._box = True
        self._streamed = True
        ops.append(TextDelta(text))
        ops.extend(MarkdownBlock(b) for b in self._text.feed(text))

    def _flush_text(self, ops: list[Op]) -> None:
        rest = self._text.flush()
        if rest is not None:
            ops.append(MarkdownBlock(rest))

    def _flush_reasoning(self, ops: list[Op]) -> None:
        rest = self._reasoning.flush()
        if rest is not None:
            ops.append(ReasoningBlock(rest))

    def _update_waiting(self, now: float) -> None:
        busy = (
            self.finished is not None
            or self._box
            or bool(self._tools)
            or bool(self._reasoning.pending)
        )
        if busy:
            self._waiting_since = None
        elif self._waiting_since is None:
            self._waiting_since = now

    # -- the live part ---------------------------------------------------------

    def live(self) -> LiveView:
        return LiveView(
            pending_text=self._text.pending if self._box else "",
            pending_reasoning=self._reasoning.pending,
            tools=tuple(sorted(self._tools.values(), key=lambda t: t.index)),
            waiting_since=None if self.ended else self._waiting_since,
            in_box=self._box,
            in_fence=self._text.in_fence,
        )
