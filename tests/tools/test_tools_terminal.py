"""The terminal tool against real /bin/sh processes (kept short: real time)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from hermes_trio.tools import (
    ApprovalDecision,
    ApprovalRequest,
    TerminalTool,
    ToolContext,
    ToolResult,
)
from hermes_trio.tools.terminal import OUTPUT_LIMIT

terminal = TerminalTool()


async def run(command: str, ctx: ToolContext | None = None, **args: object) -> ToolResult:
    return await terminal.run({"command": command, **args}, ctx or ToolContext())


def process_gone(pid: int) -> bool:
    """True if ``pid`` no longer runs (exited, or a zombie waiting for init to reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status or "\nState:\tX" in status


async def wait_gone(pid: int) -> bool:
    for _ in range(200):
        if process_gone(pid):
            return True
        await trio.sleep(0.01)
    return False


async def read_pid(pidfile: Path) -> int:
    path = trio.Path(pidfile)
    for _ in range(300):
        if await path.exists():
            text = (await path.read_text()).strip()
            if text:
                return int(text)
        await trio.sleep(0.01)
    raise AssertionError(f"{pidfile} never appeared")


async def test_echo(tmp_path: Path) -> None:
    assert await run("echo hello") == ToolResult(True, "hello")


async def test_stdout_and_stderr_are_merged() -> None:
    result = await run("echo out; echo err >&2")
    assert result == ToolResult(True, "out\nerr")


async def test_no_output() -> None:
    assert await run("true") == ToolResult(True, "(no output)")


async def test_stdin_is_empty() -> None:
    # `cat` would wait forever on an inherited terminal.
    with trio.fail_after(5):
        assert await run("cat; echo done") == ToolResult(True, "done")


async def test_non_zero_exit() -> None:
    result = await run("echo partial; exit 2")
    assert not result.ok
    assert result.content == "partial\n[exit code 2]"


async def test_killed_by_signal() -> None:
    result = await run("kill -TERM $$")
    assert not result.ok
    assert "exit code -15 (killed by SIGTERM)" in result.content


async def test_timeout_kills_and_keeps_output() -> None:
    started = trio.current_time()
    result = await run("echo started; sleep 5; echo never", timeout=0.2)
    assert trio.current_time() - started < 3
    assert not result.ok
    assert result.content.startswith("started\n")
    assert "timed out after 0.2 s" in result.content
    assert "never" not in result.content


async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    result = await run(f"sleep 30 & echo $! > {pidfile}; wait", timeout=0.3)
    assert "timed out" in result.content
    assert await wait_gone(await read_pid(pidfile))


async def test_output_is_capped_keeping_head_and_tail() -> None:
    result = await run("seq 1 100000")
    assert result.ok
    assert len(result.content) < OUTPUT_LIMIT + 200
    assert result.content.startswith("1\n2\n3\n")
    assert result.content.endswith("\n99999\n100000")
    omitted = len("".join(f"{i}\n" for i in range(1, 100001)).encode()) - OUTPUT_LIMIT
    assert f"[... {omitted} bytes of output omitted ...]" in result.content


async def test_cancellation_kills_the_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    results: list[ToolResult] = []

    async def call() -> None:
        results.append(await run(f"sleep 30 & echo $! > {pidfile}; wait"))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            pid = await read_pid(pidfile)
            assert not process_gone(pid)
            nursery.cancel_scope.cancel()
    assert results == []
    # The grandchild was SIGKILLed before Cancelled left the tool; only its
    # reaping by init may still be pending.
    assert await wait_gone(pid)


async def test_background_processes_do_not_outlive_the_call(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    result = await run(f"sleep 30 >/dev/null 2>&1 & echo $! > {pidfile}; echo done")
    assert result.ok
    assert result.content.startswith("done\n")
    assert "background processes left running by the command were stopped" in result.content
    assert await wait_gone(await read_pid(pidfile))


async def test_runs_in_ctx_cwd_and_workdir(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    ctx = ToolContext(cwd=str(tmp_path))
    assert await run("pwd", ctx) == ToolResult(True, str(tmp_path))
    assert await run("pwd", ctx, workdir="sub") == ToolResult(True, str(tmp_path / "sub"))
    assert await run("pwd", ctx, workdir=str(tmp_path)) == ToolResult(True, str(tmp_path))


async def test_missing_workdir(tmp_path: Path) -> None:
    result = await run("pwd", ToolContext(cwd=str(tmp_path)), workdir="nope")
    missing = tmp_path / "nope"
    assert result == ToolResult(False, f"error: working directory {missing} does not exist")


@pytest.mark.parametrize("seconds", [0, -1, float("nan"), float("inf")])
async def test_bad_timeout(seconds: float) -> None:
    result = await run("echo hi", timeout=seconds)
    assert not result.ok
    assert "'timeout' must be a positive number" in result.content


async def test_empty_command() -> None:
    assert await run("  ") == ToolResult(False, "error: 'command' is empty")


# A command that matches the "power" danger pattern but can never shut
# anything down: `true` succeeds, so `||` never runs shutdown.  The touch
# shows whether the command ran at all.
HARMLESS_DANGER = "touch marker; true || shutdown -h now"


async def test_dangerous_command_is_refused_without_approval(tmp_path: Path) -> None:
    result = await run(HARMLESS_DANGER, ToolContext(cwd=str(tmp_path)))
    assert not result.ok
    assert result.content.startswith("refused:")
    assert not (tmp_path / "marker").exists()


async def test_dangerous_command_runs_with_yolo(tmp_path: Path) -> None:
    result = await run(HARMLESS_DANGER, ToolContext(cwd=str(tmp_path), yolo=True))
    assert result == ToolResult(True, "(no output)")
    assert (tmp_path / "marker").exists()


@pytest.mark.parametrize(
    ("decision", "runs"),
    [
        (ApprovalDecision.ONCE, True),
        (ApprovalDecision.ALWAYS, True),
        (ApprovalDecision.DENY, False),
    ],
)
async def test_dangerous_command_asks(
    tmp_path: Path, decision: ApprovalDecision, runs: bool
) -> None:
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        await trio.lowlevel.checkpoint()
        return decision

    result = await run(HARMLESS_DANGER, ToolContext(cwd=str(tmp_path), approve=approve))
    assert asked == [
        ApprovalRequest("terminal", HARMLESS_DANGER, "shutting down or rebooting the machine")
    ]
    assert result.ok is runs
    assert (tmp_path / "marker").exists() is runs


def test_preview() -> None:
    assert terminal.preview({"command": "ls  -la\n| wc -l"}) == "ls -la | wc -l"
    assert len(terminal.preview({"command": "x" * 500})) == 80
