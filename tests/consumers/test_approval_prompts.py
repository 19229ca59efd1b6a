"""The approval prompts a chat shows in front of the message editor:
buttons, the outcome and who decided, a cancelled wait, the typed-answer
fallback; and the payload and typed-answer parsing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from trio.testing import MockClock

from hermes_trio.approvals import Refused, new_approval_id
from hermes_trio.consumers.approval_prompts import (
    ApprovalPrompts,
    button_data,
    outcome_text,
    parse_button,
    parse_typed_answer,
    prompt_text,
    with_approval_prompts,
)
from hermes_trio.consumers.messenger import Button, ButtonsRefused, Capabilities
from hermes_trio.events import ApprovalRequested, ApprovalResolved, GatewayNotice, StreamEvent
from hermes_trio.gateway.approval_answers import approvers_for, refusal_notice

ASKED = ApprovalRequested(
    id="mcpr_" + "a" * 48,
    tool_name="terminal",
    arguments={"command": "rm -rf /srv/x/*"},
    command="rm -rf /srv/x/*",
    reason="recursive delete of a broad path",
    deadline=300.0,
    timeout=300.0,
)


@dataclass
class ButtonChat:
    """A chat in memory whose messenger shows buttons (or refuses them)."""

    can_edit: bool = True
    refuse_buttons: bool = False
    messages: dict[str, str] = field(default_factory=dict)
    buttons: dict[str, list[Button]] = field(default_factory=dict)
    calls: list[tuple[str, float]] = field(default_factory=list)

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(can_edit=self.can_edit, max_length=4096, buttons=True)

    async def send(self, text: str) -> str:
        self.calls.append(("send", trio.current_time()))
        message_id = str(len(self.messages) + 1)
        self.messages[message_id] = text
        return message_id

    async def send_buttons(self, text: str, buttons: Sequence[Button]) -> str:
        if self.refuse_buttons:
            raise ButtonsRefused("too long")
        message_id = await self.send(text)
        self.buttons[message_id] = list(buttons)
        return message_id

    async def close_buttons(self, message_id: str, text: str) -> None:
        self.calls.append(("close", trio.current_time()))
        self.messages[message_id] = text
        self.buttons[message_id] = []

    async def edit(self, message_id: str, text: str, *, final: bool = False) -> None:
        self.messages[message_id] = text

    async def delete(self, message_id: str) -> None:
        del self.messages[message_id]

    async def typing(self) -> None:
        return None


async def consume(events: Sequence[StreamEvent], prompts: ApprovalPrompts) -> list[StreamEvent]:
    send, receive = trio.open_memory_channel[StreamEvent](10)
    for event in events:
        send.send_nowait(event)
    await send.aclose()

    async def collect(inner: trio.MemoryReceiveChannel[StreamEvent]) -> list[StreamEvent]:
        return [event async for event in inner]

    return await with_approval_prompts(receive, collect, prompts)


async def test_buttons_then_the_outcome_and_who_decided() -> None:
    chat = ButtonChat()
    prompts = ApprovalPrompts(chat, who=lambda user: {"7": "Ann"}.get(user, user))
    events: list[StreamEvent] = [
        ASKED,
        ApprovalResolved(id=ASKED.id, outcome="approved", by="7"),
        GatewayNotice("long_turn", "still working"),
    ]
    assert await consume(events, prompts) == events  # the editor still sees all
    assert [b.label for b in chat.buttons["1"]] == []  # taken away
    assert chat.messages["1"].startswith("✅ Approved by Ann.")
    assert "rm -rf /srv/x/*" in chat.messages["1"]
    assert prompts.open == []


async def test_a_cancelled_wait_is_shown_as_cancelled(autojump_clock: MockClock) -> None:
    chat = ButtonChat()
    prompts = ApprovalPrompts(chat, why_cancelled=lambda: "stopped")
    send, receive = trio.open_memory_channel[StreamEvent](10)

    async def idle(inner: trio.MemoryReceiveChannel[StreamEvent]) -> None:
        async for _ in inner:
            pass

    with trio.move_on_after(5):
        async with send:
            await send.send(ASKED)
            await with_approval_prompts(receive, idle, prompts)
    assert chat.messages["1"].startswith("🚫 Cancelled (stopped); the command did not run.")
    assert chat.buttons["1"] == []
    # Shown at once, from the shielded cleanup, at the cancel's time.
    assert chat.calls == [("send", 0.0), ("close", 5.0)]


async def test_buttons_refused_ask_for_a_typed_answer() -> None:
    chat = ButtonChat(can_edit=False, refuse_buttons=True)
    typed: list[str | None] = []
    prompts = ApprovalPrompts(chat, typed=typed.append)
    await consume([ASKED, ApprovalResolved(id=ASKED.id, outcome="expired")], prompts)
    asked, outcome = chat.messages.values()  # no edit: the outcome is new
    assert "Reply *yes* or *no* within 5 min" in asked
    assert outcome.startswith("⌛ Expired: no answer within 5 min")
    assert typed == [ASKED.id, None]


@given(st.booleans())
def test_button_payloads_fit_telegram_and_read_back(approve: bool) -> None:
    approval_id = new_approval_id()
    data = button_data(approval_id, approve)
    assert len(data.encode()) <= 64  # Telegram's callback_data limit
    assert parse_button(data) == (approval_id, approve)


@pytest.mark.parametrize("data", ["", "y", "y:", "x:mcpr_1", "approve"])
def test_other_payloads_are_not_approval_buttons(data: str) -> None:
    assert parse_button(data) is None


@pytest.mark.parametrize(
    ("text", "answer"),
    [("yes", True), (" Yes! ", True), ("OK.", True), ("no", False), ("Deny", False)],
)
def test_typed_answers(text: str, answer: bool) -> None:
    assert parse_typed_answer(text) is answer


@pytest.mark.parametrize("text", ["", "yes please do", "maybe", "/stop"])
def test_anything_else_is_not_an_answer(text: str) -> None:
    assert parse_typed_answer(text) is None


def test_texts() -> None:
    assert "Approve or deny within 5 min." in prompt_text(ASKED, typed=False)
    assert outcome_text(ASKED, "denied", by="Ann").startswith(
        "❌ Denied by Ann; the command did not run."
    )
    fenced = replace(ASKED, command="echo ```")
    assert "````\necho ```\n````" in prompt_text(fenced, typed=False)


def test_approvers_per_platform() -> None:
    approvers = ["42", "telegram:7", "Discord: 9", "slack:"]
    assert approvers_for(approvers, "telegram") == {"42", "7"}
    assert approvers_for(approvers, "discord") == {"42", "9"}
    assert approvers_for(approvers, "slack") == {"42"}


def test_refusal_notices() -> None:
    assert refusal_notice(Refused("not_allowed", "x")).startswith("Only the person who asked")
    assert refusal_notice(Refused("ended", "x")) == "This request is no longer pending."
    assert refusal_notice(Refused("unknown", "x")) == "This request is no longer pending."
