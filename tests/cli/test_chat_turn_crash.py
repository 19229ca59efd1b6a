"""A crashing turn at the terminal: a bug in a tool or in the renderer ends
that turn with the turn's one crash policy (``internal_error``, logged once),
the terminal shows an error line, and the next prompt still works."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
from rich.console import Console
from support import agent_on_double, crashing_tools
from trio.testing import MockClock

from hermes_trio.cli.chat import Chat, _Reader
from hermes_trio.consumers.terminal import TerminalSettings, TerminalView
from hermes_trio.testing import TextReply, ToolCallReply

CRASH_LINE = "error: internal error: the turn failed (RuntimeError); the log has the details"


class _Lines(_Reader):
    def __init__(self, lines: list[str]) -> None:
        self._lines: Iterator[str] = iter(lines)

    async def read(self) -> str:
        try:
            return next(self._lines)
        except StopIteration:
            raise EOFError from None


def _chat_view() -> tuple[TerminalView, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    console = Console(file=out, force_terminal=False, no_color=True, width=200)
    return TerminalView(console, TerminalSettings(plain=True, err=err)), out, err


def _crashes(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "hermes_trio.turn" and r.exc_info]


async def test_a_crashing_tool_ends_the_turn_and_the_next_prompt_works(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    script = [ToolCallReply([("probe", {})], text="Let me look."), TextReply("second answer")]
    view, out, err = _chat_view()
    async with agent_on_double(script, tools=crashing_tools()) as (agent, double):
        chat = Chat(agent, view, stream=True, input_fd=None)
        code = await chat.repl(_Lines(["one", "two"]))
    assert code == 0
    shown = out.getvalue() + err.getvalue()
    assert CRASH_LINE in shown, shown
    assert out.getvalue().rstrip().endswith("second answer")
    assert len(double.requests) == 2
    assert len(_crashes(caplog)) == 1


async def test_a_crashing_renderer_ends_the_turn_and_the_next_prompt_works(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    view, out, err = _chat_view()
    render = view.render_turn
    bugs = [RuntimeError("renderer bug")]

    async def buggy(receive, **options):  # type: ignore[no-untyped-def]
        if bugs:
            await receive.receive()
            raise bugs.pop()
        return await render(receive, **options)

    monkeypatch.setattr(view, "render_turn", buggy)
    async with agent_on_double([TextReply("lost"), TextReply("second answer")]) as (agent, _):
        chat = Chat(agent, view, stream=True, input_fd=None)
        first = await chat.turn("one")
        assert first is not None and first.error_code == "internal_error"
        code = await chat.repl(_Lines(["two"]))
    assert code == 0
    assert CRASH_LINE in out.getvalue()
    assert out.getvalue().rstrip().endswith("second answer")
    crashes = _crashes(caplog)
    assert len(crashes) == 1 and "consumer" in crashes[0].getMessage()
