"""Answers to approval prompts from the chats: button presses and typed
"yes"/"no", and who may give them.

A turn for a chat user asks with :func:`approval_channel`: the user who
sent the message and the platform's approvers may answer (``approvals.
approvers``: an entry ``telegram:123`` counts on Telegram only, a bare id
on every platform). The answer lands in the process's registry
(:func:`hermes_trio.approvals.answer_approval`), which decides whether it
counts; anyone else, or a press after the question ended (expired,
cancelled, the gateway restarted), gets a short notice and nothing changes.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import replace

import trio

from ..agent import Agent
from ..approvals import ApprovalChannel, Decision, Refused, answer_approval
from ..consumers.approval_prompts import parse_button
from ..consumers.messenger import PlatformError
from ..platforms.base import ButtonPress

__all__ = [
    "ACK_TIMEOUT",
    "NOT_PENDING",
    "UserNames",
    "answer",
    "approval_channel",
    "approvers_for",
    "refusal_notice",
]

log = logging.getLogger("hermes_trio.gateway")

ACK_TIMEOUT = 2.5
"""Seconds a press's acknowledgement may take: Discord drops an
interaction not answered within 3."""

NOT_PENDING = "This request is no longer pending."
NOT_YOURS = "Only the person who asked (or an approver) can answer this request."
NOT_A_QUESTION = "This button no longer does anything."


def approvers_for(approvers: list[str], platform: str) -> frozenset[str]:
    """The ids in ``approvals.approvers`` that count on ``platform``."""
    found: set[str] = set()
    for entry in approvers:
        name, sep, user = str(entry).partition(":")
        if not sep:
            found.add(str(entry))
        elif name.strip().lower() == platform and user.strip():
            found.add(user.strip())
    return frozenset(found)


def approval_channel(agent: Agent, platform: str, requester: str) -> ApprovalChannel:
    """How a turn for ``requester`` on ``platform`` asks."""
    channel = agent.approval_channel(platform, requester)
    return replace(
        channel, approvers=approvers_for(list(agent.config.approvals.approvers), platform)
    )


def refusal_notice(refused: Refused) -> str:
    """What the presser is told when the answer did not count."""
    if refused.code == "not_allowed":
        return NOT_YOURS
    return NOT_PENDING


def answer(approval_id: str, approve: bool, user_id: str) -> str | None:
    """Answer as ``user_id``: None when it counted, else the notice."""
    result = answer_approval(approval_id, approve, by=user_id)
    if isinstance(result, Decision):
        return None
    log.info("approval %s: answer by %s refused: %s", approval_id, user_id, result.message)
    return refusal_notice(result)


async def acknowledge_press(platform: str, user_id: str, press: ButtonPress) -> None:
    """Answer a button press and tell the platform (within its window)."""
    parsed = parse_button(press.data)
    notice = NOT_A_QUESTION if parsed is None else answer(parsed[0], parsed[1], user_id)
    try:
        with trio.move_on_after(ACK_TIMEOUT):
            await press.acknowledge(notice)
    except PlatformError as exc:
        log.warning("%s: could not acknowledge a button press: %s", platform, exc)


class UserNames:
    """Display names of the users seen lately, to say who decided."""

    def __init__(self, size: int = 1024) -> None:
        self._names: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._size = size

    def remember(self, platform: str, user_id: str, name: str | None) -> None:
        if not name:
            return
        key = (platform, user_id)
        self._names[key] = name
        self._names.move_to_end(key)
        while len(self._names) > self._size:
            self._names.popitem(last=False)

    def name(self, platform: str, user_id: str) -> str:
        return self._names.get((platform, user_id), user_id)
