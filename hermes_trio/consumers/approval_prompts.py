"""Approval questions shown in a chat, beside the message editor.

A turn that waits for a person's yes sends ``ApprovalRequested``; this
consumer sits in front of the editor (:func:`with_approval_prompts`), shows
the question as its own message — with Approve / Deny buttons where the
messenger has them (``ButtonMessenger``), else asking for a typed "yes" or
"no" — and, when ``ApprovalResolved`` comes, replaces it with the outcome
and who decided, taking the buttons away. A question still open when the
turn is cut off (a new message, ``/stop``, shutdown) is shown as
cancelled, from a shielded cleanup with a short deadline.

The button payload is ``y:<approval id>`` or ``n:<approval id>`` (55
bytes, within Telegram's 64); :func:`parse_button` reads it back. Who may
answer is decided where the answer lands
(:func:`hermes_trio.approvals.answer_approval`), not here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar, cast

import trio

from ..events import ApprovalRequested, ApprovalResolved, StreamEvent
from .messenger import (
    Button,
    ButtonMessenger,
    ButtonsRefused,
    Messenger,
    PlatformError,
)
from .rate_limits import waiting_out_rate_limits

__all__ = [
    "PROMPT_GRACE",
    "ApprovalPrompts",
    "button_data",
    "outcome_text",
    "parse_button",
    "parse_typed_answer",
    "prompt_text",
    "with_approval_prompts",
]

log = logging.getLogger("hermes_trio.gateway")

PROMPT_GRACE = 5.0
"""Seconds a prompt's update may take (a cancelled turn's, shielded)."""
PROMPT_RATE_LIMIT_WAIT = 10.0
"""The longest a prompt waits out the platform's rate limit in all."""

_APPROVE, _DENY = "y", "n"

T = TypeVar("T")


def button_data(approval_id: str, approve: bool) -> str:
    """The payload of the Approve (``approve``) or Deny button."""
    return f"{_APPROVE if approve else _DENY}:{approval_id}"


def parse_button(data: str) -> tuple[str, bool] | None:
    """``(approval id, approve)`` from a button's payload; None when the
    payload is not an approval button's."""
    kind, sep, approval_id = data.partition(":")
    if not sep or not approval_id or kind not in (_APPROVE, _DENY):
        return None
    return approval_id, kind == _APPROVE


_YES = frozenset({"yes", "y", "approve", "approved", "ok", "allow"})
_NO = frozenset({"no", "n", "deny", "denied", "reject", "stop"})


def parse_typed_answer(text: str) -> bool | None:
    """A typed reply to a prompt: True for "yes", False for "no" (and a
    few synonyms, any case, a trailing "." or "!"), None for anything else."""
    word = text.strip().rstrip(".!").strip().lower()
    if word in _YES:
        return True
    if word in _NO:
        return False
    return None


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{round(seconds / 60)} min"
    return f"{round(seconds / 3600)} h"


def _code(command: str) -> str:
    # A fence longer than any run of backticks in the command keeps it whole.
    fence = "```"
    while fence in command:
        fence += "`"
    return f"{fence}\n{command}\n{fence}"


def prompt_text(event: ApprovalRequested, *, typed: bool) -> str:
    """The question as the person sees it; ``typed``: no buttons, so it
    says how to answer in words."""
    how = "Reply *yes* or *no*" if typed else "Approve or deny"
    return (
        f"⚠️ Approval needed: {event.tool_name} wants to run\n"
        f"{_code(event.command)}\n"
        f"Why: {event.reason}\n"
        f"{how} within {_duration(event.timeout)}."
    )


def outcome_text(
    event: ApprovalRequested, outcome: str, *, by: str | None = None, why: str = ""
) -> str:
    """The prompt once decided: how it ended and who decided."""
    if outcome == "approved":
        head = f"✅ Approved by {by}" if by else "✅ Approved"
    elif outcome == "denied":
        head = f"❌ Denied by {by}" if by else "❌ Denied"
        head += "; the command did not run"
    elif outcome == "expired":
        head = f"⌛ Expired: no answer within {_duration(event.timeout)}; the command did not run"
    else:
        head = f"🚫 Cancelled ({why or 'the turn was interrupted'}); the command did not run"
    return f"{head}.\n{_code(event.command)}"


@dataclass
class _Shown:
    event: ApprovalRequested
    message_id: str | None
    """None: the prompt could not be sent."""
    buttons: bool
    """Shown with buttons (else it asks for a typed answer)."""


class ApprovalPrompts:
    """The approval prompts of one turn in one chat.

    ``who(user_id)`` names the person who decided (a display name);
    ``why_cancelled()`` says why the turn stopped, for a question it left
    open. ``typed`` is called with an open question's id when the prompt
    asks for a typed answer (no buttons), and with None once none is open.
    """

    def __init__(
        self,
        messenger: Messenger,
        *,
        who: Callable[[str], str] = str,
        why_cancelled: Callable[[], str] = lambda: "the turn was interrupted",
        typed: Callable[[str | None], None] | None = None,
    ) -> None:
        self._messenger = messenger
        self._who = who
        self._why_cancelled = why_cancelled
        self._typed = typed
        self.shown: dict[str, _Shown] = {}

    @property
    def open(self) -> list[str]:
        """Ids of the questions shown and not yet settled."""
        return list(self.shown)

    async def ask(self, event: ApprovalRequested) -> None:
        buttons = self._messenger.capabilities.buttons
        message_id: str | None = None
        try:
            if buttons:
                with_buttons = cast(ButtonMessenger, self._messenger)
                text = prompt_text(event, typed=False)
                try:
                    message_id = await _retrying(
                        lambda: with_buttons.send_buttons(
                            text,
                            (
                                Button("Approve", button_data(event.id, True)),
                                Button("Deny", button_data(event.id, False), danger=True),
                            ),
                        )
                    )
                except ButtonsRefused:
                    buttons = False
            if not buttons:
                text = prompt_text(event, typed=True)
                message_id = await _retrying(lambda: self._messenger.send(text))
        except PlatformError as exc:
            # The question still waits and may be answered elsewhere (an
            # approver); it expires on its own otherwise.
            log.warning("could not show an approval prompt: %s", exc)
        self.shown[event.id] = _Shown(event, message_id, buttons)
        self._tell_typed()

    def _tell_typed(self) -> None:
        # The newest open question without buttons is the one "yes" answers.
        if self._typed is not None:
            typed = [key for key, shown in self.shown.items() if not shown.buttons]
            self._typed(typed[-1] if typed else None)

    async def settle(self, resolved: ApprovalResolved) -> None:
        shown = self.shown.pop(resolved.id, None)
        if shown is None:
            return
        by = self._who(resolved.by) if resolved.by else None
        why = self._why_cancelled() if resolved.outcome == "cancelled" else ""
        await self._show(shown, outcome_text(shown.event, resolved.outcome, by=by, why=why))

    async def cancel_all(self) -> None:
        """Show every open question as cancelled (the turn was cut off)."""
        why = self._why_cancelled()
        while self.shown:
            _, shown = self.shown.popitem()
            await self._show(shown, outcome_text(shown.event, "cancelled", why=why))

    async def _show(self, shown: _Shown, text: str) -> None:
        self._tell_typed()
        if shown.message_id is None:
            return
        message_id = shown.message_id
        try:
            if shown.buttons:
                with_buttons = cast(ButtonMessenger, self._messenger)
                await _retrying(lambda: with_buttons.close_buttons(message_id, text))
            elif self._messenger.capabilities.can_edit:
                await _retrying(lambda: self._messenger.edit(message_id, text, final=True))
            else:
                await _retrying(lambda: self._messenger.send(text))
        except PlatformError as exc:
            log.warning("could not update an approval prompt: %s", exc)


async def _retrying(call: Callable[[], Awaitable[T]]) -> T:
    return await waiting_out_rate_limits(call, within=PROMPT_RATE_LIMIT_WAIT, attempts=3)


async def with_approval_prompts(
    receive: trio.MemoryReceiveChannel[StreamEvent],
    consumer: Callable[[trio.MemoryReceiveChannel[StreamEvent]], Awaitable[T]],
    prompts: ApprovalPrompts,
) -> T:
    """Run ``consumer`` on the turn's events, showing its approval
    questions through ``prompts`` on the way (every event still reaches
    ``consumer``). Cut off, settles the questions still open first."""
    forward, inner = trio.open_memory_channel[StreamEvent](0)
    results: list[T] = []

    async def run_consumer() -> None:
        results.append(await consumer(inner))

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_consumer)
            async with forward, receive:
                async for event in receive:
                    if isinstance(event, ApprovalRequested):
                        await prompts.ask(event)
                    elif isinstance(event, ApprovalResolved):
                        await prompts.settle(event)
                    try:
                        await forward.send(event)
                    except trio.BrokenResourceError:
                        pass  # the consumer ended early; keep showing prompts
    finally:
        if prompts.open:
            with trio.move_on_after(PROMPT_GRACE, shield=True):
                await prompts.cancel_all()
    return results[0]
