"""Approval of a flagged command on Telegram, through the real
``hermes-trio gateway`` process: an inline keyboard under the prompt, the
requester's press decides, anyone else's changes nothing, a press after
the question ended runs nothing, and the prompt shows the outcome."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from approval_support import flagged, tool_turn
from support import clean_env, gateway_process, ready_gateway

from hermes_trio.testing import TextReply, ToolCallReply, open_scripted_server
from hermes_trio.testing.fake_telegram import FakeMessage, FakeTelegram, open_fake_telegram

TOKEN = "555888:approvals-token"
REQUESTER, OTHER = 7, 8


@asynccontextmanager
async def running(
    tmp_path: Path, script: list[Any], **env: str
) -> AsyncIterator[tuple[FakeTelegram, Any]]:
    async with running_process(tmp_path, script, **env) as (telegram, model, _):
        yield telegram, model


@asynccontextmanager
async def running_process(
    tmp_path: Path, script: list[Any], **env: str
) -> AsyncIterator[tuple[FakeTelegram, Any, trio.Process]]:
    async with (
        open_scripted_server(script) as model,
        open_fake_telegram(TOKEN) as telegram,
    ):
        full_env = gateway_env(
            tmp_path,
            telegram,
            model,
            TELEGRAM_ALLOWED_USERS=f"{REQUESTER}, {OTHER}",
            HERMES_STREAMING_ENABLED="1",
            **env,
        )
        async with ready_gateway(full_env, tmp_path, b"running telegram") as process:
            yield telegram, model, process


def gateway_env(tmp_path: Path, telegram: FakeTelegram, model: Any, **env: str) -> dict[str, str]:
    return clean_env(
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_API_BASE_URL=telegram.base_url,
        HERMES_MODEL_BASE_URL=model.base_url,
        HERMES_DATA_DIR=str(tmp_path / "data"),
        **env,
    )


def prompt_in(telegram: FakeTelegram, chat: int) -> FakeMessage | None:
    for message in telegram.visible(chat):
        if message.keyboard:
            return message
    return None


async def shown_prompt(telegram: FakeTelegram, chat: int) -> FakeMessage:
    with trio.fail_after(10):
        await telegram.wait_until(lambda: prompt_in(telegram, chat) is not None)
    prompt = prompt_in(telegram, chat)
    assert prompt is not None
    return prompt


def answered(telegram: FakeTelegram) -> list[dict[str, Any]]:
    return list(telegram.callback_answers.values())


def tool_results(model: Any) -> list[str]:
    """What the model was told each tool call gave."""
    results = []
    for request in model.model_requests:
        results += [m["content"] for m in request.json["messages"] if m.get("role") == "tool"]
    return results


async def test_requester_approves_other_users_press_changes_nothing_then_deny(
    tmp_path: Path,
) -> None:
    approved, denied = tmp_path / "approved", tmp_path / "denied"
    cancelled = tmp_path / "cancelled"
    script = [
        *tool_turn(approved, "It ran."),
        *tool_turn(denied, "Not run, as you wished."),
        ToolCallReply([("terminal", {"command": flagged(cancelled)})]),
        TextReply("A fresh answer."),
    ]
    async with running(tmp_path, script) as (telegram, model):
        # The allow-list must let the callback queries through.
        telegram.push_message(chat_id=REQUESTER, user_id=REQUESTER, text="clean up please")
        prompt = await shown_prompt(telegram, REQUESTER)
        assert prompt.buttons() == ["Approve", "Deny"]
        assert "rm -rf /nonexistent-hermes-approval-test/*" in prompt.text
        assert "recursive delete" in prompt.text
        for row in prompt.keyboard:
            for button in row:
                assert len(button["callback_data"].encode()) <= 64

        # Someone else presses Approve: told so, nothing runs, buttons stay.
        telegram.press_button(REQUESTER, prompt.message_id, OTHER, "Approve", user_name="eve")
        with trio.fail_after(10):
            await telegram.wait_until(lambda: len(telegram.callback_answers) == 1)
        (refusal,) = answered(telegram)
        assert "Only the person who asked" in refusal["text"]
        assert prompt.buttons() == ["Approve", "Deny"]
        assert not approved.exists()

        telegram.press_button(REQUESTER, prompt.message_id, REQUESTER, "Approve", user_name="ann")
        with trio.fail_after(10):
            await telegram.wait_until(lambda: "It ran." in telegram.texts(REQUESTER))
        assert approved.exists()
        assert "text" not in answered(telegram)[1]  # a silent answer: the edit shows it
        assert prompt.keyboard == []
        assert prompt.text.startswith("✅ Approved by ann")
        assert allowed_updates_asked(telegram)

        # A second turn: the requester denies.
        telegram.push_message(chat_id=REQUESTER, user_id=REQUESTER, text="and the other one")
        with trio.fail_after(10):
            await telegram.wait_until(lambda: any(m.keyboard for m in telegram.visible(REQUESTER)))
        second = await shown_prompt(telegram, REQUESTER)
        telegram.press_button(REQUESTER, second.message_id, REQUESTER, "Deny", user_name="ann")
        with trio.fail_after(10):
            await telegram.wait_until(
                lambda: "Not run, as you wished." in telegram.texts(REQUESTER)
            )
        assert not denied.exists()
        assert second.keyboard == []
        assert second.text.startswith("❌ Denied by ann")
        results = tool_results(model)
        assert any("denied" in result for result in results)

        # A third: a new message interrupts the turn while it waits; the
        # prompt says so and the command never runs.
        telegram.push_message(chat_id=REQUESTER, user_id=REQUESTER, text="one more")
        with trio.fail_after(10):
            await telegram.wait_until(lambda: any(m.keyboard for m in telegram.visible(REQUESTER)))
        third = await shown_prompt(telegram, REQUESTER)
        telegram.push_message(chat_id=REQUESTER, user_id=REQUESTER, text="never mind")
        with trio.fail_after(10):
            await telegram.wait_until(lambda: "A fresh answer." in telegram.texts(REQUESTER))
        assert third.keyboard == []
        assert third.text.startswith("🚫 Cancelled (interrupted by a new message)")
        assert not cancelled.exists()


def allowed_updates_asked(telegram: FakeTelegram) -> bool:
    return "callback_query" in (telegram.allowed_updates or [])


async def test_a_press_after_the_timeout_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "late"
    async with running(
        tmp_path, tool_turn(marker, "Nobody answered."), HERMES_APPROVAL_TIMEOUT="1"
    ) as (telegram, _):
        telegram.push_message(chat_id=REQUESTER, user_id=REQUESTER, text="clean up")
        prompt = await shown_prompt(telegram, REQUESTER)
        keyboard = [list(row) for row in prompt.keyboard]
        with trio.fail_after(10):
            await telegram.wait_until(lambda: "Nobody answered." in telegram.texts(REQUESTER))
        assert prompt.keyboard == []
        assert prompt.text.startswith("⌛ Expired")
        # The keyboard is gone from the chat, but an old client may still
        # show it: the press is answered and runs nothing.
        prompt.keyboard = keyboard
        telegram.press_button(REQUESTER, prompt.message_id, REQUESTER, "Approve")
        with trio.fail_after(10):
            await telegram.wait_until(lambda: len(telegram.callback_answers) == 1)
        (late,) = answered(telegram)
        assert late["text"] == "This request is no longer pending."
        assert not marker.exists()


async def test_stop_and_shutdown_cancel_the_question(tmp_path: Path) -> None:
    stopped, shut = tmp_path / "stopped", tmp_path / "shut"
    script = [
        ToolCallReply([("terminal", {"command": flagged(stopped)})]),
        ToolCallReply([("terminal", {"command": flagged(shut)})]),
    ]
    async with running_process(tmp_path, script) as (telegram, _, process):
        telegram.push_message(chat_id=REQUESTER, user_id=REQUESTER, text="clean up")
        first = await shown_prompt(telegram, REQUESTER)
        telegram.push_message(chat_id=REQUESTER, user_id=REQUESTER, text="/stop")
        with trio.fail_after(10):
            await telegram.wait_until(lambda: not first.keyboard)
        assert first.text.startswith("🚫 Cancelled (stopped)")

        telegram.push_message(chat_id=REQUESTER, user_id=REQUESTER, text="again")
        second = await shown_prompt(telegram, REQUESTER)
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(10):
            assert await process.wait() == 0
        assert second.keyboard == []
        assert second.text.startswith("🚫 Cancelled (the gateway is stopping)")
    assert not stopped.exists() and not shut.exists()


async def test_a_press_after_the_gateway_restarted_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "restarted"
    script = [ToolCallReply([("terminal", {"command": flagged(marker)})])]
    async with (
        open_scripted_server(script) as model,
        open_fake_telegram(TOKEN) as telegram,
    ):
        env = gateway_env(tmp_path, telegram, model, TELEGRAM_ALLOWED_USERS=str(REQUESTER))
        async with gateway_process(env, tmp_path) as (process, out, err):
            with trio.fail_after(15):
                await out.wait_for(b"running telegram")
            telegram.push_message(chat_id=REQUESTER, user_id=REQUESTER, text="clean up")
            prompt = await shown_prompt(telegram, REQUESTER)
            # Killed outright: nothing closes the prompt, its buttons stay.
            process.kill()
            with trio.fail_after(10):
                await process.wait()
        assert prompt.buttons() == ["Approve", "Deny"]
        async with gateway_process(env, tmp_path) as (process, out, err):
            with trio.fail_after(15):
                await out.wait_for(b"running telegram")
            telegram.press_button(REQUESTER, prompt.message_id, REQUESTER, "Approve")
            with trio.fail_after(10):
                await telegram.wait_until(lambda: len(telegram.callback_answers) == 1)
            (late,) = answered(telegram)
            assert late["text"] == "This request is no longer pending."
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(10):
                assert await process.wait() == 0, err.text()
    assert not marker.exists()
    assert len(model.model_requests) == 1
