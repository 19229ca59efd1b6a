"""The shell every ``hermes-trio`` command runs in.

It owns, once for all commands: ``trio.run``; the exit codes; the one line
a user sees instead of a traceback when the environment is at fault (found
inside whatever exception group trio raised, see
:mod:`hermes_trio.exception_groups`); and, for the commands that run until
stopped (``serve``, ``gateway``), SIGINT and SIGTERM. ``chat`` takes its
signals per turn instead — Ctrl-C interrupts the answer, not the program —
in :mod:`hermes_trio.cli.chat`.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVarTuple

import trio

from ..exception_groups import first_leaf, leaves

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "Failure",
    "Shell",
    "ending",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
"""A setting is missing or wrong; nothing was started."""
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what shells report for `cmd | head`

_Ts = TypeVarTuple("_Ts")


@dataclass(frozen=True)
class Failure:
    """An error a command expects from its environment (a busy port, an
    unusable data directory): found anywhere inside what ``trio.run``
    raised, it ends the command with ``code`` and the line ``describe``
    makes of it, instead of a traceback."""

    types: tuple[type[BaseException], ...]
    describe: Callable[[Any], str] = str
    code: int = EXIT_FAILED


def ending(exc: BaseException, failures: Sequence[Failure] = ()) -> tuple[int, str | None] | None:
    """The exit code, and the line to print (if any), for ``exc``; None when
    ``exc`` is a bug whose traceback the user should see.

    A group is an expected ending only when every error inside it is: one
    unexpected error among them is still a bug. The user's own stop wins
    over a failure (a closed pipe or a second Ctrl-C is raised inside a
    task, so it arrives wrapped in a group; to the user it is still "stop").
    """
    expected: tuple[type[BaseException], ...] = (KeyboardInterrupt, BrokenPipeError)
    for failure in failures:
        expected += failure.types
    if not all(isinstance(leaf, expected) for leaf in leaves(exc)):
        return None
    if first_leaf(exc, (BrokenPipeError,)) is not None:
        return EXIT_BROKEN_PIPE, None
    if first_leaf(exc, (KeyboardInterrupt,)) is not None:
        return EXIT_INTERRUPTED, None
    for failure in failures:
        leaf = first_leaf(exc, failure.types)
        if leaf is not None:
            return failure.code, failure.describe(leaf)
    return None


class Shell:
    """One command's shell; its lines start with ``hermes-trio <command>:``."""

    def __init__(self, command: str) -> None:
        self.command = command

    def say(self, text: str, *, err: bool = False) -> None:
        out = sys.stderr if err else sys.stdout
        print(f"hermes-trio {self.command}: {text}", file=out, flush=True)

    def run(
        self,
        main: Callable[[*_Ts], Awaitable[int | None]],
        *args: *_Ts,
        problem: str | None = None,
        failures: Sequence[Failure] = (),
    ) -> int:
        """``trio.run(main, *args)``; returns the exit code.

        ``problem`` is the one line that stops the command before it starts
        (exit code 2); ``failures`` are the errors it expects."""
        if problem:
            self.say(problem, err=True)
            return EXIT_USAGE
        try:
            return int(trio.run(main, *args) or EXIT_OK)
        except BaseException as exc:
            end = ending(exc, failures)
            if end is None:
                raise
            code, line = end
            if code == EXIT_BROKEN_PIPE:
                # The reader left (`| head`); keep the interpreter's final
                # flush from complaining about it too.
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            elif line is not None:
                self.say(line, err=True)
            return code

    async def until_stop_signal(
        self,
        body: Callable[[trio.Event], Awaitable[int | None]],
        *,
        grace: float,
        quiet: bool = False,
    ) -> int:
        """Run ``body(stop)`` until it returns or SIGINT/SIGTERM stops it.

        The first signal is announced and sets ``stop``; whatever still runs
        ``grace`` seconds later is cancelled (at once for 0), and so is
        everything at a second signal. Returns ``body``'s exit code, or 0
        when a signal ended it. ``quiet``: the signal is not announced (a
        worker: its supervisor says it once).
        """
        stop = trio.Event()
        code: int | None = EXIT_OK
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    async for signum in signals:
                        if stop.is_set():
                            # A second signal: stop waiting for anyone.
                            nursery.cancel_scope.cancel()
                            return
                        if not quiet:
                            name = signal.Signals(signum).name
                            self.say(f"{name} received, stopping", err=True)
                        stop.set()
                        if grace > 0:
                            nursery.cancel_scope.deadline = trio.current_time() + grace
                        else:
                            nursery.cancel_scope.cancel()

                nursery.start_soon(watch)
                code = await body(stop)
                nursery.cancel_scope.cancel()
        return code or EXIT_OK
