"""The ``terminal`` tool: run a shell command, bounded in time and output.

The command runs as ``/bin/sh -c`` in a new session, so it and everything it
starts share one process group that we can kill as a unit — on timeout, when
the turn is cancelled, and when the shell exits but left background jobs
behind.  Nothing the tool starts outlives the tool call.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio

from hermes_trio.command_check.policy import MAX_COMMAND_LENGTH
from hermes_trio.tools.approval import check_approval
from hermes_trio.tools.base import ToolContext, ToolResult, one_line

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_TIMEOUT",
    "OUTPUT_LIMIT",
    "ShellOutcome",
    "TerminalTool",
    "format_outcome",
    "run_shell",
]

DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 600.0
# Bytes of output kept, split between head and tail; the middle is dropped.
OUTPUT_LIMIT = 50_000
# After the shell exits, how long to keep reading output that is still in the
# pipe (or being written by background jobs) before stopping them.
DRAIN_GRACE = 0.5
_READ_SIZE = 65536


def _signal_group(pgid: int) -> bool:
    """SIGKILL process group ``pgid``; True if anything was there to kill."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


async def _kill_process_group(proc: trio.Process) -> None:
    # run_process calls this (shielded) when cancelled, while the shell is not
    # yet reaped, so its pid is still ours as a process group id.  Killing only
    # the shell, trio's default, would leave `sleep 100 &`-style children behind.
    _signal_group(proc.pid)
    await trio.lowlevel.checkpoint()


class _HeadTail:
    """Keeps the first and last bytes of a stream, counting what falls between."""

    def __init__(self, limit: int) -> None:
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes | bytearray) -> None:
        self.total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            excess = len(self._tail) - self._tail_limit
            if excess > 0:
                del self._tail[:excess]

    def text(self) -> str:
        omitted = self.total - len(self._head) - len(self._tail)
        if omitted == 0:
            return (self._head + self._tail).decode("utf-8", "replace")
        head = self._head.decode("utf-8", "replace")
        tail = self._tail.decode("utf-8", "replace")
        return f"{head}\n[... {omitted} bytes of output omitted ...]\n{tail}"


@dataclass(frozen=True)
class ShellOutcome:
    output: str
    # None when the shell did not finish (timed out) or never started.
    returncode: int | None
    timed_out: bool = False
    stopped_background: bool = False
    start_error: str | None = None


async def _pump(stream: trio.abc.ReceiveStream, sink: _HeadTail, done: trio.Event) -> None:
    try:
        async with stream:
            while chunk := await stream.receive_some(_READ_SIZE):
                sink.feed(chunk)
    finally:
        done.set()


async def run_shell(
    command: str, *, cwd: str, time_limit: float, output_limit: int = OUTPUT_LIMIT
) -> ShellOutcome:
    """Run ``command`` with ``/bin/sh -c`` and collect merged stdout/stderr.

    ``time_limit`` is not a caller-side timeout (which would be a cancel
    scope around the call): running out of it is a normal outcome, reported
    with the output so far.

    If the caller is cancelled, the process group is killed before
    ``trio.Cancelled`` propagates.
    """
    sink = _HeadTail(output_limit)
    pump_done = trio.Event()
    proc: trio.Process | None = None
    returncode: int | None = None
    stopped_background = False
    try:
        async with trio.open_nursery() as nursery:
            try:
                proc = await nursery.start(
                    partial(
                        trio.run_process,
                        ["/bin/sh", "-c", command],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        cwd=cwd,
                        check=False,
                        start_new_session=True,
                        deliver_cancel=_kill_process_group,
                    )
                )
            except OSError as exc:
                return ShellOutcome("", None, start_error=f"{type(exc).__name__}: {exc}")
            assert proc.stdout is not None
            nursery.start_soon(_pump, proc.stdout, sink, pump_done)
            # The deadline covers only the command, so that after a timeout we
            # can still drain what it wrote before it was killed.
            with trio.move_on_after(time_limit):
                await proc.wait()
            # Polls, so a shell that exited right at the deadline counts as done.
            returncode = proc.returncode
            if returncode is None:
                # Not reaped yet, so proc.pid still names our process group.
                _signal_group(proc.pid)
                await proc.wait()
            with trio.move_on_after(DRAIN_GRACE):
                await pump_done.wait()
            # Background jobs would otherwise keep running after the call, and
            # hold the pipe open so the pump never sees EOF.
            stopped_background = _signal_group(proc.pid) and returncode is not None
            nursery.cancel_scope.cancel()
    finally:
        # Cancelled after the shell exited (run_process's deliver_cancel no
        # longer applies): its background jobs must not survive us either.
        # A sync call, so it runs even while we are being cancelled.  If the
        # group is already empty this is ESRCH (reuse of its id in the
        # microseconds since would need the pid counter to wrap around).
        if proc is not None:
            _signal_group(proc.pid)
    return ShellOutcome(
        sink.text(),
        returncode,
        timed_out=returncode is None,
        stopped_background=stopped_background,
    )


def _describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"exit code {returncode} (killed by {name})"
    return f"exit code {returncode}"


def format_outcome(outcome: ShellOutcome, timeout: float) -> ToolResult:
    """The model-facing text for one command run."""
    if outcome.start_error is not None:
        return ToolResult(False, f"error: could not start the shell: {outcome.start_error}")
    parts = [outcome.output.rstrip("\n") or "(no output)"]
    if outcome.timed_out:
        parts.append(
            f"[timed out after {timeout:g} s; the command and its child processes were "
            "killed. Output so far is shown above.]"
        )
    elif outcome.returncode:
        parts.append(f"[{_describe_exit(outcome.returncode)}]")
    if outcome.stopped_background:
        parts.append("[background processes left running by the command were stopped]")
    ok = not outcome.timed_out and outcome.returncode == 0
    return ToolResult(ok, "\n".join(parts))


class TerminalTool:
    name = "terminal"
    description = (
        "Run a shell command with /bin/sh -c and return its combined stdout and "
        "stderr (long output keeps the beginning and end). stdin is empty, so "
        "interactive programs will not wait for input. The command is killed "
        f"after `timeout` seconds (default {DEFAULT_TIMEOUT:g}, max {MAX_TIMEOUT:g}); "
        "background processes it starts are stopped when it exits. Dangerous "
        "commands (e.g. recursive deletes of broad paths) need the user's approval."
    )
    parameters: dict[str, Any] = {  # noqa: RUF012 - read-only schema, part of the Tool protocol
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "description": (
                    f"The shell command to run (at most {MAX_COMMAND_LENGTH} characters; "
                    "write longer scripts to a file first)."
                ),
            },
            "timeout": {
                "type": "number",
                "description": f"Seconds before the command is killed (max {MAX_TIMEOUT:g}).",
            },
            "workdir": {
                "type": "string",
                "description": "Directory to run in; relative to the session's working directory.",
            },
        },
        "required": ["command"],
    }

    def preview(self, args: dict[str, Any]) -> str:
        return one_line(str(args.get("command", "")))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command: str = args["command"]
        if not command.strip():
            return ToolResult(False, "error: 'command' is empty")
        timeout = args.get("timeout", DEFAULT_TIMEOUT)
        # json.loads accepts NaN and Infinity, so finiteness needs checking too.
        if not math.isfinite(timeout) or timeout <= 0:
            return ToolResult(False, f"error: 'timeout' must be a positive number, got {timeout}")
        timeout = min(float(timeout), MAX_TIMEOUT)
        if len(command) > MAX_COMMAND_LENGTH:
            return ToolResult(
                False,
                f"error: the command is {len(command)} characters long; commands are limited "
                f"to {MAX_COMMAND_LENGTH}. Write a long script to a file with write_file and "
                "run that file instead.",
            )
        cwd = ctx.resolve_path(args.get("workdir") or ".")
        if not await trio.Path(cwd).is_dir():
            return ToolResult(False, f"error: working directory {cwd} does not exist")
        refusal = await check_approval(self.name, command, ctx, workdir=cwd)
        if refusal is not None:
            return ToolResult(False, refusal)
        outcome = await run_shell(command, cwd=cwd, time_limit=timeout)
        return format_outcome(outcome, timeout)
