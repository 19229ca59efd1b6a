"""Approval of a flagged command on Discord, through the real
``hermes-trio gateway`` process: button components under the prompt, each
press acknowledged within the interaction window (type 6 when taken, an
ephemeral reply when not), and the prompt edited to show the outcome."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import trio
from approval_support import tool_turn
from support import clean_env, ready_gateway

from hermes_trio.testing import open_scripted_server
from hermes_trio.testing.fake_discord import DiscordMessage, FakeDiscord, open_fake_discord

TOKEN = "MTk4NjIy.approvals-discord.secret_token_value"
CHANNEL, GUILD = "50", "70"
REQUESTER, OTHER = "7", "8"


@asynccontextmanager
async def running(tmp_path: Path, script: list[Any], **env: str) -> AsyncIterator[FakeDiscord]:
    async with open_scripted_server(script) as model, open_fake_discord(TOKEN) as discord:
        full_env = clean_env(
            DISCORD_BOT_TOKEN=TOKEN,
            DISCORD_API_BASE_URL=discord.base_url,
            DISCORD_ALLOWED_USERS=f"{REQUESTER},{OTHER}",
            HERMES_MODEL_BASE_URL=model.base_url,
            HERMES_STREAMING_ENABLED="1",
            HERMES_DATA_DIR=str(tmp_path / "data"),
            **env,
        )
        ready = partial(discord.wait_until, lambda: discord.ready)
        async with ready_gateway(full_env, tmp_path, b"running discord", ready):
            yield discord


def prompts(discord: FakeDiscord) -> list[DiscordMessage]:
    return [m for m in discord.visible(CHANNEL) if "Approval needed" in m.history[0]]


async def new_prompt(discord: FakeDiscord, count: int) -> DiscordMessage:
    with trio.fail_after(10):
        await discord.wait_until(lambda: len(prompts(discord)) == count)
    return prompts(discord)[-1]


async def acknowledged(discord: FakeDiscord, interaction_id: str) -> dict[str, Any]:
    with trio.fail_after(10):
        await discord.wait_until(lambda: discord.interactions[interaction_id].response is not None)
    response = discord.interactions[interaction_id].response
    assert response is not None
    return response


async def test_buttons_decide_for_the_requester_only(tmp_path: Path) -> None:
    approved, denied = tmp_path / "approved", tmp_path / "denied"
    script = [*tool_turn(approved, "It ran."), *tool_turn(denied, "Left alone.")]
    async with running(tmp_path, script) as discord:
        discord.push_message(CHANNEL, REQUESTER, "clean up", guild_id=GUILD, mention=True)
        prompt = await new_prompt(discord, 1)
        assert prompt.buttons() == ["Approve", "Deny"]
        (row,) = prompt.components
        assert [b["style"] for b in row["components"]] == [3, 4]
        assert "rm -rf /nonexistent-hermes-approval-test/*" in prompt.content

        other = discord.press_button(CHANNEL, prompt.id, OTHER, "Approve", guild_id=GUILD)
        response = await acknowledged(discord, other.id)
        assert response["type"] == 4
        assert response["data"]["flags"] == 64  # only the presser sees it
        assert "Only the person who asked" in response["data"]["content"]
        assert prompt.buttons() == ["Approve", "Deny"]
        assert not approved.exists()

        mine = discord.press_button(
            CHANNEL, prompt.id, REQUESTER, "Approve", guild_id=GUILD, user_name="ann"
        )
        assert (await acknowledged(discord, mine.id)) == {"type": 6}
        with trio.fail_after(10):
            await discord.wait_until(lambda: "It ran." in discord.texts(CHANNEL))
        assert approved.exists()
        assert prompt.components == []
        assert prompt.content.startswith("✅ Approved by Ann")

        discord.push_message(CHANNEL, REQUESTER, "the other one", guild_id=GUILD, mention=True)
        second = await new_prompt(discord, 2)
        press = discord.press_button(CHANNEL, second.id, REQUESTER, "Deny", guild_id=GUILD)
        assert (await acknowledged(discord, press.id)) == {"type": 6}
        with trio.fail_after(10):
            await discord.wait_until(lambda: "Left alone." in discord.texts(CHANNEL))
        assert not denied.exists()
        assert second.components == []
        assert second.content.startswith("❌ Denied by Tester")


async def test_a_press_after_the_timeout_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "late"
    async with running(
        tmp_path, tool_turn(marker, "Nobody answered."), HERMES_APPROVAL_TIMEOUT="1"
    ) as discord:
        discord.push_message(CHANNEL, REQUESTER, "clean up")  # a DM this time
        prompt = await new_prompt(discord, 1)
        components = [dict(row) for row in prompt.components]
        with trio.fail_after(10):
            await discord.wait_until(lambda: "Nobody answered." in discord.texts(CHANNEL))
        assert prompt.components == []
        assert prompt.content.startswith("⌛ Expired")
        prompt.components = components  # a client that still shows them
        late = discord.press_button(CHANNEL, prompt.id, REQUESTER, "Approve")
        response = await acknowledged(discord, late.id)
        assert response["type"] == 4
        assert response["data"]["content"] == "This request is no longer pending."
        assert response["data"]["flags"] == 64
        assert not marker.exists()
