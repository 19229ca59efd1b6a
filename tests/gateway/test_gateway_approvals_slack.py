"""Approval of a flagged command on Slack, through the real ``hermes-trio
gateway`` process: Block Kit buttons under the prompt, ``block_actions``
over Socket Mode acknowledged at once, a refusal told to the presser alone
(``chat.postEphemeral``), and the prompt updated with ``chat.update``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from approval_support import tool_turn
from support import clean_env, ready_gateway

from hermes_trio.testing import open_scripted_server
from hermes_trio.testing.fake_slack import FakeSlack, SlackMessage, open_fake_slack

CHANNEL = "D1"
REQUESTER, OTHER = "U0ANN", "U0EVE"


@asynccontextmanager
async def running(tmp_path: Path, script: list[Any], **env: str) -> AsyncIterator[FakeSlack]:
    async with open_scripted_server(script) as model, open_fake_slack() as slack:
        full_env = clean_env(
            SLACK_BOT_TOKEN=slack.bot_token,
            SLACK_APP_TOKEN=slack.app_token,
            SLACK_API_BASE_URL=slack.base_url,
            SLACK_ALLOWED_USERS=f"{REQUESTER},{OTHER}",
            HERMES_MODEL_BASE_URL=model.base_url,
            HERMES_STREAMING_ENABLED="1",
            HERMES_DATA_DIR=str(tmp_path / "data"),
            **env,
        )
        async with ready_gateway(full_env, tmp_path, b"running slack"):
            yield slack


def prompts(slack: FakeSlack) -> list[SlackMessage]:
    return [m for m in slack.visible(CHANNEL) if "Approval needed" in m.history[0]]


async def new_prompt(slack: FakeSlack, count: int) -> SlackMessage:
    with trio.fail_after(10):
        await slack.wait_until(lambda: len(prompts(slack)) == count)
    return prompts(slack)[-1]


async def until(slack: FakeSlack, predicate: Any) -> None:
    with trio.fail_after(10):
        await slack.wait_until(predicate)


def acked(slack: FakeSlack, envelope: dict[str, Any]) -> bool:
    return envelope["envelope_id"] in dict(slack.acks)


async def test_buttons_decide_for_the_requester_only(tmp_path: Path) -> None:
    approved, denied = tmp_path / "approved", tmp_path / "denied"
    script = [*tool_turn(approved, "It ran."), *tool_turn(denied, "Left alone.")]
    async with running(tmp_path, script) as slack:
        slack.push_message(CHANNEL, REQUESTER, "clean up")
        prompt = await new_prompt(slack, 1)
        assert prompt.buttons() == ["Approve", "Deny"]
        actions = next(b for b in prompt.blocks if b["type"] == "actions")
        assert [e["style"] for e in actions["elements"]] == ["primary", "danger"]
        assert "nonexistent-hermes-approval-test" in prompt.text

        other = slack.press_button(CHANNEL, prompt.ts, OTHER, "Approve", user_name="eve")
        # The notice and the envelope's ack go out in either order.
        await until(slack, lambda: len(slack.ephemeral) == 1 and acked(slack, other))
        assert acked(slack, other)
        ((channel, user, text),) = slack.ephemeral
        assert (channel, user) == (CHANNEL, OTHER)
        assert "Only the person who asked" in text
        assert prompt.buttons() == ["Approve", "Deny"]
        assert not approved.exists()

        mine = slack.press_button(CHANNEL, prompt.ts, REQUESTER, "Approve", user_name="ann")
        await until(slack, lambda: any("It ran." in t for t in slack.texts(CHANNEL)))
        assert acked(slack, mine)
        assert approved.exists()
        assert prompt.blocks == []
        assert prompt.text.startswith("✅ Approved by ann")
        assert len(slack.ephemeral) == 1  # nothing said to the one who decided

        slack.push_message(CHANNEL, REQUESTER, "the other one")
        second = await new_prompt(slack, 2)
        slack.press_button(CHANNEL, second.ts, REQUESTER, "Deny", user_name="ann")
        await until(slack, lambda: any("Left alone." in t for t in slack.texts(CHANNEL)))
        assert not denied.exists()
        assert second.blocks == []
        assert second.text.startswith("❌ Denied by ann")


async def test_a_press_after_the_timeout_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "late"
    async with running(
        tmp_path, tool_turn(marker, "Nobody answered."), HERMES_APPROVAL_TIMEOUT="1"
    ) as slack:
        slack.push_message(CHANNEL, REQUESTER, "clean up")
        prompt = await new_prompt(slack, 1)
        blocks = [dict(block) for block in prompt.blocks]
        await until(slack, lambda: any("Nobody answered." in t for t in slack.texts(CHANNEL)))
        assert prompt.blocks == []
        assert prompt.text.startswith("⌛ Expired")
        prompt.blocks = blocks  # a client that still shows them
        slack.press_button(CHANNEL, prompt.ts, REQUESTER, "Approve")
        await until(slack, lambda: len(slack.ephemeral) == 1)
        assert slack.ephemeral[0][2] == "This request is no longer pending."
        assert not marker.exists()
