"""A tool behind the real approval check that runs nothing, for the
approval tests (a dangerous command that needs no process)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hermes_trio.testing import TextReply, ToolCallReply
from hermes_trio.tools import ToolContext, ToolResult, check_approval

__all__ = ["REBOOT", "Guarded", "calls"]

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
