"""A Telegram chat continues after ``hermes-trio gateway`` restarts (the real
process, the fake Bot API, the scripted model server)."""

from __future__ import annotations

import signal
from functools import partial
from pathlib import Path

import trio
from support import clean_env, gateway_process

from hermes_trio.testing import TextReply, open_scripted_server
from hermes_trio.testing.fake_telegram import FakeTelegram, open_fake_telegram

TOKEN = "987654:RESTART-secret_token_value"
CHAT = 31


def _shows_any(telegram: FakeTelegram, texts: list[str]) -> bool:
    return any(text in telegram.texts(CHAT) for text in texts)


async def test_a_chat_continues_after_a_restart_and_new_forgets_it(tmp_path: Path) -> None:
    script = [TextReply("first answer"), TextReply("second answer"), TextReply("fresh answer")]
    async with (
        open_scripted_server(script) as model,
        open_fake_telegram(TOKEN) as telegram,
    ):
        env = clean_env(
            TELEGRAM_BOT_TOKEN=TOKEN,
            TELEGRAM_API_BASE_URL=telegram.base_url,
            TELEGRAM_ALLOWED_USERS="7",
            HERMES_MODEL_BASE_URL=model.base_url,
            HERMES_DATA_DIR=str(tmp_path / "data"),
        )
        steps = [
            (["first question"], ["first answer"]),
            (["second question", "/new", "third question"], ["second answer", "fresh answer"]),
        ]
        for questions, answers in steps:
            async with gateway_process(env, tmp_path) as (process, out, err):
                with trio.fail_after(15):
                    await out.wait_for(b"running telegram")
                for question in questions:
                    telegram.push_message(chat_id=CHAT, user_id=7, text=question)
                    expected = ["new conversation"] if question == "/new" else answers
                    with trio.fail_after(10):
                        await telegram.wait_until(partial(_shows_any, telegram, expected))
                with trio.fail_after(10):
                    await telegram.wait_until(partial(_shows_any, telegram, answers[-1:]))
                process.send_signal(signal.SIGTERM)
                with trio.fail_after(10):
                    assert await process.wait() == 0, err.text()
    sent = [
        [m["content"] for m in request.json["messages"] if m["role"] != "system"]
        for request in model.model_requests
    ]
    assert sent == [
        ["first question"],
        # After the restart: the conversation as it was.
        ["first question", "first answer", "second question"],
        # After /new: nothing of it.
        ["third question"],
    ]
