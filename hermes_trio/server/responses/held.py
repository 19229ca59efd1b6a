"""Answers to held tool calls (pure): a response that asked
(``mcp_approval_request`` items) leaves its calls without results in the
stored conversation; the request that continues it settles each one.

:func:`check_answer` decides whether one ``mcp_approval_response`` may
count: the approval must exist and be the requester's (another key's is
"not found", like its responses), still be open, not past its
``expires_at``, and wait in the conversation being continued — every
refusal a 400 naming ``approval_request_id``. :func:`settle` turns the
answers into the agent's :class:`~hermes_trio.agent.HeldCalls`: approved
calls run, denied ones give the model the person's refusal as the call's
result, and calls left unanswered (the client wrote something else
instead) are refused as such, so the conversation stays valid.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence

from ...approvals import Decision, Outcome
from ...store import HeldApproval
from ...tools.approval import ApprovalAnswer
from ...turn import HeldCall, HeldCalls
from ...wire.chat_chunks import ToolCall
from ...wire.messages import Message
from ...wire.responses_types import McpApprovalResponse, OutputItem
from ..parsing.errors import APIError
from ..parsing.validation import bad

__all__ = ["PARAM", "answered_twice", "check_answer", "held_ids", "open_calls", "settle"]

PARAM = "approval_request_id"

UNANSWERED = (
    "refused: this call needed the user's approval, and they did not give it "
    "(they went on without answering). It was not run. Do not retry it unless they ask."
)


def held_ids(output: Sequence[OutputItem]) -> list[str]:
    """The approval ids a stored response's ``output`` asks about."""
    return [
        str(item.get("id"))
        for item in output
        if isinstance(item, dict) and item.get("type") == "mcp_approval_request"
    ]


def open_calls(messages: Sequence[Message]) -> dict[str, ToolCall]:
    """The tool calls of ``messages`` that have no result, by call id."""
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
    calls: dict[str, ToolCall] = {}
    for message in messages:
        if message["role"] != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            if call.get("id") not in answered:
                fn = call.get("function") or {}
                calls[str(call["id"])] = ToolCall(
                    str(call["id"]), str(fn.get("name")), str(fn.get("arguments") or "")
                )
    return calls


def _not_found(approval_id: str) -> APIError:
    return bad(
        f"Approval request with id '{approval_id}' not found.",
        PARAM,
        code="approval_request_not_found",
    )


def answered_twice(approval_id: str, by: str | None = None) -> APIError:
    said = f" (in response '{by}')" if by else " in this request"
    return bad(
        f"Approval request '{approval_id}' was already answered{said}; "
        "an approval is answered once.",
        PARAM,
        code="approval_request_answered",
    )


def check_answer(
    approval_id: str,
    held: HeldApproval | None,
    *,
    owner: str,
    now: float,
    asked_by: str | None = None,
    waiting: Sequence[str] | None = None,
) -> HeldApproval:
    """The held approval an answer may settle, or the 400 that says why
    not. ``asked_by`` is the response being continued
    (``previous_response_id``) and ``waiting`` the approvals it holds (None:
    not checked yet, the conversation is not read); ``now`` is Unix
    seconds."""
    if held is None or held.owner != owner:
        raise _not_found(approval_id)
    if held.answered_by is not None:
        raise answered_twice(approval_id, held.answered_by)
    if now > held.expires_at:
        when = datetime.datetime.fromtimestamp(held.expires_at, datetime.UTC)
        raise bad(
            f"Approval request '{approval_id}' expired at {when:%Y-%m-%d %H:%M:%S} UTC "
            "(approvals.timeout); its call was not run. Ask again.",
            PARAM,
            code="approval_request_expired",
        )
    if waiting is not None and approval_id not in waiting:
        where = (
            f"previous_response_id '{asked_by}' does not hold it"
            if asked_by is not None
            else "continue it with previous_response_id set"
        )
        raise bad(
            f"Approval request '{approval_id}' waits in response '{held.response_id}': {where}.",
            PARAM,
            code="approval_request_not_pending",
        )
    return held


def settle(
    position: int,
    held: Sequence[HeldApproval],
    answers: Mapping[str, McpApprovalResponse],
    calls: Mapping[str, ToolCall],
) -> HeldCalls | None:
    """The held calls of the continued response, settled: each approval
    in ``held`` whose call is still open gets its answer (an
    ``mcp_approval_response`` item, by approval id) or is refused as
    unanswered. Their results go in at ``position``."""
    settled: list[HeldCall] = []
    for approval in held:
        call = calls.get(approval.call_id)
        if call is None:
            continue
        answer = answers.get(approval.id)
        if answer is None:
            settled.append(HeldCall(call, UNANSWERED))
        elif answer.get("approve"):
            settled.append(HeldCall(call))
        else:
            decision = Decision(Outcome.DENIED, reason=str(answer.get("reason") or ""))
            refusal = ApprovalAnswer(decision, 0.0).refusal(approval.reason, "this call")
            settled.append(HeldCall(call, refusal))
    return HeldCalls(position, tuple(settled)) if settled else None
