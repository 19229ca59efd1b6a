"""Approval on the platforms that cannot edit: WhatsApp with interactive
reply buttons (the outcome is a message of its own), and a typed "yes" or
"no" where buttons cannot be shown (a prompt too long for WhatsApp's
1024-character body; Home Assistant, which has none). In process, over
loopback, with the real adapters and the fake platforms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from approval_support import flagged, terminal_turn, tool_turn
from gateway_support import homeassistant_platforms, webhook, whatsapp_platforms
from test_gateway_runtime import gateway_stack

from hermes_trio.config import (
    ApprovalsConfig,
    UserId,
)
from hermes_trio.testing import (
    FakeHomeAssistant,
    FakeWhatsApp,
    open_fake_homeassistant,
    open_fake_whatsapp,
)
from hermes_trio.testing.fake_whatsapp import buttons_of

USER, OTHER = "15551234567", "15559990000"


def said(texts: list[str], answer: str) -> bool:
    """``answer`` ended a message (tool progress may come before it)."""
    return any(text.endswith(answer) for text in texts)


async def until(fake: FakeWhatsApp | FakeHomeAssistant, predicate: Any) -> None:
    with trio.fail_after(10):
        await fake.wait_until(predicate)


async def test_whatsapp_reply_buttons(tmp_path: Path) -> None:
    approved, denied = tmp_path / "approved", tmp_path / "denied"
    script = [
        *tool_turn(approved, "It ran."),
        *tool_turn(denied, "Left alone."),
    ]
    async with (
        open_fake_whatsapp() as whatsapp,
        gateway_stack(
            script,
            platforms=whatsapp_platforms(whatsapp, USER, OTHER),
            approvals=ApprovalsConfig(approvers=[UserId(f"whatsapp:{OTHER}")]),
        ) as (gateway, _),
    ):
        url = webhook(gateway, "whatsapp")
        await whatsapp.deliver_text(url, USER, "clean up")
        await until(whatsapp, lambda: any(buttons_of(s) for s in whatsapp.sent))
        prompt = next(s for s in whatsapp.sent if buttons_of(s))
        assert [title for _, title in buttons_of(prompt)] == ["Approve", "Deny"]
        assert "nonexistent-hermes-approval-test" in prompt.text
        pressed = await whatsapp.press_button(url, USER, prompt, "Approve")
        assert pressed.status_code == 200, pressed.text
        await until(whatsapp, lambda: said(whatsapp.texts_to(USER), "It ran."))
        assert approved.exists()
        assert any(t.startswith("✅ Approved by") for t in whatsapp.texts_to(USER))

        # An approver on WhatsApp (``whatsapp:<id>``) may answer too.
        await whatsapp.deliver_text(url, USER, "the other one")
        await until(whatsapp, lambda: len([s for s in whatsapp.sent if buttons_of(s)]) == 2)
        second = [s for s in whatsapp.sent if buttons_of(s)][-1]
        await whatsapp.press_button(url, OTHER, second, "Deny")
        await until(whatsapp, lambda: said(whatsapp.texts_to(USER), "Left alone."))
        assert not denied.exists()
        assert any(t.startswith("❌ Denied by") for t in whatsapp.texts_to(USER))


async def test_a_prompt_too_long_for_buttons_asks_for_a_typed_answer(tmp_path: Path) -> None:
    marker = tmp_path / "typed"
    async with (
        open_fake_whatsapp() as whatsapp,
        gateway_stack(
            terminal_turn(flagged(marker, padding=1100), "It ran."),
            platforms=whatsapp_platforms(whatsapp, USER, OTHER),
        ) as (gateway, _),
    ):
        url = webhook(gateway, "whatsapp")
        await whatsapp.deliver_text(url, USER, "clean up")
        await until(whatsapp, lambda: any("Reply *yes*" in t for t in whatsapp.texts_to(USER)))
        assert not any(buttons_of(s) for s in whatsapp.sent)
        await whatsapp.deliver_text(url, USER, "Yes")
        await until(whatsapp, lambda: said(whatsapp.texts_to(USER), "It ran."))
        assert marker.exists()


async def test_home_assistant_typed_answer(tmp_path: Path) -> None:
    marker = tmp_path / "ha"
    async with open_fake_homeassistant() as ha:
        platforms = homeassistant_platforms(ha, "ana", "bob")
        async with gateway_stack(tool_turn(marker, "Not run, then."), platforms=platforms) as (
            gateway,
            _,
        ):
            url = webhook(gateway, "homeassistant")
            await ha.post_message(url, "clean up", conversation_id="kitchen", user_id="ana")
            await until(ha, lambda: any("Reply *yes*" in r for r in ha.replies("kitchen")))
            # Someone else in the same conversation: told so, and it is
            # not taken as a new message either.
            await ha.post_message(url, "yes", conversation_id="kitchen", user_id="bob")
            await until(
                ha, lambda: any("Only the person who asked" in r for r in ha.replies("kitchen"))
            )
            assert not marker.exists()
            await ha.post_message(url, "no", conversation_id="kitchen", user_id="ana")
            await until(ha, lambda: said(ha.replies("kitchen"), "Not run, then."))
        assert not marker.exists()
        assert any(r.startswith("❌ Denied by") for r in ha.replies("kitchen"))
