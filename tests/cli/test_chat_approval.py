"""``hermes-trio chat`` asks from the turn's events: the view shows the
question and how it ended, :meth:`Chat.ask_approval` reads the answer from
the terminal (a pty here) and gives it by id."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import trio
import trio.testing
from approval_support import REBOOT, Guarded, calls
from rich.console import Console
from support import agent_on_double

from hermes_trio import turn as turns
from hermes_trio.approvals import PENDING
from hermes_trio.cli.chat import Chat
from hermes_trio.config import ApprovalsConfig
from hermes_trio.consumers.terminal import TerminalSettings, TerminalView
from hermes_trio.events import StreamEvent
from hermes_trio.tools import ToolRegistry

QUESTION = "⚠ guarded needs your approval (shutting down or rebooting the machine)"


@contextmanager
def terminal() -> Iterator[tuple[int, int]]:
    """A pseudo-terminal: (the side a person types into, the chat's stdin)."""
    typed, stdin = os.openpty()
    try:
        yield typed, stdin
    finally:
        os.close(typed)
        os.close(stdin)


class Screen(io.StringIO):
    """Where the question goes; ``asking`` is set once the chat reads the
    answer (it prints the prompt after flushing keys typed earlier)."""

    def __init__(self) -> None:
        super().__init__()
        self.asking = trio.Event()

    def write(self, text: str) -> int:
        written = super().write(text)
        if "Allow?" in text:
            self.asking.set()
        return written


async def asked(err: Screen) -> None:
    with trio.fail_after(10):
        await err.asking.wait()


def plain_chat(agent: Any, stdin: int) -> tuple[Chat, io.StringIO, Screen]:
    out, err = io.StringIO(), Screen()
    console = Console(file=out, force_terminal=False, no_color=True, width=200)
    view = TerminalView(console, TerminalSettings(plain=True, err=err))
    chat = Chat(agent, view, stream=True, input_fd=stdin)
    chat._ask_console = Console(file=err, force_terminal=False, no_color=True, width=200)
    return chat, out, err


async def test_an_answer_typed_at_the_terminal_runs_the_command() -> None:
    tool = Guarded()
    with terminal() as (typed, stdin):
        async with agent_on_double(calls(REBOOT), tools=ToolRegistry([tool])) as (agent, double):
            chat, out, err = plain_chat(agent, stdin)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(chat.turn, "reboot it")
                await asked(err)
                os.write(typed, b"o\n")
    shown = err.getvalue()
    assert QUESTION in shown and f"    {REBOOT}" in shown
    assert "Allow? [o]nce / [a]lways (this session) / [d]eny (denies in 300s)" in shown
    assert shown.index(QUESTION) < shown.index("✓ allowed once")
    assert tool.ran == [REBOOT]
    assert out.getvalue().strip() == "done"
    assert PENDING.book.pending() == []


async def test_no_answer_at_the_terminal_expires_on_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tool = Guarded()
    with terminal() as (_, stdin):
        async with agent_on_double(
            calls(REBOOT), tools=ToolRegistry([tool]), approvals=ApprovalsConfig(timeout=90)
        ) as (agent, double):
            chat, _, err = plain_chat(agent, stdin)
            await chat.turn("reboot it")
    assert "(denies in 90s)" in err.getvalue()
    assert "✗ no answer in 90s: denied" in err.getvalue()
    asked_at = double.model_requests[0].received_at
    assert double.model_requests[1].received_at == asked_at + 90
    assert tool.ran == []


async def test_an_interrupt_at_the_question_says_the_approval_was_cancelled() -> None:
    tool = Guarded()
    with terminal() as (_, stdin):
        async with agent_on_double(calls(REBOOT), tools=ToolRegistry([tool])) as (agent, double):
            chat, _, err = plain_chat(agent, stdin)
            turn = turns.Turn()

            async def show(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
                await chat.view.render_turn(receive, ask=chat.ask_approval)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    partial(turns.run_turn, agent, "go", show, turn=turn, tool_context=chat.ctx)
                )
                await asked(err)
                assert len(PENDING.book.pending()) == 1
                turn.cancel("interrupted")  # Ctrl-C
    shown = err.getvalue()
    assert shown.index("Allow?") < shown.index("⏹ approval cancelled: the turn was interrupted")
    assert shown.index("⏹ approval cancelled") < shown.index("⏹ interrupted")
    assert PENDING.book.pending() == [] and tool.ran == []
    assert len(double.model_requests) == 1


async def test_without_a_terminal_to_ask_at_it_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tool = Guarded()
    async with agent_on_double(calls(REBOOT), tools=ToolRegistry([tool])) as (agent, double):
        out, err = io.StringIO(), io.StringIO()
        console = Console(file=out, force_terminal=False, no_color=True, width=200)
        chat = Chat(
            agent,
            TerminalView(console, TerminalSettings(plain=True, err=err)),
            stream=True,
            input_fd=None,
        )
        await chat.turn("reboot it")
    assert "Allow?" not in err.getvalue() and "⚠" not in err.getvalue()
    assert "no approval channel" in double.model_requests[1].json["messages"][-1]["content"]
