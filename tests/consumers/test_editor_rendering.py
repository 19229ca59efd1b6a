"""A messenger that renders the side events its own way (``render_event``,
the ``EventRenderer`` hook), driving the real message editor on trio's
MockClock: its tool lines, no notices, and ``DEFAULT`` where it keeps the
editor's own."""

from __future__ import annotations

from functools import partial

import pytest
import trio
from editor_support import QUIET, Script, finished, produce, run, tokens, words
from trio.testing import MockClock

from hermes_trio.consumers.editor import run_editor
from hermes_trio.consumers.editor_plan import EditorSettings
from hermes_trio.consumers.messenger import Capabilities
from hermes_trio.consumers.rendering import DEFAULT, EventRenderer, RenderedEvent, Rendering
from hermes_trio.events import (
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
)
from hermes_trio.testing.fake_messenger import FakeMessenger

TELEGRAM = Capabilities(can_edit=True, max_length=4096, length_unit="utf16")
NO_EDITS = Capabilities(can_edit=False, max_length=400, can_delete=False, can_type=False)


class PlainChat(FakeMessenger):
    """An adapter's messenger for a chat that wants terse tool lines, no
    gateway notices, and everything else as the editor draws it."""

    def __init__(self, capabilities: Capabilities = TELEGRAM) -> None:
        super().__init__(capabilities)
        self.asked: list[RenderedEvent] = []

    def render_event(self, event: RenderedEvent) -> Rendering:
        self.asked.append(event)
        match event:
            case ToolCallChunk(tool_name=name, args=args):
                return " ".join([f"[{name}", *(f"{k}={v}" for k, v in args.items())]) + "]"
            case ToolCallFinished(tool_name=name, ok=ok, duration=duration):
                return f"[{name} {'done' if ok else 'failed'} in {duration:g}s]"
            case GatewayNotice():
                return None
            case _:
                return DEFAULT


TOOL_TURN: Script = [
    *tokens(words(25)),
    (0.1, MessageStop(False)),
    (0.0, ToolCallChunk("terminal", "ls -la", {"command": "ls -la"}, 0)),
    (0.5, GatewayNotice("long_turn", "still working")),
    (1.0, ToolCallFinished("terminal", 1.5, True, 0)),
    (0.0, ToolCallChunk("web_search", "trio", {}, 1)),
    (30.0, LongToolHint("web_search", 30.0)),
    (5.0, ToolCallFinished("web_search", 35.0, False, 1)),
    # The model's next answer takes a while: the tool's last line is shown
    # (tool progress is best effort, dropped once the turn is over).
    (2.0, MessageChunk("The ")),
    (0.1, MessageChunk("answer.")),
    (0.1, finished("The answer.")),
]


def test_a_messenger_with_render_event_is_an_event_renderer() -> None:
    assert isinstance(PlainChat(), EventRenderer)
    assert not isinstance(FakeMessenger(TELEGRAM), EventRenderer)


async def test_an_adapter_renders_tool_events_its_own_way_and_drops_notices(
    autojump_clock: MockClock,
) -> None:
    m = PlainChat()
    report = await run(TOOL_TURN, m)
    assert m.visible() == [
        "".join(words(25)).strip(),
        "[web_search failed in 35s]",
        "The answer.",
    ]
    # Its own lines as the tools ran; the long-tool hint was left to the
    # editor (seconds after the adapter's line); no notice ever reached the chat.
    progress = m.history["2"]
    assert progress == [
        "[terminal command=ls -la]",
        "[terminal done in 1.5s]",
        "[web_search]",
        "[web_search] (30s)",
        "[web_search failed in 35s]",
    ]
    everything = [text for texts in m.history.values() for text in texts]
    assert not any("still working" in text for text in everything)
    assert [type(e).__name__ for e in m.asked] == [
        "ToolCallChunk",
        "GatewayNotice",
        "ToolCallFinished",
        "ToolCallChunk",
        "LongToolHint",
        "ToolCallFinished",
    ]
    assert report.delivered


async def test_without_edits_the_adapters_tool_lines_are_folded_into_the_answer(
    autojump_clock: MockClock,
) -> None:
    m = PlainChat(NO_EDITS)
    await run(TOOL_TURN, m)
    assert m.visible() == [
        "".join(words(25)).strip()
        + "\n\n[terminal done in 1.5s]\n[web_search failed in 35s]\n\nThe answer."
    ]


class Silent(FakeMessenger):
    """Shows nothing beside the answer."""

    def render_event(self, event: RenderedEvent) -> Rendering:
        return None


async def test_a_renderer_may_drop_every_side_event(autojump_clock: MockClock) -> None:
    m = Silent(TELEGRAM)
    script: Script = [
        (0.0, ToolCallChunk("terminal", "date", {}, 0)),
        (0.5, ToolProgress("terminal", 0, 1, 2, "half")),
        (30.0, LongToolHint("terminal", 30.0)),
        (0.5, ToolCallFinished("terminal", 31.0, True, 0)),
        (0.0, MessageStop(False)),
        (0.1, ContextCompacted("summary", 40_000, 9_000, 12)),
        *tokens(words(5)),
        (0.1, finished("".join(words(5)))),
    ]
    settings = EditorSettings(typing_interval=0, long_tool_hint="slow {tool}")
    await run(script, m, settings)
    assert m.visible() == ["".join(words(5)).strip()]


class Chatty(FakeMessenger):
    """Draws its own compaction line, progress and reasoning blocks, and
    restart notice."""

    def render_event(self, event: RenderedEvent) -> Rendering:
        match event:
            case ContextCompacted(tokens_before=before, tokens_after=after):
                return f"(compacted {before} -> {after})"
            case ToolProgress(tool_name=name, progress=done, total=total):
                return f"{name}: {done:g} of {total:g}"
            case ReasoningChunk(text=text):
                return f"thinking: {text}"
            case GatewayNotice(kind="restart"):
                return "brb"
            case _:
                return DEFAULT


async def test_a_renderer_draws_compaction_progress_and_whole_reasoning_blocks(
    autojump_clock: MockClock,
) -> None:
    m = Chatty(TELEGRAM)
    script: Script = [
        (0.0, ReasoningChunk("The user ")),
        (0.1, ReasoningChunk("wants a date.")),
        (0.1, ToolCallChunk("terminal", "date", {}, 0)),
        (0.5, ToolProgress("terminal", 0, 1, 2, "half")),
        (0.5, ToolCallFinished("terminal", 1.0, True, 0)),
        (0.0, MessageStop(False)),
        (0.1, ContextCompacted("summary", 40_000, 9_000, 12)),
        *tokens(words(5)),
        (0.1, finished("".join(words(5)))),
    ]
    await run(script, m)
    assert m.visible() == [
        "thinking: The user wants a date.",
        "terminal: 1 of 2",
        "(compacted 40000 -> 9000)",
        "".join(words(5)).strip(),
    ]


async def test_the_cut_off_note_is_the_renderers_too(autojump_clock: MockClock) -> None:
    m = Chatty(TELEGRAM)
    send, receive = trio.open_memory_channel[StreamEvent](0)
    stopping = GatewayNotice("restart", "the gateway is stopping")
    with trio.CancelScope() as outer:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce, send, tokens(words(30)))
            nursery.start_soon(
                partial(run_editor, receive, m, QUIET, interrupt_notice=lambda: stopping)
            )
            await trio.sleep(3.0)
            outer.cancel()
    (text,) = m.visible()
    assert text.endswith("\n\nbrb") and "▌" not in text


class Broken(FakeMessenger):
    def render_event(self, event: RenderedEvent) -> Rendering:
        return 42  # type: ignore[return-value]  # an untyped adapter's mistake


async def test_a_renderer_answering_nonsense_is_named(autojump_clock: MockClock) -> None:
    script: Script = [(0.0, GatewayNotice("online", "back")), (0.1, finished("hi"))]
    with pytest.RaisesGroup(
        pytest.RaisesExc(TypeError, match=r"render_event returned 42"), flatten_subgroups=True
    ):
        await run(script, Broken(TELEGRAM))


async def test_without_a_renderer_nothing_is_asked_and_reasoning_stays_hidden(
    autojump_clock: MockClock,
) -> None:
    m = FakeMessenger(TELEGRAM)
    script: Script = [
        (0.0, ReasoningChunk("hmm")),
        (0.1, MessageChunk("hi")),
        (0.1, finished("hi")),
    ]
    await run(script, m)
    assert m.visible() == ["hi"]
