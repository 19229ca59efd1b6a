"""The message editor's decisions, without I/O: what to send, edit or delete,
and when.

``EditorPlan`` is fed stream events and platform answers, each with the time
it happened, and is asked for the next platform call. It owns a *ledger*: one
slot per chat message with the text we want it to show (``want``) and the
text the platform acknowledged (``shown``). Work is owed exactly when the two
differ, so nothing is ever sent twice — a retried final edit is the same owed
edit, never a second "final" message — and identical text is never re-sent.

Decisions, in brief:

- Text appears once the model has sent ``min_tokens`` tokens of the current
  segment (``MessageChunk.tokens``: the model's deltas, about one token each,
  however many of them one read or one chunk joined) or the segment ends.
  While streaming, the live page shows the accumulated text plus the cursor.
- Edits of one message are at least ``edit_interval`` apart and, while text
  keeps changing, land on that message's grid: last edit + k·interval. A
  rate-limit pause re-anchors the grid at the pause's end.
- One budget per chat: a single call is in flight at a time, a 429 pauses all
  calls for ``retry_after``, and the next call is chosen by priority: final
  text (edits, deletions, then the next final send) > sends > interim edits >
  typing indicator. Messages are always sent in ledger order.
- Final text that keeps failing is retried ``final_retry_limit`` times, then
  given up with a short note; interim text is simply retried later.
- Tool progress is best effort: its own message, edited as tools change, and
  dropped from the ledger once the turn is over. It can be turned on or off
  while the turn runs (``show_tools``, the gateway's ``/verbose``); while it
  is off, the first tool that runs long gets one ``long_tool_hint`` note.
- A platform that cannot edit gets the turn at once: what the turn says
  before its end (text before a tool call, commentary) and its tool lines
  (while tool progress is on) are held and folded into the final message.
- Drafts (``Capabilities.drafts``): text still growing — the live page of
  the answer, or tool progress — is not a message but the chat's *draft*,
  updated on the same interval grid as edits and re-sent every
  ``draft_refresh`` seconds while it does not change (a draft is an
  ephemeral preview that vanishes when left alone). Final text is sent as
  messages, once, and nothing is edited. A refused draft
  (``drafts_refused``) turns the plan to edits for the rest of the turn:
  what the draft showed becomes a message that is then edited.
- Side events (tool lines, notices, the compaction line, reasoning) are
  shown as the messenger's renderer answered for each (``feed``'s
  ``shown``, :mod:`hermes_trio.consumers.rendering`): its text, nothing, or
  the default drawn here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from hermes_trio.consumers.context_lines import compaction_line
from hermes_trio.consumers.messenger import Capabilities, measure
from hermes_trio.consumers.rendering import DEFAULT, DefaultRendering, Rendering
from hermes_trio.consumers.splitting import Paginator, split_all
from hermes_trio.events import (
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
)
from hermes_trio.tools.base import one_line

__all__ = ["Action", "EditorPlan", "EditorReport", "EditorSettings"]

_INF = math.inf
# Clock values are floats summed from sleeps; grid arithmetic tolerates this much.
_EPS = 1e-9
_PREVIEW_CHARS = 80
# Tool lines folded into a no-edit platform's answer; more are counted.
_FOLDED_TOOLS = 10
_MAX_BACKOFF = 10.0


@dataclass(frozen=True)
class EditorSettings:
    edit_interval: float = 1.5
    """Seconds between two edits of one message."""
    min_tokens: int = 20
    """The model's tokens (deltas) of a segment before its first message appears."""
    cursor: str = " ▌"
    streaming: bool = True
    """False (or a messenger that cannot edit): one complete message at the end."""
    interrupted_note: str = "⏹ interrupted"
    cleanup_deadline: float = 5.0
    """Seconds the shielded cleanup after an interrupt may take."""
    final_retry_limit: int = 8
    """Failed attempts at final text before giving up with a note."""
    show_tool_progress: bool = True
    show_compaction: bool = True
    """A line when the conversation was compacted to fit the model's window."""
    long_tool_hint: str | None = None
    """A note shown once, at the first ``LongToolHint`` of a turn whose tool
    progress is hidden, on a platform that edits (``{tool}``: the tool's
    name); None shows none."""
    typing_interval: float = 4.0
    """Seconds between typing indicators while nothing is shown; 0 disables."""
    call_timeout: float = 10.0
    """Seconds one platform call may take (it is shielded from cancellation)."""
    error_note: str = "⚠️ {error}"
    undelivered_note: str = "⚠️ could not deliver the full answer ({error})"
    draft_refresh: float = 20.0
    """Seconds a draft may go without a call before it is sent again
    (Telegram drops a draft after about 30 s); 0 never refreshes."""


@dataclass
class EditorReport:
    """What was delivered, for the gateway and tests."""

    message_ids: list[str]
    final_text: str | None
    delivered: bool
    interrupted: bool
    hinted: bool = False
    """The ``long_tool_hint`` note reached the chat."""


ActionKind = Literal["send", "edit", "delete", "typing", "draft"]
Role = Literal["text", "progress", "note"]


@dataclass(frozen=True, slots=True)
class Action:
    """One platform call to make. ``slot`` is -1 for the typing indicator
    and the draft."""

    kind: ActionKind
    slot: int
    text: str = ""
    message_id: str | None = None
    final: bool = False


@dataclass
class _Slot:
    role: Role
    want: str | None  # None: the message should not exist
    final: bool  # want will not change again
    dirty_since: float | None  # when want last started to differ from shown
    message_id: str | None = None
    shown: str | None = None
    last_call: float | None = None
    attempts: int = 0  # failed attempts at the current (final) want
    retry_at: float = -_INF
    abandoned: bool = False
    deleted: bool = False
    in_draft: bool = False  # while not final, shown in the draft, not as a message

    @property
    def sent(self) -> bool:
        return self.message_id is not None

    def owed(self) -> bool:
        if self.abandoned or self.deleted:
            return False
        if not self.sent:
            return self.want is not None and (self.final or not self.in_draft)
        return self.want != self.shown


@dataclass
class _Draft:
    """The chat's draft: what the platform last accepted, and when."""

    shown: str | None = None
    last_call: float | None = None
    dirty_since: float | None = None
    retry_at: float = -_INF


@dataclass
class _Segment:
    pages: Paginator
    tokens: int = 0
    slots: list[int] = field(default_factory=list)
    # Frozen pages never change once assigned, so each is assigned only once.
    frozen_assigned: int = 0


@dataclass
class _Tool:
    """One tool call of the current step, as the progress message shows it."""

    name: str
    line: str | None  # None: the renderer shows nothing for it
    running: bool = True
    elapsed: float | None = None
    progress: str = ""
    held_at: int | None = None  # its line's place among the held blocks


class EditorPlan:
    """Sans-IO state of one turn's messages in one chat."""

    def __init__(self, settings: EditorSettings, capabilities: Capabilities) -> None:
        self._s = settings
        self._caps = capabilities
        self._streaming = settings.streaming and capabilities.can_edit
        self._drafts = self._streaming and capabilities.drafts
        self._edit_cursor = settings.cursor if capabilities.shows_cursor else ""
        self._draft = _Draft()
        self._show_tools = settings.show_tool_progress
        # Without edits, the turn is one message at its end: what comes
        # before it waits here (text blocks and tool lines, in order).
        self._hold = not capabilities.can_edit
        self._held: list[tuple[Literal["text", "tool"], str]] = []
        self._hint: int | None = None  # the hint's slot, once it is owed
        self._slots: list[_Slot] = []
        self._seg: _Segment | None = None
        self._last_closed_text: str | None = None
        self._progress: int | None = None
        self._tools: dict[int, _Tool] = {}
        self._blocked_until = -_INF
        self._last_typing = -_INF
        self._in_flight: Action | None = None
        self._finished = False
        self._interrupted = False
        self._give_up_at = _INF
        self._final_text: str | None = None
        self._noted_undelivered = False
        self._undelivered = False

    # ------------------------------------------------------------------ state

    @property
    def _cursor(self) -> str:
        # A draft is redrawn by the platform as it changes: no cursor there.
        return "" if self._drafts else self._edit_cursor

    @property
    def drafts(self) -> bool:
        """Growing text goes to the draft (until a draft is refused)."""
        return self._drafts

    @property
    def finished(self) -> bool:
        """The turn is over (what it owes the platform may still be on its way)."""
        return self._finished

    @property
    def done(self) -> bool:
        """The turn is over and nothing more is owed to the platform."""
        return self._finished and self._in_flight is None and not any(s.owed() for s in self._slots)

    @property
    def hinted(self) -> bool:
        """The ``long_tool_hint`` note reached the chat."""
        return self._hint is not None and self._slots[self._hint].sent

    def report(self) -> EditorReport:
        undelivered = self._undelivered or any(
            s.owed() for s in self._slots if s.role != "progress"
        )
        return EditorReport(
            message_ids=[s.message_id for s in self._slots if s.message_id and not s.deleted],
            final_text=self._final_text,
            delivered=self._finished and not undelivered,
            interrupted=self._interrupted,
            hinted=self.hinted,
        )

    # ------------------------------------------------------------------ input

    def feed(self, event: StreamEvent, now: float, shown: Rendering = DEFAULT) -> None:
        """Take one stream event received at ``now``; ``shown`` is how the
        messenger's renderer wants a side event shown (its text, None for
        nothing, ``DEFAULT`` for the editor's own)."""
        if self._finished:
            return
        match event:
            case MessageChunk(text=text, tokens=tokens):
                self._chunk(text, tokens, now)
            case MessageStop(final=False):
                self._close_segment(now)
            case Commentary(text=text):
                self._commentary(text, now)
            case ToolCallChunk():
                self._tool_started(event, now, shown)
            case ToolCallFinished(index=index):
                if (tool := self._tools.get(index)) is not None:
                    tool.running = False
                    if isinstance(shown, str):
                        self._restyle(tool, shown, now)
            case LongToolHint():
                self._long_tool(event, now, shown)
            case ToolProgress():
                self._tool_progress(event, now, shown)
            case GatewayNotice(text=text):
                if shown is not None:
                    self._add_message("note", _chosen(shown, text), now)
            case ContextCompacted():
                self._compacted(event, now, shown)
            case ReasoningChunk():
                # Chats show no reasoning unless a renderer draws a block of it.
                if isinstance(shown, str):
                    self._side_note(shown, now, fit=False)
            case TurnFinished():
                self._turn_finished(event, now)
            case _:
                # MessageStop(final=True) is followed by TurnFinished, which
                # carries the text to show.
                pass
        self._sync_draft(now)

    def interrupt(self, now: float, note: str | None = None) -> None:
        """Stop the turn: keep what is shown, drop the cursor, add the note
        (``note``, else ``interrupted_note``), and give the cleanup
        ``cleanup_deadline`` seconds."""
        self._give_up_at = min(self._give_up_at, now + self._s.cleanup_deadline)
        if self._finished:
            return
        self._interrupt_with(None, now, note)

    def show_tools(self, on: bool, now: float) -> None:
        """Turn tool progress on or off for the rest of the turn. On: the
        tools running now appear at once; off: what is shown stays as it is."""
        if on == self._show_tools:
            return
        self._show_tools = on
        if self._finished or self._hold:
            return  # held tool lines are folded in (or not) at the end
        if on:
            if any(tool.running for tool in self._tools.values()):
                self._show_progress(now)
        elif self._progress is not None:
            self._freeze(self._slots[self._progress])
            self._progress = None

    def forget_in_flight(self) -> None:
        """The call in flight will never report back (its task died). Its
        outcome is unknown; the ledger still owes it, the safe side for final
        text."""
        self._in_flight = None

    # ----------------------------------------------------------------- output

    def next_action(self, now: float) -> Action | None:
        """The platform call to make now, if any; it is in flight until one of
        ``succeeded``/``rate_limited``/``failed`` is called for it."""
        if self._in_flight is not None:
            raise RuntimeError("a platform call is already in flight")
        if now >= self._give_up_at:
            self._give_up()
            return None
        if now < self._blocked_until:
            return None
        action = self._pick(now)
        if action is not None:
            self._in_flight = action
            if action.kind == "typing":
                self._last_typing = now
            elif action.kind == "draft":
                self._draft.last_call = now
            else:
                self._slots[action.slot].last_call = now
        return action

    def wake_at(self, now: float) -> float:
        """When ``next_action`` may next return something without new input."""
        if self._in_flight is not None:
            return _INF
        times: list[float] = []
        first_unsent = self._first_unsent()
        for i, s in enumerate(self._slots):
            if not s.owed():
                continue
            if s.sent:
                times.append(self._due_final(s) if s.final else self._due_interim(s))
            elif i == first_unsent:
                times.append(s.retry_at)
        if self._typing_wanted():
            times.append(self._last_typing + self._s.typing_interval)
        draft_due = self._draft_due()
        if draft_due is not None:
            times.append(draft_due)
        if not times:
            return _INF
        return min(max(min(times), self._blocked_until), self._give_up_at)

    def succeeded(self, action: Action, now: float, message_id: str | None = None) -> None:
        """The platform acknowledged ``action`` (``message_id`` for a send)."""
        self._settle_in_flight(action)
        if action.kind == "typing":
            return
        if action.kind == "draft":
            self._draft.shown = action.text
            self._draft.retry_at = -_INF
            self._draft.dirty_since = None
            # The want may have moved while the call was out.
            last = self._draft.last_call
            self._sync_draft(now if last is None else last)
            return
        s = self._slots[action.slot]
        if action.kind == "send":
            s.message_id = message_id
            s.shown = action.text
        elif action.kind == "edit":
            s.shown = action.text
        else:
            s.deleted = True
            s.shown = None
        s.retry_at = -_INF
        if s.role == "progress" and self._finished:
            s.want = s.shown  # progress that landed after the turn ended stays as is
        if s.owed():
            # The want moved while the call was out; count it as changed then.
            s.dirty_since = s.last_call
        else:
            s.dirty_since = None
            s.attempts = 0

    def rate_limited(self, action: Action, retry_after: float, now: float) -> None:
        """The platform answered 429: every call to this chat waits."""
        self._settle_in_flight(action)
        self._blocked_until = max(self._blocked_until, now + max(retry_after, 0.0))
        if action.kind not in ("typing", "draft"):
            self._failed_attempt(action.slot, "rate limited", now, backoff=0.0)

    def failed(self, action: Action, error: str, now: float) -> None:
        """The platform refused ``action`` for another reason."""
        self._settle_in_flight(action)
        if action.kind == "typing":
            return
        if action.kind == "draft":
            self._draft.retry_at = now + self._s.edit_interval  # interim: tried again later
            return
        s = self._slots[action.slot]
        backoff = min(2.0**s.attempts, _MAX_BACKOFF) if s.final else self._s.edit_interval
        self._failed_attempt(action.slot, error, now, backoff=backoff)

    def drafts_refused(self, action: Action, now: float) -> None:
        """The platform will not show drafts here: edit messages instead,
        from now on. What the draft showed becomes a message (tool progress
        only if it is still current); final text is unaffected."""
        self._settle_in_flight(action)
        if not self._drafts:
            return
        live = self._draft_index()
        self._drafts = False
        for i, s in enumerate(self._slots):
            if not s.in_draft:
                continue
            s.in_draft = False
            if s.sent or s.final or s.want is None:
                continue
            if s.role == "progress" and i != live:
                s.want = None  # tools of an earlier step
                continue
            if s.role == "text":
                s.want += self._edit_cursor
            s.dirty_since = now

    # ---------------------------------------------------------------- events

    def _chunk(self, text: str, tokens: int, now: float) -> None:
        if not text:
            return
        seg = self._seg
        if seg is None:
            seg = self._seg = self._new_segment()
            self._last_closed_text = None
        seg.tokens += max(tokens, 1)
        seg.pages.append(text, paginate=self._streaming)
        if self._streaming and seg.tokens >= self._s.min_tokens:
            frozen = seg.pages.frozen
            for i in range(seg.frozen_assigned, len(frozen)):
                self._assign(seg, i, frozen[i], final=True, now=now)
            seg.frozen_assigned = len(frozen)
            live = seg.pages.live()
            if live:
                self._assign(seg, len(frozen), live + self._cursor, final=False, now=now)

    def _close_segment(self, now: float, text: str | None = None, note: str | None = None) -> None:
        seg = self._seg
        self._seg = None
        if self._hold and text is None and note is None:
            held = seg.pages.raw.strip() if seg is not None else ""
            if held:
                self._held.append(("text", held))
                self._last_closed_text = held
            return
        if seg is None:
            if text is None and note is None:
                return
            seg = self._new_segment()
        final = (seg.pages.raw if text is None else text).strip()
        if self._hold:
            final = self._with_held(final)
        pages = seg.pages.finalize(final) if final else []
        if note is not None:
            pages = self._with_note(pages, note)
        for i, page in enumerate(pages):
            self._assign(seg, i, page, final=True, now=now)
        for idx in seg.slots[len(pages) :]:
            self._set_want(idx, None, final=True, now=now)
        self._last_closed_text = final or None

    def _commentary(self, text: str, now: float) -> None:
        self._close_segment(now)
        text = text.strip()
        # Agents that stream the text before a tool call may also report it as
        # Commentary; it is already on screen then.
        if text and text != self._last_closed_text:
            if self._hold:
                self._held.append(("text", text))
                self._last_closed_text = text
            else:
                self._add_message("text", text, now)

    def _tool_started(self, event: ToolCallChunk, now: float, shown: Rendering) -> None:
        self._close_segment(now)
        if event.index in self._tools or not any(t.running for t in self._tools.values()):
            # A new step of tool calls replaces the previous step's lines.
            self._tools.clear()
        preview = one_line(event.preview, _PREVIEW_CHARS)
        line = f"🔧 {event.tool_name}: {preview}" if preview else f"🔧 {event.tool_name}"
        tool = _Tool(event.tool_name, None if shown is None else _chosen(shown, line))
        self._tools[event.index] = tool
        if tool.line is None:
            return
        if self._hold:
            tool.held_at = len(self._held)
            self._held.append(("tool", tool.line))
        elif self._show_tools:
            self._show_progress(now)

    def _restyle(self, tool: _Tool, line: str, now: float) -> None:
        """The renderer's ``line`` is the tool's line from now on."""
        tool.line, tool.progress, tool.elapsed = line, "", None
        if self._hold:
            if tool.held_at is None:
                tool.held_at = len(self._held)
                self._held.append(("tool", line))
            else:
                self._held[tool.held_at] = ("tool", line)
        elif self._show_tools and self._progress is not None:
            self._set_want(self._progress, self._progress_text(), final=False, now=now)
        elif self._show_tools:
            self._show_progress(now)

    def _show_progress(self, now: float) -> None:
        """The progress message shows the current step's tools: the last
        message, edited, or a new one below text that came after it."""
        text = self._progress_text()
        if not text:
            return  # every tool of the step is one the renderer does not show
        if self._progress is not None and self._progress == len(self._slots) - 1:
            self._set_want(self._progress, text, final=False, now=now)
        else:
            self._progress = self._new_slot("progress", text, False, now)

    def _tool_progress(self, event: ToolProgress, now: float, shown: Rendering) -> None:
        tool = self._tools.get(event.index)
        if tool is None or not tool.running or shown is None:
            return
        if isinstance(shown, str):
            self._restyle(tool, shown, now)
            return
        tool.progress = event.describe()
        if self._show_tools and self._progress is not None and not self._hold:
            self._set_want(self._progress, self._progress_text(), final=False, now=now)

    def _long_tool(self, event: LongToolHint, now: float, shown: Rendering) -> None:
        running = [t for t in self._tools.values() if t.running and t.name == event.tool_name]
        if not running or shown is None:
            return
        custom = shown if isinstance(shown, str) else None
        if custom is not None and self._show_tools:
            for tool in running:
                self._restyle(tool, custom, now)
            return
        for tool in running:
            tool.elapsed = event.duration
        if self._hold:
            return
        if self._show_tools and self._progress is not None:
            self._set_want(self._progress, self._progress_text(), final=False, now=now)
        elif not self._show_tools and self._s.long_tool_hint and self._hint is None:
            hint = custom or self._s.long_tool_hint.replace("{tool}", event.tool_name)
            self._hint = self._new_slot("note", self._fit(hint), True, now)

    def _compacted(self, event: ContextCompacted, now: float, shown: Rendering) -> None:
        if not self._s.show_compaction or shown is None:
            return
        self._side_note(_chosen(shown, compaction_line(event)), now, fit=True)

    def _side_note(self, text: str, now: float, *, fit: bool) -> None:
        """A note between model requests (a compaction, a block of
        reasoning): any text of the step before is complete."""
        self._close_segment(now)
        if self._hold:
            self._held.append(("text", self._fit(text) if fit else text))
        elif fit:
            self._new_slot("note", self._fit(text), True, now)
        else:
            self._add_message("note", text, now)

    def _turn_finished(self, event: TurnFinished, now: float) -> None:
        if event.finish_reason == "interrupted":
            self._interrupt_with(event.text, now)
            return
        text = event.text.strip()
        note = None
        if event.finish_reason == "error":
            if not text and self._seg is not None:
                text = self._seg.pages.raw.strip()
            note = self._s.error_note.format(error=event.error or "error")
        self._close_segment(now, text=text, note=note)
        self._final_text = text
        self._finish()

    def _interrupt_with(self, text: str | None, now: float, note: str | None = None) -> None:
        partial = (text or "").strip()
        if not partial and self._seg is not None:
            partial = self._seg.pages.raw.strip()
        self._close_segment(now, text=partial, note=note or self._s.interrupted_note)
        self._final_text = partial
        self._interrupted = True
        self._give_up_at = min(self._give_up_at, now + self._s.cleanup_deadline)
        self._finish()

    def _finish(self) -> None:
        self._finished = True
        # Tool progress is best effort: nothing about it is owed after the turn.
        for s in self._slots:
            if s.role == "progress":
                self._freeze(s)

    @staticmethod
    def _freeze(s: _Slot) -> None:
        """A progress message keeps what it shows; nothing more is owed."""
        if s.owed():
            s.want = s.shown
            s.dirty_since = None

    # ---------------------------------------------------------------- ledger

    def _new_segment(self) -> _Segment:
        # The edit cursor's room is kept with drafts too, so the pages stay
        # the same if a refused draft turns the plan to edits mid-segment.
        reserve = self._edit_cursor if self._streaming else ""
        return _Segment(Paginator(self._caps.max_length, self._caps.length_unit, reserve))

    def _new_slot(self, role: Role, want: str, final: bool, now: float) -> int:
        self._slots.append(_Slot(role, want, final, dirty_since=now, in_draft=self._drafts))
        return len(self._slots) - 1

    def _assign(self, seg: _Segment, i: int, text: str, *, final: bool, now: float) -> None:
        if i < len(seg.slots):
            self._set_want(seg.slots[i], text, final=final, now=now)
        else:
            seg.slots.append(self._new_slot("text", text, final, now))

    def _set_want(self, idx: int, text: str | None, *, final: bool, now: float) -> None:
        s = self._slots[idx]
        if s.abandoned or s.deleted or (s.sent and not self._caps.can_edit):
            return
        if text is None and s.sent and not self._caps.can_delete:
            text = "…"  # the message stays; it must not keep stale text
        if s.want != text:
            s.attempts = 0
        s.want = text
        s.final = final
        if not s.owed():
            s.dirty_since = None
        elif s.dirty_since is None:
            s.dirty_since = now

    def _add_message(self, role: Role, text: str, now: float) -> None:
        for page in split_all(text, self._caps.max_length, self._caps.length_unit):
            self._new_slot(role, page, True, now)
        self._last_closed_text = None

    def _with_held(self, final: str) -> str:
        """The one message of a platform without edits: the held text
        blocks and tool lines (while tool progress is on), then ``final``."""
        blocks: list[str] = []
        lines: list[str] = []
        shown = hidden = 0
        for kind, text in self._held:
            if kind == "text":
                if lines:
                    blocks.append("\n".join(lines))
                    lines = []
                blocks.append(text)
            elif not self._show_tools:
                continue
            elif shown < _FOLDED_TOOLS:
                lines.append(text)
                shown += 1
            else:
                hidden += 1
        if hidden:
            lines.append(f"🔧 … and {hidden} more")
        if lines:
            blocks.append("\n".join(lines))
        if final:
            blocks.append(final)
        return "\n\n".join(blocks)

    def _with_note(self, pages: list[str], note: str) -> list[str]:
        if not pages:
            return [self._fit(note)]
        joined = f"{pages[-1]}\n\n{note}"
        if measure(joined, self._caps.length_unit) <= self._caps.max_length:
            return [*pages[:-1], joined]
        return [*pages, self._fit(note)]

    def _fit(self, text: str) -> str:
        """Truncate a short status text to the platform limit."""
        unit, limit = self._caps.length_unit, self._caps.max_length
        if measure(text, unit) <= limit:
            return text
        while text and measure(text + "…", unit) > limit:
            text = text[:-1]
        return text + "…"

    def _progress_text(self) -> str:
        lines = []
        for _, tool in sorted(self._tools.items()):
            if tool.line is None:
                continue
            line = tool.line
            if tool.progress:
                line += f" · {tool.progress}"
            if tool.elapsed is not None:
                line += f" ({tool.elapsed:.0f}s)"
            lines.append(line)
        return self._fit("\n".join(lines))

    def _failed_attempt(self, idx: int, error: str, now: float, *, backoff: float) -> None:
        s = self._slots[idx]
        s.retry_at = now + backoff
        if not s.final:
            return  # interim text is simply tried again later
        s.attempts += 1
        if s.attempts >= self._s.final_retry_limit:
            self._abandon(idx, error, now)

    def _abandon(self, idx: int, error: str, now: float) -> None:
        s = self._slots[idx]
        s.abandoned = True
        if s.role == "progress":
            return
        self._undelivered = True
        if not self._noted_undelivered:
            self._noted_undelivered = True
            note = self._fit(self._s.undelivered_note.format(error=error))
            self._new_slot("note", note, True, now)

    def _give_up(self) -> None:
        for s in self._slots:
            if s.owed():
                s.abandoned = True
                if s.role != "progress":
                    self._undelivered = True

    def _settle_in_flight(self, action: Action) -> None:
        if self._in_flight is not action:
            raise RuntimeError(f"{action!r} is not the call in flight")
        self._in_flight = None

    # -------------------------------------------------------------- schedule

    def _first_unsent(self) -> int | None:
        for i, s in enumerate(self._slots):
            if not s.sent and s.owed():
                return i
        return None

    def _due_final(self, s: _Slot) -> float:
        due = -_INF if s.last_call is None else s.last_call + self._s.edit_interval
        return max(due, s.retry_at)

    def _due_interim(self, s: _Slot) -> float:
        return self._grid_due(s.last_call, s.dirty_since, s.retry_at)

    def _grid_due(
        self, last_call: float | None, dirty_since: float | None, retry_at: float
    ) -> float:
        interval = self._s.edit_interval
        if last_call is None:
            return max(self._blocked_until, retry_at)  # nothing shown yet: at once
        base = last_call + interval
        if self._blocked_until > base:
            base = self._blocked_until  # a pause re-anchors the grid at its end
        changed = dirty_since if dirty_since is not None else base
        if changed > base and interval > 0:
            base += math.ceil((changed - base) / interval - _EPS) * interval
        return max(base, retry_at)

    # ------------------------------------------------------------------ draft

    def _draft_index(self) -> int | None:
        """The slot the draft shows: the newest one still growing (the live
        page, or the progress of tools still current), if any."""
        if not self._drafts or self._finished:
            return None
        for i in range(len(self._slots) - 1, -1, -1):
            s = self._slots[i]
            if s.in_draft and not s.final and not s.sent and not s.abandoned and s.want:
                return i
            if s.role == "text":
                return None  # text after tool progress supersedes it
        return None

    def _draft_want(self) -> str | None:
        index = self._draft_index()
        return None if index is None else self._slots[index].want

    def _sync_draft(self, now: float) -> None:
        want = self._draft_want()
        if want is None or want == self._draft.shown:
            self._draft.dirty_since = None
        elif self._draft.dirty_since is None:
            self._draft.dirty_since = now

    def _draft_due(self) -> float | None:
        """When the draft needs its next call: a change (on the grid), or
        the same text again before the platform lets it vanish."""
        want = self._draft_want()
        if want is None:
            return None
        d = self._draft
        if want != d.shown:
            return self._grid_due(d.last_call, d.dirty_since, d.retry_at)
        if self._s.draft_refresh <= 0 or d.last_call is None:
            return None
        return max(d.last_call + self._s.draft_refresh, d.retry_at, self._blocked_until)

    def _typing_wanted(self) -> bool:
        return (
            not self._finished
            and self._caps.can_type
            and self._s.typing_interval > 0
            and (self._seg is None or not self._seg.slots)
            and not any(s.owed() for s in self._slots)
        )

    def _pick(self, now: float) -> Action | None:
        first = self._first_unsent()
        for i, s in enumerate(self._slots):
            if s.sent and s.owed() and s.final and now >= self._due_final(s):
                return self._change(i, s)
        if first is not None:
            s = self._slots[first]
            if now >= s.retry_at and s.want is not None:
                return Action("send", first, s.want, final=s.final)
        for i, s in enumerate(self._slots):
            if s.sent and s.owed() and not s.final and now >= self._due_interim(s):
                return self._change(i, s)
        draft_due = self._draft_due()
        if draft_due is not None and now >= draft_due:
            return Action("draft", -1, self._draft_want() or "")
        if self._typing_wanted() and now >= self._last_typing + self._s.typing_interval:
            return Action("typing", -1)
        return None

    def _change(self, i: int, s: _Slot) -> Action:
        if s.want is None:
            return Action("delete", i, message_id=s.message_id, final=True)
        return Action("edit", i, s.want, message_id=s.message_id, final=s.final)


def _chosen(shown: Rendering, default: str) -> str:
    """The text to show: the renderer's, or ``default`` for ``DEFAULT``
    (None, nothing shown, is decided before)."""
    if isinstance(shown, DefaultRendering) or shown is None:
        return default
    return shown
