"""A Telegram chat of 300 turns outlives a model whose window is 4,096
tokens: the real ``hermes-trio gateway``, the fake Bot API and the scripted
model server that refuses longer prompts. The chat never shows an error,
the model saw summary requests, the stored history stays under the
window, and a restart in the middle continues from the compacted
conversation."""

from __future__ import annotations

import signal
from pathlib import Path

import trio
from long_chat import WINDOW, answer, check_the_model_saw, question, reply, turns_asked
from support import clean_env, gateway_process

from hermes_trio.config import Config, StoreConfig
from hermes_trio.gateway.history import chat_key
from hermes_trio.store import open_store
from hermes_trio.testing import open_scripted_server, prompt_tokens
from hermes_trio.testing.fake_telegram import open_fake_telegram
from hermes_trio.wire.context import SUMMARY_MARK

TOKEN = "987654:LONG-chat_token_value"
CHAT = 41
TURNS = 300


async def test_a_300_turn_chat_outlives_the_window_and_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with (
        open_scripted_server(default=reply, context_window=WINDOW) as model,
        open_fake_telegram(TOKEN) as telegram,
    ):
        env = clean_env(
            TELEGRAM_BOT_TOKEN=TOKEN,
            TELEGRAM_API_BASE_URL=telegram.base_url,
            TELEGRAM_ALLOWED_USERS="7",
            HERMES_MODEL_BASE_URL=model.base_url,
            HERMES_DATA_DIR=str(data),
        )
        # The window is the model server's word (its card), as for a user.
        del env["HERMES_CONTEXT_WINDOW"]
        restart_at = TURNS // 2
        for first, last in ((0, restart_at), (restart_at, TURNS)):
            async with gateway_process(env, tmp_path) as (process, out, err):
                with trio.fail_after(15):
                    await out.wait_for(b"running telegram")
                for n in range(first, last):
                    telegram.push_message(chat_id=CHAT, user_id=7, text=question(n))
                    with trio.fail_after(20):
                        await telegram.wait_until(
                            lambda n=n: any(
                                t.startswith(f"answer {n} ") for t in telegram.texts(CHAT)
                            )
                        )
                process.send_signal(signal.SIGTERM)
                with trio.fail_after(10):
                    assert await process.wait() == 0, err.text()
            if first == 0:
                asked_before = len(turns_asked(model.model_requests))
        texts = telegram.texts(CHAT)
    # Every answer whole, and nothing else but the compaction lines.
    for n in range(TURNS):
        assert answer(n) in texts
    others = [t for t in texts if not t.startswith("answer ")]
    assert others and all(t.startswith("🗜") for t in others), others[:3]
    summaries = check_the_model_saw(model.model_requests, TURNS)
    assert summaries >= 10
    # After the restart the chat went on from its compacted conversation.
    resumed = turns_asked(model.model_requests)[asked_before]
    sent = resumed.json["messages"]
    assert sent[1]["content"].startswith(SUMMARY_MARK)
    assert sent[-1]["content"] == question(restart_at)
    # The stored history fits the window.
    config = Config(store=StoreConfig(data_dir=str(data)))
    async with open_store(config) as store:
        stored = await store.conversation(chat_key("telegram", str(CHAT), None))
    assert stored is not None and stored[-1]["content"] == answer(TURNS - 1)
    assert prompt_tokens({"messages": stored}) < WINDOW
