"""Helpers the MCP tests share."""

from __future__ import annotations

import trio

from hermes_trio.agent import Agent
from hermes_trio.events import ToolProgress


async def interrupt_at_progress(agent: Agent, prompt: str, reports: int = 2) -> list[ToolProgress]:
    """Run a turn and leave it (cancelling it) at its ``reports``-th
    progress report; asserts the turn was gone within a second of that."""
    progress: list[ToolProgress] = []
    interrupted = None
    with trio.move_on_after(30):
        async with agent.turn(prompt) as stream:
            async for event in stream:
                if isinstance(event, ToolProgress):
                    progress.append(event)
                    if len(progress) == reports:
                        interrupted = trio.current_time()
                        break
    assert interrupted is not None, f"only {len(progress)} progress report(s) came"
    assert trio.current_time() - interrupted < 1.0
    return progress
