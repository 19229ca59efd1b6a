"""An ``X-Session-ID`` conversation of 300 turns outlives a model whose
window is 4,096 tokens: the real ``hermes-trio serve``, the official
``openai`` SDK sending only each new message, and the scripted model server
that refuses longer prompts. Every turn is answered, the model saw summary
requests, and a restart of ``serve`` in the middle continues from the
compacted conversation."""

from __future__ import annotations

from pathlib import Path

import openai
import trio
from long_chat import WINDOW, answer, check_the_model_saw, question, reply, turns_asked
from support import clean_env, start_serve

from hermes_trio.testing import open_scripted_server
from hermes_trio.wire.context import SUMMARY_MARK

TURNS = 300
KEY = "long-chat-client-key"


async def test_a_300_turn_session_outlives_the_window_and_a_restart(tmp_path: Path) -> None:
    restart_at = TURNS // 2
    async with open_scripted_server(default=reply, context_window=WINDOW) as model:
        env = clean_env(
            HERMES_MODEL_BASE_URL=model.base_url,
            HERMES_DATA_DIR=str(tmp_path / "data"),
            API_SERVER_KEY=KEY,
        )
        # The window is the model server's word (its card), as for a user.
        del env["HERMES_CONTEXT_WINDOW"]
        for first, last in ((0, restart_at), (restart_at, TURNS)):
            async with trio.open_nursery() as nursery:
                served = await start_serve(nursery, env, tmp_path)
                client = openai.AsyncOpenAI(
                    base_url=served.base_url,
                    api_key=KEY,
                    default_headers={"X-Session-ID": "long-story"},
                    max_retries=0,
                )
                async with client:
                    for n in range(first, last):
                        with trio.fail_after(20):
                            done = await client.chat.completions.create(
                                model="hermes-agent",
                                messages=[{"role": "user", "content": question(n)}],
                            )
                        assert done.choices[0].message.content == answer(n)
                nursery.cancel_scope.cancel()
            if first == 0:
                asked_before = len(turns_asked(model.model_requests))
    assert check_the_model_saw(model.model_requests, TURNS) >= 10
    resumed = turns_asked(model.model_requests)[asked_before]
    sent = resumed.json["messages"]
    assert sent[1]["content"].startswith(SUMMARY_MARK)
    assert sent[-1]["content"] == question(restart_at)
