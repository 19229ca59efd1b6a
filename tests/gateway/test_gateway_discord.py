"""``hermes-trio gateway`` as a real subprocess against the fake Discord and
the scripted model server: progressive edits, the allow-list, 429s,
RECONNECT, a dropped socket (with a replay), a bad token, SIGTERM.

One process runs the scenarios one after another, so the file stays fast."""

from __future__ import annotations

import itertools
import signal
import sys
from pathlib import Path
from typing import Any

import trio
from support import clean_env, gateway_process

from hermes_trio.testing import (
    FakeDiscord,
    RecordedRequest,
    ScriptedModelServer,
    Step,
    TextReply,
    open_fake_discord,
    open_scripted_server,
)

TOKEN = "MTk4NjIy.gateway-discord.secret_token_value"
USER = "7"
STRANGER = "666"
CURSOR = " ▌"
LONG = " ".join(f"word{i}" for i in range(45))


def answer(request: RecordedRequest) -> Step:
    question = request.json["messages"][-1]["content"]
    if question == "a long question":
        return TextReply(LONG, delay=0.08)
    return TextReply(f"Answer to: {question}, " + "with a few more words " * 6, delay=0.01)


def expected(question: str) -> str:
    return f"Answer to: {question}, " + ("with a few more words " * 6).rstrip()


def gateway_env(tmp_path: Path, discord: FakeDiscord, model: ScriptedModelServer) -> dict[str, str]:
    return clean_env(
        DISCORD_BOT_TOKEN=TOKEN,
        DISCORD_API_BASE_URL=discord.base_url,
        DISCORD_ALLOWED_USERS=USER,
        HERMES_MODEL_BASE_URL=model.base_url,
        HERMES_STREAMING_ENABLED="1",
        HERMES_DATA_DIR=str(tmp_path / "data"),
    )


async def ask(discord: FakeDiscord, channel: str, question: str, final: str) -> None:
    discord.push_message(channel, USER, question)
    with trio.fail_after(10):
        await discord.wait_until(lambda: final in discord.texts(channel))


def model_questions(model: ScriptedModelServer) -> list[Any]:
    return [r.json["messages"][-1]["content"] for r in model.model_requests]


async def scenarios(discord: FakeDiscord, model: ScriptedModelServer) -> None:
    # An allowed user's question: one message, edited as the answer grows.
    await ask(discord, "300", "a long question", LONG)
    (message,) = discord.visible("300")
    assert message.history[-1] == LONG and message.history.count(LONG) == 1
    interim = message.history[:-1]
    assert len(interim) >= 2 and all(text.endswith(CURSOR) for text in interim)
    times = [message.sent_at, *message.edited_at][: len(interim)]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert all(gap >= 1.19 for gap in gaps), gaps
    calls = discord.calls_to("POST", r"/channels/300/messages")
    assert calls[0].json["allowed_mentions"] == {"parse": []}

    # A stranger is refused and never reaches the model.
    asked = len(model.model_requests)
    discord.push_message("301", STRANGER, "let me in")
    with trio.fail_after(10):
        await discord.wait_until(lambda: len(discord.texts("301")) == 1)
    assert STRANGER in discord.texts("301")[0]
    assert len(model.model_requests) == asked

    # 429s on sending and editing: nothing twice, the answer still lands.
    discord.rate_limit_next("POST", r"/channels/302/messages", retry_after=0.3)
    discord.rate_limit_next("PATCH", r"/channels/302/messages/\d+", retry_after=0.3, times=2)
    await ask(discord, "302", "under rate limits", expected("under rate limits"))
    assert len(discord.visible("302")) == 1 and len(discord.messages["302"]) == 1
    assert any(c.status == 429 for c in discord.calls_to("POST", r"/channels/302/messages"))

    # Discord asks for a reconnect: the session resumes, nothing is lost.
    discord.reconnect()
    await ask(discord, "303", "after a reconnect", expected("after a reconnect"))

    # The socket drops; a question comes while nobody is connected, and the
    # RESUME replays every event of the session (all answered already but it).
    discord.online = False
    discord.drop_connection()
    discord.push_message("304", USER, "while disconnected")
    await trio.sleep(0.3)
    discord.replay_from = 0
    discord.online = True
    with trio.fail_after(10):
        await discord.wait_until(lambda: expected("while disconnected") in discord.texts("304"))
    await trio.sleep(0.5)  # room for a duplicate to show up, if there were one
    assert discord.connections[-1].resumed and discord.connections[-1].path == "/resume"
    for channel in ("300", "302", "303", "304"):
        assert len(discord.messages[channel]) == 1, channel
    assert sorted(model_questions(model)) == sorted(
        ["a long question", "under rate limits", "after a reconnect", "while disconnected"]
    )


async def test_gateway_process_against_fake_discord(tmp_path: Path) -> None:
    async with (
        open_scripted_server(default=answer) as model,
        open_fake_discord(TOKEN) as discord,
    ):
        async with gateway_process(gateway_env(tmp_path, discord, model), tmp_path) as (
            process,
            out,
            err,
        ):
            with trio.move_on_after(15) as waiting:
                await out.wait_for(b"running discord")
                await discord.wait_until(lambda: discord.ready)
            assert not waiting.cancelled_caught, f"not ready; stderr: {err.text()}"
            await scenarios(discord, model)
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(10):
                code = await process.wait()
    assert code == 0, err.text()
    output = out.text() + err.text()
    assert "@hermes_test_bot" in output
    assert "SIGTERM received" in output
    assert TOKEN not in output
    # The outage was logged once, its end once.
    assert output.count("reconnecting") == 1, output
    assert output.count("reconnected after") == 1, output


async def test_a_bad_token_exits_non_zero_with_one_line(tmp_path: Path) -> None:
    async with (
        open_scripted_server(default=answer) as model,
        open_fake_discord("some-other-token-entirely") as discord,
    ):
        done = await trio.run_process(
            [sys.executable, "-m", "hermes_trio.cli", "gateway"],
            env=gateway_env(tmp_path, discord, model),
            cwd=tmp_path,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    err = done.stderr.decode()
    assert done.returncode != 0
    naming = [line for line in err.splitlines() if "DISCORD_BOT_TOKEN" in line]
    assert len(naming) == 1, err
    assert TOKEN not in err + done.stdout.decode()
    assert model.model_requests == []
