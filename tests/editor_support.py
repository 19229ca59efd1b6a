"""The message editor's test harness: a scripted event stream fed to
``run_editor`` over the in-memory messenger, on whatever clock the test runs."""

from __future__ import annotations

from collections.abc import Callable

import trio

from hermes_trio.consumers.editor import EditorControl, run_editor
from hermes_trio.consumers.editor_plan import EditorReport, EditorSettings
from hermes_trio.events import MessageChunk, StreamEvent, TurnFinished, Usage
from hermes_trio.testing.fake_messenger import FakeMessenger

QUIET = EditorSettings(typing_interval=0)

Script = list[tuple[float, StreamEvent]]  # (delay before the event, event)


def finished(text: str, reason: str = "stop") -> TurnFinished:
    return TurnFinished(text, Usage(), reason)


def words(n: int) -> list[str]:
    return [f"w{i} " for i in range(n)]


def tokens(chunks: list[str], gap: float = 0.1) -> Script:
    return [(gap, MessageChunk(c)) for c in chunks]


async def produce(send: trio.MemorySendChannel[StreamEvent], script: Script) -> None:
    async with send:
        for delay, event in script:
            await trio.sleep(delay)
            await send.send(event)


async def run(
    script: Script,
    messenger: FakeMessenger,
    settings: EditorSettings = QUIET,
    *,
    control: EditorControl | None = None,
    at: tuple[float, Callable[[], object]] | None = None,
) -> EditorReport:
    """The editor's report on ``script``; ``at`` (seconds, action) does
    something from outside the turn while it runs (a /verbose through
    ``control``)."""
    send, receive = trio.open_memory_channel[StreamEvent](0)

    async def act(seconds: float, action: Callable[[], object]) -> None:
        await trio.sleep(seconds)
        action()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce, send, script)
        if at is not None:
            nursery.start_soon(act, *at)
        return await run_editor(receive, messenger, settings, control=control)
