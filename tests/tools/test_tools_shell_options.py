"""The one option scanner every wrapper and rule reads options with."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_trio.command_check.shell_options import OptionSpec, Scan, names, scan
from hermes_trio.command_check.shell_words import UNKNOWN, Value, lit_value, literal

GNU = OptionSpec(
    permute=True,
    with_value=names("-u --user"),
    attached_value=names("-i --replace"),
    longs=names("--recursive --force --user --replace"),
)
STOPS = OptionSpec(with_value=names("-u --user"))


def words(*texts: str | None) -> list[Value]:
    return [lit_value(t) if t is not None else Value(UNKNOWN, "$x") for t in texts]


def summary(found: Scan, args: list[Value]) -> tuple[list[tuple[str, str | None]], list[str]]:
    options = [(o.name, literal(o.value) if o.value else None) for o in found.options]
    return options, [literal(args[i]) or "?" for i in found.operands]


@pytest.mark.parametrize(
    ("spec", "args", "options", "operands"),
    [
        # clusters, attached and separate values
        (GNU, ["-rf", "x"], [("-r", None), ("-f", None)], ["x"]),
        (GNU, ["-uroot", "x"], [("-u", "root")], ["x"]),
        (GNU, ["-fu", "root", "x"], [("-f", None), ("-u", "root")], ["x"]),
        (GNU, ["--user=root", "x"], [("--user", "root")], ["x"]),
        (GNU, ["--user", "root", "x"], [("--user", "root")], ["x"]),
        # GNU permutes: options after operands, until --
        (GNU, ["x", "-rf", "y"], [("-r", None), ("-f", None)], ["x", "y"]),
        (GNU, ["x", "--", "-rf"], [], ["x", "-rf"]),
        # abbreviations of long options
        (GNU, ["--rec", "--for", "x"], [("--recursive", None), ("--force", None)], ["x"]),
        # values that must be attached
        (GNU, ["-i", "x"], [("-i", None)], ["x"]),
        (GNU, ["-i{}", "x"], [("-i", "{}")], ["x"]),
        (GNU, ["--replace=R", "x"], [("--replace", "R")], ["x"]),
        # "-" is an operand
        (GNU, ["-", "-f"], [("-f", None)], ["-"]),
        # without permuting, the first operand ends the options
        (STOPS, ["-u", "root", "rm", "-rf", "/"], [("-u", "root")], ["rm", "-rf", "/"]),
        (STOPS, ["--", "-rf"], [], ["-rf"]),
        # shells: +o and -o take values
        (
            OptionSpec(with_value=names("-o +o -O +O"), plus=True),
            ["+O", "extglob", "-xc", "cmd"],
            [("+O", "extglob"), ("-x", None), ("-c", None)],
            ["cmd"],
        ),
        # python: -c ends the options
        (
            OptionSpec(with_value=names("-c -W"), last=names("-c")),
            ["-W", "x", "-c", "code", "-v"],
            [("-W", "x"), ("-c", "code")],
            ["-v"],
        ),
        # a closed option set: chmod's -w is the mode
        (
            OptionSpec(permute=True, only=names("-R -v")),
            ["-R", "-w", "/"],
            [("-R", None)],
            ["-w", "/"],
        ),
        # kill: the first -WORD is the signal, later ones are processes
        (
            OptionSpec(with_value=names("-s -n"), signal=True),
            ["-9", "-1"],
            [("-SIGNAL", "9")],
            ["-1"],
        ),
        (
            OptionSpec(with_value=names("-s -n"), signal=True),
            ["-s", "KILL", "-1"],
            [("-s", "KILL")],
            ["-1"],
        ),
    ],
)
def test_scan(
    spec: OptionSpec,
    args: list[str],
    options: list[tuple[str, str | None]],
    operands: list[str],
) -> None:
    values = words(*args)
    assert summary(scan(values, spec), values) == (options, operands)


def test_words_an_expansion_decides_may_be_options() -> None:
    args = words("-f", None, "x", None)
    found = scan(args, GNU)
    assert found.unknown == [1, 3]
    assert found.operands == [1, 2, 3]
    stops = scan(args, STOPS)
    assert stops.unknown == [1]
    assert stops.rest == 1


def test_start_and_rest() -> None:
    args = words("sudo", "-u", "root", "rm", "-rf", "/")
    found = scan(args, STOPS, 1)
    assert found.rest == 3
    assert found.examined == 2
    assert found.value("-u") == lit_value("root")
    assert found.has("-u") and not found.has("-r")


@given(st.lists(st.sampled_from(["-a", "-u", "--user", "x", "--", "-", "-ab", "--user=y"])))
@settings(max_examples=300, deadline=None)
def test_every_word_is_an_option_a_value_or_an_operand(texts: list[str]) -> None:
    args = words(*texts)
    found = scan(args, GNU)
    accounted = set(found.operands)
    for option in found.options:
        accounted.add(option.index)
        if literal(args[option.index]) in ("-u", "--user") and option.index + 1 < len(args):
            accounted.add(option.index + 1)  # the value, given separately
    if found.dashdash is not None:
        accounted.add(found.dashdash - 1)
    assert accounted == set(range(len(args)))
    assert found.examined <= len(args)
