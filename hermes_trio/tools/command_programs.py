"""What commands read and print, as far as the policy follows it: where a
command's stdin comes from (:class:`Feed`), what a piece of script outputs
(:class:`Output`), and the programs interpreters run (inline, a file, or
stdin).  Pure functions.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from hermes_trio.tools.command_rules import lit_value, names
from hermes_trio.tools.shell_syntax import decode_escapes
from hermes_trio.tools.shell_words import Value, literal, placeholder_text

__all__ = [
    "DOWNLOADERS",
    "NOTHING",
    "NO_FEED",
    "STDIN_PATHS",
    "Feed",
    "Interpreter",
    "Output",
    "feed_of",
    "generic_source",
    "interpreter",
    "output_text",
    "shell_source",
]

# --- what a piece of script produces and reads -----------------------------


@dataclass(frozen=True, slots=True)
class Output:
    # A download runs somewhere in it, so its output may be downloaded code.
    downloads: bool = False
    # Its output when that is known text (echo, printf, cat of known text).
    text: str | None = None


@dataclass(frozen=True, slots=True)
class Feed:
    """Where a command's stdin comes from."""

    kind: str  # "none" (nothing to judge), "download", "text", "computed"
    text: str = ""


NO_FEED = Feed("none")
NOTHING = Output()


def feed_of(out: object) -> Feed:
    assert isinstance(out, Output)
    if out.downloads:
        return Feed("download")
    if out.text is not None:
        return Feed("text", out.text)
    return Feed("computed")


# --- output of echo and friends -------------------------------------------

_ECHO_OPTION = re.compile(r"-[neE]+$")


def output_text(name: str, args: Sequence[Value], feed: Feed) -> str | None:
    if name == "echo":
        i = 0
        while i < len(args) and _ECHO_OPTION.match(literal(args[i]) or ""):
            i += 1
        # dash's echo decodes escapes without -e; decoding shows the most.
        return decode_escapes(" ".join(placeholder_text(v) for v in args[i:])) + "\n"
    if name == "printf" and len(args) == 1:
        return decode_escapes(placeholder_text(args[0])).replace("%%", "%")
    if name == "cat" and all(literal(v) == "-" for v in args) and feed.kind == "text":
        return feed.text
    return None


# --- interpreters ----------------------------------------------------------

DOWNLOADERS = names(
    "curl wget wget2 fetch http https xh xhs curlie aria2c lwp-request GET nc ncat netcat"
)
STDIN_PATHS = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})


@dataclass(frozen=True, slots=True)
class Interpreter:
    shell: bool = False
    # Options whose value is the program text (-c, -e, --eval).
    inline: frozenset[str] = frozenset()
    # Options that take a value.
    with_value: frozenset[str] = frozenset()
    # Options that run something other than stdin or a script (-m module).
    elsewhere: frozenset[str] = frozenset()
    # Options whose value is the script file (php -f).
    file: frozenset[str] = frozenset()


_SHELL = Interpreter(shell=True)
_SHELLS = names("sh bash rbash zsh dash ksh mksh pdksh oksh ash yash posh fish csh tcsh")
_INTERPRETERS: tuple[tuple[re.Pattern[str], Interpreter], ...] = (
    (
        re.compile(r"(?:python|pypy)[\d.]*$"),
        Interpreter(
            inline=frozenset({"-c"}),
            with_value=frozenset({"-W", "-X", "--check-hash-based-pycs"}),
            elsewhere=frozenset({"-m"}),
        ),
    ),
    (
        re.compile(r"perl[\d.]*$"),
        Interpreter(
            inline=frozenset({"-e", "-E"}),
            with_value=frozenset({"-I", "-M", "-m"}),
        ),
    ),
    (
        re.compile(r"j?ruby[\d.]*$"),
        Interpreter(
            inline=frozenset({"-e"}),
            with_value=frozenset({"-r", "-I", "-C", "-E", "-F", "--encoding"}),
        ),
    ),
    (
        re.compile(r"(?:node|nodejs|bun|deno)$"),
        Interpreter(
            inline=frozenset({"-e", "--eval", "-p", "--print"}),
            with_value=names(
                "-r --require --import --loader --input-type -C --conditions --env-file"
            ),
        ),
    ),
    (
        re.compile(r"php[\d.]*$"),
        Interpreter(
            inline=frozenset({"-r", "-B", "-R", "-E"}),
            with_value=frozenset({"-d", "-c", "-z", "-t"}),
            file=frozenset({"-f"}),
        ),
    ),
    (
        re.compile(r"lua(?:jit|[\d.]*)$"),
        Interpreter(inline=frozenset({"-e"}), with_value=frozenset({"-l"})),
    ),
    (re.compile(r"(?:tclsh[\d.]*|wish|Rscript|julia|groovy|osascript)$"), Interpreter()),
)


@functools.lru_cache(maxsize=512)
def interpreter(name: str) -> Interpreter | None:
    if name in _SHELLS:
        return _SHELL
    for pattern, interpreter in _INTERPRETERS:
        if pattern.match(name):
            return interpreter
    return None


def shell_source(args: Sequence[Value]) -> tuple[str, Value | None]:
    """Where ``sh``'s program comes from: ``-c`` text, stdin or a file."""
    c_flag = s_flag = False
    i = 0
    while i < len(args):
        text = literal(args[i])
        if text is None:
            break
        if text in ("--", "-"):
            i += 1
            break
        if text.startswith("--"):
            i += 2 if text in ("--rcfile", "--init-file") else 1
            continue
        if len(text) > 1 and text[0] in "-+":
            letters = text[1:]
            if text[0] == "-":
                c_flag = c_flag or "c" in letters
                s_flag = s_flag or "s" in letters
            i += 2 if ("o" in letters or "O" in letters) else 1
            continue
        break
    operands = args[i:]
    if c_flag:
        return ("inline", operands[0]) if operands else ("none", None)
    if s_flag or not operands:
        return ("stdin", None)
    return ("file", operands[0])


def generic_source(spec: Interpreter, args: Sequence[Value]) -> tuple[str, Value | None]:
    i = 0
    while i < len(args):
        text = literal(args[i])
        if text is None:
            break
        if text == "--":
            i += 1
            break
        if text == "-":
            return ("stdin", None)
        if text.startswith("--"):
            name, eq, rest = text.partition("=")
            value = lit_value(rest) if eq else (args[i + 1] if i + 1 < len(args) else None)
            if name in spec.inline:
                return ("inline", value) if value is not None else ("none", None)
            if name in spec.elsewhere:
                return ("none", None)
            i += 2 if (name in spec.with_value and not eq) else 1
            continue
        if text.startswith("-") and len(text) > 1:
            step = 1
            for k in range(1, len(text)):
                option = "-" + text[k]
                rest = text[k + 1 :]
                value = lit_value(rest) if rest else (args[i + 1] if i + 1 < len(args) else None)
                if option in spec.inline:
                    return ("inline", value) if value is not None else ("none", None)
                if option in spec.file:
                    return ("file", value) if value is not None else ("none", None)
                if option in spec.elsewhere:
                    return ("none", None)
                if option in spec.with_value:
                    step = 1 if rest else 2
                    break
            i += step
            continue
        break
    operands = args[i:]
    return ("file", operands[0]) if operands else ("stdin", None)
