"""The shell every command runs in: exit codes, the real error inside an
exception group, and the stop signals (on trio's clock)."""

from __future__ import annotations

import signal

import pytest
import trio
import trio.testing

from hermes_trio.cli.process import (
    EXIT_BROKEN_PIPE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    Failure,
    Shell,
    ending,
)
from hermes_trio.exception_groups import first_leaf, leaves

BUSY = Failure((OSError,), lambda exc: f"cannot listen: {exc.strerror or exc}")


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


def test_leaves_look_through_nested_groups_in_order() -> None:
    a, b, c = ValueError("a"), KeyError("b"), OSError("c")
    group = BaseExceptionGroup("x", [a, BaseExceptionGroup("y", [b, c])])
    assert list(leaves(group)) == [a, b, c]
    assert list(leaves(a)) == [a]
    assert first_leaf(group, (OSError,)) is c
    assert first_leaf(group, (LookupError,)) is b
    assert first_leaf(group, (TypeError,)) is None
    assert first_leaf(None, (OSError,)) is None


def test_the_users_own_stop_sees_through_groups() -> None:
    assert ending(KeyboardInterrupt()) == (EXIT_INTERRUPTED, None)
    group = BaseExceptionGroup("x", [BaseExceptionGroup("y", [KeyboardInterrupt()])])
    assert ending(group) == (EXIT_INTERRUPTED, None)
    assert ending(ExceptionGroup("x", [BrokenPipeError()])) == (EXIT_BROKEN_PIPE, None)
    assert ending(RuntimeError()) is None


def test_one_unexpected_error_makes_the_whole_group_a_bug() -> None:
    assert ending(ExceptionGroup("x", [BrokenPipeError(), ValueError()])) is None
    assert ending(ExceptionGroup("x", [OSError(98, "in use"), ValueError()]), [BUSY]) is None


def test_an_expected_failure_is_one_line() -> None:
    busy = OSError(98, "Address already in use")
    assert ending(busy, [BUSY]) == (EXIT_FAILED, "cannot listen: Address already in use")
    assert ending(ExceptionGroup("x", [busy]), [BUSY]) == (
        EXIT_FAILED,
        "cannot listen: Address already in use",
    )
    # A closed pipe is an OSError too, but it is the reader leaving.
    assert ending(BrokenPipeError(), [BUSY]) == (EXIT_BROKEN_PIPE, None)
    first = Failure((KeyError,), code=3)
    assert ending(ExceptionGroup("x", [OSError("o"), KeyError("k")]), [first, BUSY]) == (
        3,
        "'k'",
    )


def test_run_returns_the_commands_code(capsys: pytest.CaptureFixture[str]) -> None:
    async def main(code: int | None) -> int | None:
        await trio.lowlevel.checkpoint()
        return code

    shell = Shell("test")
    assert shell.run(main, 3) == 3
    assert shell.run(main, None) == 0
    assert capsys.readouterr() == ("", "")


def test_run_refuses_to_start_on_a_problem(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> int:
        raise AssertionError("must not start")

    assert Shell("test").run(main, problem="set model.base_url") == EXIT_USAGE
    assert capsys.readouterr().err == "hermes-trio test: set model.base_url\n"


def test_run_turns_an_expected_failure_in_a_task_into_its_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def main() -> int:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_raise, OSError(98, "Address already in use"))
        return 0

    assert Shell("test").run(main, failures=[BUSY]) == EXIT_FAILED
    assert capsys.readouterr().err == "hermes-trio test: cannot listen: Address already in use\n"


def test_run_lets_a_bugs_traceback_out() -> None:
    async def main() -> int:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_raise, ValueError("a bug"))
        return 0

    with pytest.RaisesGroup(ValueError):
        Shell("test").run(main, failures=[BUSY])


async def _raise(exc: BaseException) -> None:
    await trio.lowlevel.checkpoint()
    raise exc


async def test_the_first_signal_sets_stop_and_the_grace_bounds_the_rest(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    stopped_at: list[float] = []

    async def body(stop: trio.Event) -> int:
        signal.raise_signal(signal.SIGTERM)
        await stop.wait()
        stopped_at.append(trio.current_time())
        await trio.sleep_forever()  # a shutdown that would never end

    began = trio.current_time()
    assert await Shell("test").until_stop_signal(body, grace=5) == 0
    assert stopped_at == [began]
    assert trio.current_time() - began == 5
    assert capsys.readouterr().err == "hermes-trio test: SIGTERM received, stopping\n"


async def test_a_second_signal_stops_waiting(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    async def body(stop: trio.Event) -> int:
        signal.raise_signal(signal.SIGINT)
        await stop.wait()
        signal.raise_signal(signal.SIGINT)
        await trio.sleep_forever()

    began = trio.current_time()
    assert await Shell("test").until_stop_signal(body, grace=5) == 0
    assert trio.current_time() == began
    # Announced once: the second one is only "stop now".
    assert capsys.readouterr().err == "hermes-trio test: SIGINT received, stopping\n"


async def test_no_grace_cancels_at_the_first_signal(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    async def body(stop: trio.Event) -> int:
        signal.raise_signal(signal.SIGTERM)
        await trio.sleep_forever()

    began = trio.current_time()
    assert await Shell("test").until_stop_signal(body, grace=0) == 0
    assert trio.current_time() == began
    assert "SIGTERM received, stopping" in capsys.readouterr().err


async def test_the_body_gives_the_exit_code(autojump_clock: trio.testing.MockClock) -> None:
    async def body(stop: trio.Event) -> int:
        await trio.sleep(1)
        return EXIT_FAILED

    assert await Shell("test").until_stop_signal(body, grace=5) == EXIT_FAILED
