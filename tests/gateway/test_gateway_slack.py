"""``hermes-trio gateway`` as a real process against the fake Slack and the
scripted model server."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from itertools import pairwise
from pathlib import Path

import pytest
import trio
from support import ProcessOutput, clean_env, gateway_process

from hermes_trio.platforms.slack.format import to_mrkdwn
from hermes_trio.testing import ScriptedModelServer, TextReply, open_scripted_server
from hermes_trio.testing.fake_slack import FakeSlack, SlackMessage, open_fake_slack

ALLOWED = "U0ALLOWED"
ANSWER = "**Sure.** " + " ".join(f"word{i}" for i in range(40)) + " — see [docs](https://x.io)."
# Short, so that the answers (about two seconds of tokens at the default
# interval) are edited several times in a fraction of that.
INTERVAL = 0.25


@asynccontextmanager
async def gateway(
    tmp_path: Path,
    slack: FakeSlack,
    model: ScriptedModelServer,
    *,
    transport: str = "edit",
    bot_token: str | None = None,
    app_token: str | None = None,
) -> AsyncIterator[tuple[trio.Process, ProcessOutput, ProcessOutput]]:
    config = tmp_path / "config.yaml"
    config.write_text(
        "streaming:\n  enabled: true\n  min_tokens: 3\n"
        f"platforms:\n  slack:\n    edit_interval: {INTERVAL}\n    transport: {transport}\n"
    )
    env = clean_env(
        SLACK_BOT_TOKEN=bot_token or slack.bot_token,
        SLACK_APP_TOKEN=app_token or slack.app_token,
        SLACK_API_BASE_URL=slack.base_url,
        SLACK_ALLOWED_USERS=ALLOWED,
        HERMES_MODEL_BASE_URL=model.base_url,
        HERMES_DATA_DIR=str(tmp_path / "data"),
        HERMES_CONFIG=str(config),
    )
    async with gateway_process(env, tmp_path) as (process, out, err):
        yield process, out, err


async def until(slack: FakeSlack, predicate: Callable[[], bool], within: float = 10) -> None:
    with trio.fail_after(within):
        await slack.wait_until(predicate)


def final_texts(slack: FakeSlack, channel: str) -> list[str]:
    return slack.texts(channel)


def progressive(message: SlackMessage) -> None:
    """Shown growing with the cursor, edits at least the interval apart, final once."""
    interim = message.history[:-1]
    assert interim and all(text.endswith("▌") for text in interim)
    assert message.history[-1] == to_mrkdwn(ANSWER)
    assert message.history.count(to_mrkdwn(ANSWER)) == 1
    gaps = [b - a for a, b in pairwise([message.sent_at, *message.edited_at])]
    assert all(gap >= INTERVAL - 0.05 for gap in gaps), gaps


async def test_questions_are_answered_once_through_refusals_429s_redelivery_and_reconnects(
    tmp_path: Path,
) -> None:
    script = [TextReply(ANSWER, delay=0.015) for _ in range(6)]
    async with (
        open_scripted_server(script) as model,
        open_fake_slack() as slack,
        gateway(tmp_path, slack, model) as (process, out, err),
    ):
        with trio.fail_after(15):
            await out.wait_for(b"running slack")
        # 1. An allowed user's direct message: one message, edited as it grows.
        slack.push_message("D1", ALLOWED, "hello")
        await until(slack, lambda: final_texts(slack, "D1") == [to_mrkdwn(ANSWER)])
        (message,) = slack.visible("D1")
        progressive(message)
        assert message.thread_ts is None  # top level of a DM
        # 2. Someone else: refused, never reaches the model.
        slack.push_message("D2", "U0STRANGER", "let me in")
        await until(slack, lambda: bool(final_texts(slack, "D2")))
        (refusal,) = final_texts(slack, "D2")
        assert "U0STRANGER" in refusal
        assert len(model.model_requests) == 1
        # 3. A channel mention (message + app_mention), in its thread, once;
        #    then the same envelope again, as Slack does after a slow ack.
        mention = slack.push_mention("C1", ALLOWED, "and in a channel?")
        slack.redeliver(mention)
        thread = mention["payload"]["event"]["ts"]
        await until(slack, lambda: final_texts(slack, "C1") == [to_mrkdwn(ANSWER)])
        assert slack.visible("C1")[0].thread_ts == thread
        #    A reply in that thread needs no mention: the same conversation goes on.
        slack.push_message("C1", ALLOWED, "and a follow-up", thread_ts=thread)
        await until(slack, lambda: final_texts(slack, "C1") == [to_mrkdwn(ANSWER)] * 2)
        assert {m.thread_ts for m in slack.visible("C1")} == {thread}
        assert "and in a channel?" in str(model.model_requests[-1])
        # 4. 429s on the first post and on edits: nothing twice, the final text lands.
        slack.fail_next("chat.postMessage", retry_after=0.3)
        slack.fail_next("chat.update", retry_after=0.4, times=2)
        slack.push_message("D3", ALLOWED, "rate limited?")
        await until(slack, lambda: final_texts(slack, "D3") == [to_mrkdwn(ANSWER)], within=20)
        assert len(slack.visible("D3")) == 1 and len(slack.calls_to("chat.postMessage")) == 6
        assert [c.ok for c in slack.calls_to("chat.postMessage")][-2:] == [False, True]
        # 5. Slack refreshes the connection, then the socket drops.
        slack.disconnect()
        await until(slack, lambda: slack.connections >= 2 and bool(slack._sockets))
        slack.drop()
        await until(slack, lambda: slack.connections >= 3 and bool(slack._sockets))
        slack.push_message("D4", ALLOWED, "still there?")
        await until(slack, lambda: final_texts(slack, "D4") == [to_mrkdwn(ANSWER)])
        await trio.sleep(0.5)
        assert len(model.model_requests) == 5
        assert sum(len(slack.visible(c)) for c in ("D1", "C1", "D3", "D4")) == 5
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(10):
            code = await process.wait()
    text = out.text() + err.text()
    assert code == 0, text
    assert slack.bot_token not in text and slack.app_token not in text


async def test_stream_transport_streams_the_answer_in_the_thread(tmp_path: Path) -> None:
    async with (
        open_scripted_server([TextReply(ANSWER, delay=0.02)]) as model,
        open_fake_slack() as slack,
        gateway(tmp_path, slack, model, transport="stream") as (process, out, err),
    ):
        with trio.fail_after(15):
            await out.wait_for(b"running slack")
        slack.push_mention("C1", ALLOWED, "stream please")
        await until(slack, lambda: any(not m.streaming and m.streamed for m in slack.visible("C1")))
        (message,) = slack.visible("C1")
        assert message.text == ANSWER  # Markdown as it is: Slack renders it
        assert not any("▌" in text for text in message.history)
        methods = [c.method for c in slack.calls if "Stream" in c.method]
        assert methods[0] == "chat.startStream" and methods[-1] == "chat.stopStream"
        assert "chat.appendStream" in methods
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(10):
            assert await process.wait() == 0


@pytest.mark.parametrize(
    ("which", "setting"), [("bot", "SLACK_BOT_TOKEN"), ("app", "SLACK_APP_TOKEN")]
)
async def test_a_rejected_token_stops_with_one_line_naming_it(
    tmp_path: Path, which: str, setting: str
) -> None:
    wrong = {"bot": "xoxb-revoked"} if which == "bot" else {"app": "xapp-revoked"}
    async with (
        open_scripted_server([]) as model,
        open_fake_slack() as slack,
        gateway(
            tmp_path,
            slack,
            model,
            bot_token=wrong.get("bot"),
            app_token=wrong.get("app"),
        ) as (process, out, err),
    ):
        with trio.fail_after(15):
            code = await process.wait()
    assert code == 1
    lines = [line for line in (out.text() + err.text()).splitlines() if setting in line]
    assert len(lines) == 1 and "invalid_auth" in lines[0]
    assert "revoked" not in (out.text() + err.text())
