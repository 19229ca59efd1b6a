"""The contract between the agent loop and its tools.

A tool gets already-validated JSON arguments and a :class:`ToolContext`, and
returns a :class:`ToolResult` whose ``content`` is what the model reads next.
Tools report expected failures (missing file, non-zero exit) as
``ToolResult(ok=False, ...)`` rather than raising, because the model can act on
a readable message; the registry turns unexpected exceptions into the same
shape, but never swallows ``trio.Cancelled``.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol

from hermes_trio.approvals import DEFAULT_APPROVAL_TIMEOUT, ApprovalChannel, Publish

__all__ = [
    "ApprovalCallback",
    "ApprovalDecision",
    "ApprovalRequest",
    "Tool",
    "ToolCallScope",
    "ToolContext",
    "ToolResult",
    "one_line",
]


class ApprovalDecision(enum.Enum):
    ONCE = "once"
    # Approve this danger pattern for the rest of the session, not just this command.
    ALWAYS = "always"
    DENY = "deny"


@dataclass(frozen=True)
class ApprovalRequest:
    tool_name: str
    command: str
    # Human description of the matched danger pattern, shown to the user.
    reason: str
    # The approval's id (as in ApprovalRequested) and its deadline on the
    # trio clock: past it the question is denied as expired, and a callback
    # still asking is cancelled. Not compared: they differ every time.
    id: str = field(default="", compare=False)
    deadline: float = field(default=float("inf"), compare=False)


ApprovalCallback = Callable[[ApprovalRequest], Awaitable[ApprovalDecision]]


@dataclass(frozen=True)
class ToolCallScope:
    """The tool call a context was made for, set by the agent for each call:
    an approval asked during it names the call (``index``, ``call_id``,
    ``arguments``) and is published into the turn's channel."""

    index: int
    call_id: str
    arguments: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    publish: Publish | None = None
    approved: bool = False
    """The person approved this call already (in an earlier request): what
    it asks runs without asking again."""
    held: list[str] = field(default_factory=list)
    """The approvals this call asked for and left to a later request (a
    channel with ``defer``): the call must not count as run."""


@dataclass
class ToolContext:
    # Who answers approvals: a callback, and/or a person on the turn's
    # surface (approvals, answered by id). With neither, nobody can be
    # asked, so dangerous commands are refused unless yolo.
    approve: ApprovalCallback | None = None
    yolo: bool = False
    # Relative paths and commands resolve here; None means the process cwd.
    cwd: str | None = None
    # Danger-pattern keys the user approved with ALWAYS during this session.
    approved_patterns: set[str] = field(default_factory=set)
    # "workdir": read_file and write_file stay inside cwd and file_roots.
    file_access: Literal["workdir", "anywhere"] = "workdir"
    # More directories the file tools may use (~ expanded, relative to cwd).
    file_roots: tuple[str, ...] = ()
    # Asks the person on the turn's surface (set per turn by the agent from
    # run_turn(approvals=...), or here for every turn of the context).
    approvals: ApprovalChannel | None = None
    # Seconds an approval waits when the channel does not say (callbacks too).
    approval_timeout: float = DEFAULT_APPROVAL_TIMEOUT
    # The call this context was made for (set by the agent per tool call).
    call: ToolCallScope | None = None

    @property
    def can_ask(self) -> bool:
        """Whether anyone can be asked for an approval."""
        return self.approve is not None or self.approvals is not None

    def resolve_path(self, path: str) -> str:
        """``path`` as an absolute path, relative ones taken from ``cwd`` (``~`` expanded)."""
        base = os.path.expanduser(self.cwd) if self.cwd is not None else os.getcwd()
        return os.path.abspath(os.path.join(base, os.path.expanduser(path)))


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    content: str


class Tool(Protocol):
    name: str
    description: str
    # JSON schema with "type": "object"; the registry checks required params and basic types.
    parameters: dict[str, Any]

    def preview(self, args: dict[str, Any]) -> str:
        """A short (<= 80 chars) one-line description of the call, for humans."""
        ...

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult: ...


def one_line(text: str, limit: int = 80) -> str:
    """``text`` with whitespace runs collapsed to one space, cut to ``limit`` chars."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
