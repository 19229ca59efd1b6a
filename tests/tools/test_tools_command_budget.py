"""The command check costs work linear in the command's length, whatever its
shape: it counts work units (characters parsed, including every re-parse of
an ``eval`` or ``sh -c`` level, words expanded, commands judged) against a
budget proportional to the length, and beyond it the command is
"unreadable".  Long commands are judged in a worker thread that a
cancellation abandons, and commands longer than the cap are refused."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import trio
import trio.testing

from hermes_trio.command_check.policy import MAX_COMMAND_LENGTH, assess, work_budget
from hermes_trio.tools import TerminalTool, ToolContext, approval, find_dangers

# Shapes whose cost must grow linearly with n (and stay within the budget).
LINEAR: list[tuple[str, Callable[[int], str]]] = [
    ("commands", lambda n: "echo a | grep b && ls -la; " * n),
    ("words", lambda n: "echo " + "a " * (10 * n)),
    ("pipes", lambda n: "cat | " * (4 * n) + "cat"),
    ("quotes", lambda n: "echo " + "'a'" * (8 * n)),
    ("variables", lambda n: 'echo "' + "$a" * (10 * n) + '"'),
    ("braces", lambda n: "echo " + "{a,b}" * (4 * n)),
    ("heredoc", lambda n: "cat <<E\n" + "x $y\n" * (5 * n) + "E\n"),
    ("sudo chain", lambda n: "sudo " * (4 * n) + "rm -rf /"),
    ("nice chain", lambda n: "nice -n 1 " * (2 * n) + "ls"),
    ("env chain", lambda n: "env A=1 " * (2 * n) + "ls"),
    ("timeout chain", lambda n: "timeout 5 " * (2 * n) + "ls"),
    ("find exec", lambda n: "find . " + "-exec echo {} + " * n),
    ("functions", lambda n: "f(){ f|f& };" * n),
    ("assignments", lambda n: "x=$(mktemp -d); " * n + "rm -rf $x"),
    ("array", lambda n: "a=(" + "x " * (10 * n) + ")"),
    ("conditions", lambda n: "[[ " + "a && " * (4 * n) + "b ]]"),
    ("case", lambda n: "case x in " + "a) ;; " * (3 * n) + "esac"),
    ("cd", lambda n: "cd a; rm -rf b; " * n),
    ("loop", lambda n: "for f in " + "a " * (5 * n) + "; do rm -rf $f; done"),
    ("path", lambda n: "rm -rf " + "a/" * (10 * n)),
    ("dotdot", lambda n: "rm -rf " + "../" * (7 * n)),
    ("printf", lambda n: "printf '%s\\n' " + "'ls -la' " * (2 * n) + "| sh"),
    ("echo into sh", lambda n: "echo '" + "ls; " * (5 * n) + "' | sh"),
]


@pytest.mark.parametrize(("name", "shape"), LINEAR, ids=[name for name, _ in LINEAR])
def test_work_grows_linearly(name: str, shape: Callable[[int], str]) -> None:
    small, large = assess(shape(250)), assess(shape(1000))
    assert large.work <= 4.4 * small.work + 200, (name, small.work, large.work)
    for verdict, n in ((small, 250), (large, 1000)):
        assert verdict.work <= verdict.budget, (name, n)
        assert not any("work budget" in d.detail for d in verdict.dangers), (name, n)


# Shapes that re-parse or copy the rest of the command at every level: cut
# off by the budget and reported as unreadable, never slow.
NESTED: list[str] = [
    "eval " * 20 + "ls " + "a " * 30_000,
    ("eval " * 20 + "ls " + "a " * 4050)[:8191],
    "eval " * 5000 + "rm -rf /",
    "sh -c '" + "sh -c " * 5000 + "ls'",
    "xargs " * 10_000 + "rm -rf",
    "env -S '" + "env -S " * 30 + "x" + "'" * 30,
    "echo 'echo x' | sh | " * 2000 + "sh",
    'bash -c "' + 'bash -c \\"' * 3 + "x" + '\\"' * 3 + '"',
    "f() { " + "f; " * 3000 + "}; f",
    "for a in 1 2 3 4 5 6 7 8; do " * 8 + "rm -rf $a" + "; done" * 8,
]


# Long inputs of every shape the parser has a loop for.
LONG: list[str] = [
    "echo hello world; " * 3600,
    "a | " * 16000 + "a",
    "x" * 65_000,
    "'" + "x" * 65_000 + "'",
    "cat <<END\n" + "line $x\n" * 8000 + "END\n",
    "for i in 1; do " * 20 + "echo" + "; done" * 20,
    "{a,b}" * 13_000,
    "$(" * 32_000,
    "${" * 32_000,
    "\\" * 65_000,
    "rm -rf " + "a/" * 32_000,
    "sudo -u " * 8000 + "x",
    ":" * 65_000,
    "a" * 65_000 + "()",
    "[[ " + "-n x && " * 8000 + " ]]",
    "echo " + "$x" * 32_000,
    "echo " + ("x" * 4000 + "{a,b}" * 8 + " ") * 15,
    "echo $((" + "(" * 5000 + "x",
    "echo " + "`echo \\`" * 10 + "x",
    "echo " + "!(" * 1000 + "x" + ")" * 1000,
    "echo ${" + "x:-${" * 1000 + "y" + "}" * 1001,
]


@pytest.mark.parametrize("command", NESTED + LONG, ids=range(len(NESTED + LONG)))
def test_nested_work_stays_within_the_budget(command: str) -> None:
    # CPU time of this process, a backstop for work the units do not count.
    started = time.process_time()
    verdict = assess(command)
    assert time.process_time() - started < 6, len(command)
    assert verdict.budget == work_budget(len(command))
    assert verdict.work <= verdict.budget


def test_what_exceeds_the_budget_is_unreadable() -> None:
    verdict = assess("eval " * 20 + "ls " + "a " * 3000)
    assert [d.key for d in verdict.dangers] == ["unreadable"]
    assert "work budget" in verdict.dangers[0].detail


def test_wrapper_chains_are_walked_not_copied() -> None:
    command = "sudo " * 12_000 + "rm -rf /"
    verdict = assess(command)
    assert [d.key for d in verdict.dangers] == ["rm_broad"]
    # About what reading the command once costs, not once per wrapper.
    assert verdict.work < 5 * len(command)


def test_a_shallow_eval_chain_is_still_judged() -> None:
    assert [d.key for d in find_dangers("eval " * 10 + "'rm -rf ~'")] == ["rm_broad"]


def test_inline_judging_is_bounded() -> None:
    # Commands short enough to be judged on the event loop get a budget that
    # keeps that short, whatever they contain.
    assert work_budget(approval.THREAD_THRESHOLD) <= approval.INLINE_WORK_LIMIT


def test_an_overlong_command_is_unreadable() -> None:
    [danger] = find_dangers("echo a; " * (MAX_COMMAND_LENGTH // 8 + 1))
    assert danger.key == "unreadable"
    assert str(MAX_COMMAND_LENGTH) in danger.detail


@pytest.mark.parametrize("yolo", [False, True])
async def test_the_terminal_tool_refuses_an_overlong_command(yolo: bool) -> None:
    command = "echo " + "a" * MAX_COMMAND_LENGTH
    result = await TerminalTool().run({"command": command}, ToolContext(yolo=yolo))
    assert not result.ok
    assert f"{len(command)} characters" in result.content
    assert str(MAX_COMMAND_LENGTH) in result.content
    assert "write_file" in result.content


async def test_a_long_judgement_is_abandoned_on_cancel(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    # A judge that only finishes when the test lets it (or after a real-time
    # safety net, so that the unfixed code fails instead of hanging).
    release = threading.Event()
    finished = threading.Event()
    safety = threading.Timer(10, release.set)
    safety.start()

    def slow_judge(command: str, workdir: str | None = None) -> tuple[()]:
        release.wait()
        finished.set()
        return ()

    monkeypatch.setattr(approval, "find_dangers", slow_judge)
    command = "echo a; " * (approval.THREAD_THRESHOLD // 8 + 1)
    try:
        with trio.move_on_after(0.2) as scope:
            await approval.check_approval("terminal", command, ToolContext())
        assert scope.cancelled_caught
        # Returned at the cancellation, while the judge was still running.
        assert not finished.is_set()
        assert trio.current_time() == pytest.approx(0.2)
    finally:
        release.set()
        safety.cancel()
