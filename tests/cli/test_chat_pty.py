"""``hermes-trio chat`` in a pseudo-terminal against the scripted model server.

Each test starts the real command (``python -m hermes_trio.cli chat``) in a
pty, types into it like a person would and reads the screen output.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import trio
from chat_pty import ANSI, chat_argv, chat_env, spawn_chat

from hermes_trio.testing import Stall, TextReply, ToolCallReply, open_scripted_server

# Harmless, but it matches the "recursive delete" danger pattern: `echo`
# succeeds, so the `rm` after `||` never runs.
DANGEROUS = "echo approved-ran || rm -rf /"


def tool_results(request_json: Any) -> list[str]:
    return [m["content"] for m in request_json["messages"] if m["role"] == "tool"]


async def test_streamed_text_appears_before_the_turn_ends(tmp_path: Path) -> None:
    tokens = ["Early", " words", " arrive first, and the rest later."]
    async with open_scripted_server([TextReply(tokens=tokens, delay=0.3)]) as server:
        async with spawn_chat(server.base_url, tmp_path) as pty:
            await pty.expect_prompt()
            pty.sendline("hello")
            await pty.expect("Early words")
            # The model is still sending: the turn has not ended.
            assert not server.connections[-1].closed
            assert "later." not in pty.seen()
            await pty.expect(r"later\.")
            await pty.expect_prompt()
            pty.sendline("/exit")
            assert await pty.wait_exit() == 0


async def test_ctrl_c_mid_stream_interrupts_and_returns_to_the_prompt(tmp_path: Path) -> None:
    script = [Stall(text="A partial answer that", seconds=30), TextReply("Back again.")]
    async with open_scripted_server(script) as server:
        async with spawn_chat(server.base_url, tmp_path) as pty:
            await pty.expect_prompt()
            pty.sendline("tell me a long story")
            await pty.expect("partial answer that")
            pty.interrupt()
            await pty.expect("⏹ interrupted")
            with trio.fail_after(5):
                record = await server.wait_connection_closed()
            assert record.closed_by == "client"
            await pty.expect_prompt()
            # The conversation goes on, and the model sees what was cut off.
            pty.sendline("continue")
            await pty.expect(r"Back again\.")
            history = server.requests[-1].json["messages"]
            assert any(
                m["role"] == "assistant" and "partial answer that" in m["content"] for m in history
            )
            await pty.expect_prompt()
            pty.child.sendcontrol("d")
            assert await pty.wait_exit() == 0


async def test_approval_answered_once_runs_the_command(tmp_path: Path) -> None:
    script = [ToolCallReply(calls=[("terminal", {"command": DANGEROUS})]), TextReply("All done.")]
    async with open_scripted_server(script) as server:
        async with spawn_chat(server.base_url, tmp_path) as pty:
            await pty.expect_prompt()
            pty.sendline("clean up")
            await pty.expect(r"Allow\?")
            pty.sendline("o")
            await pty.expect("allowed once")
            await pty.expect(r"All done\.")
            await pty.expect_prompt()
            assert "approved-ran" in tool_results(server.requests[-1].json)[0]


async def test_approval_denied_does_not_run_the_command(tmp_path: Path) -> None:
    script = [ToolCallReply(calls=[("terminal", {"command": DANGEROUS})]), TextReply("Fine.")]
    async with open_scripted_server(script) as server:
        async with spawn_chat(server.base_url, tmp_path) as pty:
            await pty.expect_prompt()
            pty.sendline("clean up")
            await pty.expect(r"Allow\?")
            pty.sendline("d")
            await pty.expect("denied")
            await pty.expect(r"Fine\.")
            result = tool_results(server.requests[-1].json)[0]
            assert "approved-ran" not in result and "denied" in result


async def test_approval_times_out_as_a_denial(tmp_path: Path) -> None:
    script = [ToolCallReply(calls=[("terminal", {"command": DANGEROUS})]), TextReply("Fine.")]
    env = {"HERMES_APPROVAL_TIMEOUT": "1"}
    async with open_scripted_server(script) as server:
        async with spawn_chat(server.base_url, tmp_path, env=env) as pty:
            await pty.expect_prompt()
            pty.sendline("clean up")
            await pty.expect(r"Allow\?")
            await pty.expect("no answer in 1s: denied")
            await pty.expect(r"Fine\.")
            assert "approved-ran" not in tool_results(server.requests[-1].json)[0]


async def test_ctrl_c_at_the_question_cancels_it_and_the_prompt_comes_back(
    tmp_path: Path,
) -> None:
    script = [
        ToolCallReply(calls=[("terminal", {"command": DANGEROUS})]),
        TextReply("Back again."),
    ]
    async with open_scripted_server(script) as server:
        async with spawn_chat(server.base_url, tmp_path) as pty:
            await pty.expect_prompt()
            pty.sendline("clean up")
            await pty.expect(r"Allow\?")
            pty.interrupt()
            await pty.expect("approval cancelled: the turn was interrupted")
            await pty.expect("⏹ interrupted")
            await pty.expect_prompt()
            pty.sendline("go on")
            await pty.expect(r"Back again\.")
            # The call was never run, and the model is told it was cut off.
            (result,) = tool_results(server.requests[-1].json)
            assert result == "interrupted by the user before this tool finished"


async def test_yolo_skips_approval_and_slash_commands_work(tmp_path: Path) -> None:
    script = [
        ToolCallReply(calls=[("terminal", {"command": DANGEROUS})]),
        TextReply("Ran it."),
        TextReply("From the other model."),
        TextReply("Fresh start."),
    ]
    async with open_scripted_server(script) as server:
        async with spawn_chat(server.base_url, tmp_path, "--yolo") as pty:
            await pty.expect_prompt()
            pty.sendline("clean up")
            await pty.expect(r"Ran it\.")
            assert "Allow?" not in pty.seen()
            assert "approved-ran" in tool_results(server.requests[-1].json)[0]

            await pty.expect_prompt()
            pty.sendline("/help")
            await pty.expect("/yolo")
            await pty.expect_prompt()
            pty.sendline("/model other-model")
            await pty.expect("other-model")
            await pty.expect_prompt()
            pty.sendline("hi")
            await pty.expect(r"From the other model\.")
            assert server.requests[-1].json["model"] == "other-model"

            await pty.expect_prompt()
            pty.sendline("/new")
            await pty.expect("fresh conversation")
            await pty.expect_prompt()
            pty.sendline("start over")
            await pty.expect(r"Fresh start\.")
            users = [m for m in server.requests[-1].json["messages"] if m["role"] != "system"]
            assert users == [{"role": "user", "content": "start over"}]

            await pty.expect_prompt()
            pty.sendline("/yolo")
            await pty.expect("yolo off")
            await pty.expect_prompt()
            pty.child.sendcontrol("c")  # at an empty prompt: leave
            assert await pty.wait_exit() == 0


async def test_no_stream_shows_the_whole_answer(tmp_path: Path) -> None:
    async with open_scripted_server([TextReply("One **whole** answer.")]) as server:
        async with spawn_chat(server.base_url, tmp_path, "--no-stream") as pty:
            await pty.expect_prompt()
            pty.sendline("hi")
            await pty.expect(r"answer\.")
            assert server.requests[-1].json.get("stream") is not True
            await pty.expect_prompt()


async def run_cli(base_url: str | None, home: Path, *args: str) -> trio.CompletedProcess[bytes]:
    with trio.fail_after(15):
        return await trio.run_process(
            [sys.executable, *chat_argv(*args)],
            env=chat_env(base_url, home),
            cwd=str(home),
            stdin=b"",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


async def test_query_piped_output_is_plain_text(tmp_path: Path) -> None:
    answer = "# Title\n\nSome **bold** text.\n\n```python\nprint('hi')\n```"
    script = [
        ToolCallReply(calls=[("terminal", {"command": "echo hi"})], text="Checking."),
        TextReply(answer),
    ]
    async with open_scripted_server(script) as server:
        done = await run_cli(server.base_url, tmp_path, "-q", "question")
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    assert "\x1b" not in out and "\x1b" not in done.stderr.decode()
    assert out == f"Checking.\n{answer}\n"
    assert "terminal: echo hi" in done.stderr.decode()


async def test_query_error_exits_1_and_no_server_exits_2(tmp_path: Path) -> None:
    async with open_scripted_server([Stall(seconds=0)]) as server:
        base_url = server.base_url
    # The server is gone: the request cannot connect (and is not retried:
    # retry timing is tested on the clock, in tests/agent/test_agent_timing.py).
    config = tmp_path / "config.yaml"
    config.write_text("model:\n  max_retries: 0\n")
    done = await run_cli(base_url, tmp_path, "-q", "question")
    config.unlink()
    assert done.returncode == 1
    assert re.search(r"error: .+", done.stderr.decode())
    done = await run_cli(None, tmp_path, "-q", "question")
    assert done.returncode == 2
    message = ANSI.sub("", done.stderr.decode())
    assert "model.base_url" in message and "HERMES_MODEL_BASE_URL" in message
    assert "OPENAI_BASE_URL" in message and message.count("\n") == 1


async def test_credentials_in_the_model_url_are_not_shown(tmp_path: Path) -> None:
    async with open_scripted_server([TextReply("Hi.")]) as server:
        url = server.base_url.replace("http://", "http://someone:Sup3rSecretPassw0rd@")
        async with spawn_chat(url, tmp_path) as pty:
            screen = ANSI.sub("", await pty.expect_prompt())
            pty.sendline("/model")
            screen += ANSI.sub("", await pty.expect("switches"))
            pty.sendline("/exit")
            assert await pty.wait_exit() == 0
    assert "Sup3rSecretPassw0rd" not in screen
    assert "someone" not in screen
    # The banner and /model still say which server it is.
    assert screen.count(server.base_url.removeprefix("http://")) == 2
