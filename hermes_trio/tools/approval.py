"""The approval policy for dangerous commands.

Which commands are dangerous is decided by
:mod:`hermes_trio.tools.command_policy` (its docstring holds the rule table);
this module asks the user about them, or refuses them when nobody can be
asked.
"""

from __future__ import annotations

import trio

from hermes_trio.tools.base import ApprovalDecision, ApprovalRequest, ToolContext
from hermes_trio.tools.command_policy import find_dangers, work_budget
from hermes_trio.tools.command_rules import DangerPattern

__all__ = ["check_approval"]


# Commands this long or longer are judged in a worker thread.  The work on
# a command is bounded by a budget linear in its length; below this length
# that bound keeps the event loop's pause to a few milliseconds.
THREAD_THRESHOLD = 300
# The most work the check may do on the event loop (in work units).
INLINE_WORK_LIMIT = work_budget(THREAD_THRESHOLD)


async def _find_dangers(command: str, workdir: str | None) -> tuple[DangerPattern, ...]:
    if len(command) < THREAD_THRESHOLD:
        return find_dangers(command, workdir)
    # The check is pure, so a cancelled turn need not wait for it.
    return await trio.to_thread.run_sync(find_dangers, command, workdir, abandon_on_cancel=True)


def _describe(dangers: list[DangerPattern]) -> str:
    return "; ".join(d.description for d in dangers)


def _details(dangers: list[DangerPattern]) -> str:
    shown = [f"{d.description}: {d.detail}" for d in dangers if d.detail]
    return f" [{'; '.join(shown)}]" if shown else ""


async def check_approval(
    tool_name: str, command: str, ctx: ToolContext, *, workdir: str | None = None
) -> str | None:
    """None if ``command`` may run in ``workdir`` (absolute; None if not
    known), else a refusal the model can read.

    Only rules the user has not approved with "always" in this session are
    asked about, all of them in one question.  Cancellation while waiting
    for the user propagates: the turn is over, and the command must not run.
    """
    if ctx.yolo:
        return None
    found = await _find_dangers(command, workdir)
    dangers = [d for d in found if d.key not in ctx.approved_patterns]
    if not dangers:
        return None
    reason = _describe(dangers)
    if ctx.approve is None:
        return (
            f"refused: this command needs the user's approval ({reason}) "
            f"but there is no approval channel; run with --yolo to allow it.{_details(dangers)} "
            "The command was not run. Do not retry it; choose a safer command."
        )
    request = ApprovalRequest(tool_name=tool_name, command=command, reason=reason)
    try:
        decision = await ctx.approve(request)
    except Exception as exc:  # trio.Cancelled is a BaseException and propagates
        return (
            f"refused: asking the user to approve this command ({reason}) "
            f"failed ({type(exc).__name__}: {exc}); the command was not run."
        )
    if decision is ApprovalDecision.ALWAYS:
        ctx.approved_patterns.update(d.key for d in dangers)
        return None
    if decision is ApprovalDecision.ONCE:
        return None
    return (
        f"refused: this command needs the user's approval ({reason}) "
        "and it was denied. The command was not run. Do not retry it; "
        "ask the user or choose a safer command."
    )
