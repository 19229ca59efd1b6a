"""The approval policy for dangerous commands.

Which commands are dangerous is decided by
:mod:`hermes_trio.command_check.policy` (its docstring holds the rule table);
this module asks the user about them, or refuses them when nobody can be
asked. The asking itself (events, the wait, the deadline, answers by id) is
:mod:`hermes_trio.approvals`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import trio

from hermes_trio.approvals import (
    PENDING,
    ApprovalHandle,
    ApprovalQuestion,
    Decision,
    Outcome,
    new_approval_id,
)
from hermes_trio.command_check.policy import find_dangers, work_budget
from hermes_trio.command_check.rules import DangerPattern
from hermes_trio.tools.base import (
    ApprovalCallback,
    ApprovalDecision,
    ApprovalRequest,
    ToolCallScope,
    ToolContext,
)

__all__ = ["CALLBACK", "EARLIER", "ApprovalAnswer", "check_approval", "request_approval"]

CALLBACK = "callback"
"""``ApprovalResolved.by`` of an answer the approval callback gave."""
EARLIER = "an earlier request"
"""``Decision.by`` of a call approved before it ran (``ToolCallScope.approved``)."""


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
    asked about, all of them in one question: through the turn's approval
    channel (``ApprovalRequested`` in its events, answered by id) and/or
    the context's callback, whichever answers first, for at most the
    channel's (or the context's) timeout. Cancellation while waiting
    propagates: the turn is over, and the command must not run.
    """
    if ctx.yolo:
        return None
    found = await _find_dangers(command, workdir)
    dangers = [d for d in found if d.key not in ctx.approved_patterns]
    if not dangers:
        return None
    reason = _describe(dangers)
    if not ctx.can_ask:
        return (
            f"refused: this command needs the user's approval ({reason}) "
            f"but there is no approval channel; run with --yolo to allow it.{_details(dangers)} "
            "The command was not run. Do not retry it; choose a safer command."
        )
    answer = await request_approval(ctx, tool_name=tool_name, command=command, reason=reason)
    assert answer is not None  # someone can be asked
    if answer.decision.approved:
        if answer.decision.always:
            ctx.approved_patterns.update(d.key for d in dangers)
        return None
    return answer.refusal(reason)


@dataclass(frozen=True)
class ApprovalAnswer:
    """How a question asked by :func:`request_approval` ended: the
    ``decision``, the ``timeout`` it waited under, and the callback's
    ``failure`` (its exception, named) if asking through it failed."""

    decision: Decision
    timeout: float
    failure: str | None = None

    def refusal(self, reason: str, subject: str = "this command") -> str | None:
        """What the model reads when ``subject`` may not run (None when it
        may): not approved, and why."""
        decision = self.decision
        if decision.approved:
            return None
        if self.failure is not None:
            return (
                f"refused: asking the user to approve {subject} ({reason}) "
                f"failed ({self.failure}); it was not run."
            )
        if decision.outcome is Outcome.EXPIRED:
            return (
                f"refused: not approved in time (expired: nobody answered within "
                f"{self.timeout:g} s); {subject} needs the user's approval ({reason}). "
                f"{subject[0].upper()}{subject[1:]} was not run. Do not retry it now; "
                "tell the user it needs their approval, or choose something safer."
            )
        if decision.outcome is Outcome.CANCELLED:
            return f"refused: the question about {subject} was cancelled; it was not run."
        said = f"; their reason: {decision.reason}" if decision.reason else ""
        return (
            f"refused: the user denied {subject}{said}. It needs approval ({reason}). "
            f"{subject[0].upper()}{subject[1:]} was not run. Do not retry it; "
            "ask the user or choose something safer."
        )


async def request_approval(
    ctx: ToolContext, *, tool_name: str, command: str, reason: str
) -> ApprovalAnswer | None:
    """Ask whoever ``ctx`` can ask whether ``tool_name`` may do ``command``
    (what the person sees) for ``reason``, and wait for the answer; None
    when nobody can be asked. For tools of any kind: ``check_approval`` is
    this for the dangerous-command check.

    The turn's approval channel (``ApprovalRequested`` in its events,
    answered by id) and the context's callback both may answer; the first
    answer counts. It waits the channel's timeout, else the context's.
    Cancellation propagates (the question ends ``cancelled``). A call the
    person approved in an earlier request (``ToolCallScope.approved``) is
    approved at once; with a ``defer`` channel nothing waits: the question
    is published, the call marked held, and the answer is a denial the
    agent does not show the model (the turn ends there).
    """
    if not ctx.can_ask:
        return None
    channel = ctx.approvals
    timeout = ctx.approval_timeout
    if channel is not None and channel.timeout is not None:
        timeout = channel.timeout
    call = ctx.call
    if call is not None and call.approved:
        return ApprovalAnswer(Decision(Outcome.APPROVED, by=EARLIER), timeout)
    if channel is not None and channel.defer and call is not None and call.publish is not None:
        return await _hold(call, tool_name, command, reason, timeout)
    failures: list[str] = []
    answerer = None
    if ctx.approve is not None:
        answerer = partial(_ask_callback, ctx.approve, tool_name, command, reason, failures)
    decision = await PENDING.ask(
        tool_name=tool_name,
        command=command,
        reason=reason,
        seconds=timeout,
        arguments=call.arguments if call is not None else {"command": command},
        requester=channel.requester if channel is not None else None,
        approvers=channel.approvers if channel is not None else (),
        publish=call.publish if call is not None else None,
        answerer=answerer,
        index=call.index if call is not None else -1,
        call_id=call.call_id if call is not None else "",
    )
    return ApprovalAnswer(decision, timeout, failures[0] if failures else None)


async def _hold(
    call: ToolCallScope, tool_name: str, command: str, reason: str, seconds: float
) -> ApprovalAnswer:
    """Publish the question and leave it to a later request: nothing waits
    here, and the call is marked held so the agent ends the turn without
    counting it as run."""
    deadline = trio.current_time() + seconds
    question = ApprovalQuestion(
        new_approval_id(), tool_name, command, reason, deadline, call.arguments
    )
    assert call.publish is not None
    await call.publish(question.requested(seconds, call.index, call.call_id))
    call.held.append(question.id)
    return ApprovalAnswer(Decision(Outcome.DENIED, reason="held for a later answer"), seconds)


async def _ask_callback(
    approve: ApprovalCallback,
    tool_name: str,
    command: str,
    reason: str,
    failures: list[str],
    handle: ApprovalHandle,
) -> None:
    """The context's callback as one answerer of the question."""
    request = ApprovalRequest(
        tool_name, command, reason, id=handle.id, deadline=handle.question.deadline
    )
    try:
        decision = await approve(request)
    except Exception as exc:  # trio.Cancelled is a BaseException and propagates
        failures.append(f"{type(exc).__name__}: {exc}")
        handle.resolve(False, by=CALLBACK, reason="asking failed")
        return
    handle.resolve(
        decision is not ApprovalDecision.DENY,
        by=CALLBACK,
        always=decision is ApprovalDecision.ALWAYS,
    )
