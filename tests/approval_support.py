"""For the approval tests: a tool behind the real approval check that runs
nothing (a dangerous command that needs no process), and the scripted turns
that ask the real terminal tool to run a flagged command."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_trio.testing import TextReply, ToolCallReply
from hermes_trio.tools import ToolContext, ToolResult, check_approval

__all__ = ["REBOOT", "Guarded", "calls", "flagged", "terminal_turn", "tool_turn"]

REBOOT = "reboot"  # the safety check's "power" rule: always asked about


@dataclass
class Guarded:
    """A tool that runs nothing, behind the real approval check."""

    name: str = "guarded"
    description: str = "Pretends to run a command."
    parameters: dict[str, Any] = field(
        default_factory=lambda: {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        }
    )
    ran: list[str] = field(default_factory=list)

    def preview(self, args: dict[str, Any]) -> str:
        return str(args["command"])

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        refusal = await check_approval(self.name, args["command"], ctx)
        if refusal is not None:
            return ToolResult(False, refusal)
        self.ran.append(args["command"])
        return ToolResult(True, f"ran {args['command']}")


def calls(*commands: str) -> list[Any]:
    return [ToolCallReply([("guarded", {"command": c}) for c in commands]), TextReply("done")]


def flagged(marker: Path, padding: int = 0) -> str:
    """Harmless, but the safety check asks about it (a recursive delete of
    a broad path that does not exist); ``marker`` shows whether it ran.
    ``padding`` makes the command (and its prompt) longer."""
    pad = f" && true {'x' * padding}" if padding else ""
    return f"touch {marker}{pad} && rm -rf /nonexistent-hermes-approval-test/*"


def terminal_turn(command: str, answer: str) -> list[Any]:
    """The model runs ``command`` in the terminal, then says ``answer``."""
    return [ToolCallReply([("terminal", {"command": command})]), TextReply(answer)]


def tool_turn(marker: Path, answer: str) -> list[Any]:
    return terminal_turn(flagged(marker), answer)
