"""``/compact`` and ``/context`` in ``hermes-trio chat``, the real command
in a pseudo-terminal against the scripted model server."""

from __future__ import annotations

from pathlib import Path

from chat_pty import spawn_chat

from hermes_trio.testing import TextReply, open_scripted_server


async def test_context_and_compact_at_the_terminal(tmp_path: Path) -> None:
    script = [TextReply("First."), TextReply("Second."), TextReply("the summary"), TextReply("On.")]
    async with open_scripted_server(script) as server:
        async with spawn_chat(server.base_url, tmp_path) as pty:
            for question, answer in (("one", r"First\."), ("two", r"Second\.")):
                await pty.expect_prompt()
                pty.sendline(question)
                await pty.expect(answer)
            await pty.expect_prompt()
            pty.sendline("/context")
            await pty.expect(r"Context: \S+ of \S+ tokens \(\d+%\), 4 messages")
            await pty.expect_prompt()
            pty.sendline("/compact")
            await pty.expect(r"Summarised the earlier conversation")
            summary_request = server.requests[-1].json
            assert not summary_request.get("stream")
            assert "one" in summary_request["messages"][1]["content"]
            await pty.expect_prompt()
            pty.sendline("/context")
            await pty.expect(r"tokens \(\d+%\), 3 messages")
            await pty.expect_prompt()
            pty.sendline("three")
            await pty.expect(r"On\.")
            sent = [m for m in server.requests[-1].json["messages"] if m["role"] != "system"]
            assert sent[0]["content"].endswith("the summary")
            assert [m["content"] for m in sent[1:]] == ["two", "Second.", "three"]
            await pty.expect_prompt()
            pty.child.sendcontrol("c")
            assert await pty.wait_exit() == 0
