"""A terminal chat of 300 turns outlives a model whose window is 4,096
tokens: the real ``hermes-trio chat`` in a pseudo-terminal and the
scripted model server that refuses longer prompts. Every turn is answered
with no error, and the model saw summary requests. (The terminal keeps its
conversation in memory: there is nothing to restart from.)"""

from __future__ import annotations

from pathlib import Path

from chat_pty import spawn_chat
from long_chat import WINDOW, check_the_model_saw, question, reply

from hermes_trio.testing import open_scripted_server

TURNS = 300


async def test_a_300_turn_terminal_chat_outlives_the_window(tmp_path: Path) -> None:
    async with open_scripted_server(default=reply, context_window=WINDOW) as model:
        window = {"HERMES_CONTEXT_WINDOW": str(WINDOW)}
        async with spawn_chat(model.base_url, tmp_path, env=window) as pty:
            for n in range(TURNS):
                await pty.expect_prompt()
                pty.sendline(question(n))
                await pty.expect(rf"answer {n} word0")
            await pty.expect_prompt()
            assert "error" not in pty.seen().lower()
            pty.child.sendcontrol("c")
            assert await pty.wait_exit() == 0
    assert check_the_model_saw(model.model_requests, TURNS) >= 10
