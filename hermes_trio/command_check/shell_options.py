"""One reader of command-line options for every command the policy looks
into: the wrappers (sudo, env, su, xargs, ...), the rules (rm, chmod, git
push, kill), shells and interpreters.

Tools differ in a few well-known ways, each a field of :class:`OptionSpec`:
which options take a value, whether options may follow operands (GNU
getopt's default, ``rm build -rf``; tools that run a command stop at its
name instead), GNU's abbreviated long options (``--rec``), shells' ``+o``,
python's ``-c`` that ends the options, kill's ``-SIGNAL``, and tools whose
option set is closed (find's ``-H -L -P`` before its expression, chmod's
``-w`` that is a mode).

A word that holds an expansion (``$FLAGS``, ``"$@"``) cannot be read: where
an option could be it is reported in :attr:`Scan.unknown` (it may be any
option at run time) and counted as an operand.  Pure; the work is linear in
the words scanned (:attr:`Scan.examined`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hermes_trio.command_check.shell_words import Value, lit_value, literal

__all__ = ["NO_OPTIONS", "Opt", "OptionSpec", "Scan", "names", "scan"]


def names(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclass(frozen=True, slots=True)
class OptionSpec:
    # Options that take a value: short ("-u": "-uroot", "-u root") or long
    # ("--user": "--user=root", "--user root").
    with_value: frozenset[str] = frozenset()
    # Options whose value, if any, is attached ("-i{}", "--replace=x").
    attached_value: frozenset[str] = frozenset()
    # Options may follow operands (GNU getopt without "+"); otherwise the
    # first operand ends the options.
    permute: bool = False
    # Options after which every word is an operand (python -c, -m).
    last: frozenset[str] = frozenset()
    # Long options, for GNU's unambiguous abbreviations (--rec: --recursive).
    longs: frozenset[str] = frozenset()
    # "+o"-style options as well (shells).
    plus: bool = False
    # The only options there are: a word starting with another is an operand
    # (find's expression, chmod's "-w" mode).
    only: frozenset[str] | None = None
    # kill: the first "-WORD" that is no option is the signal.
    signal: bool = False


NO_OPTIONS = OptionSpec()


@dataclass(frozen=True, slots=True)
class Opt:
    name: str  # "-r", "--recursive" (spelled out when abbreviated), "+o", "-SIGNAL"
    value: Value | None
    index: int  # of the word that held it


@dataclass(slots=True)
class Scan:
    size: int  # len(words)
    permute: bool
    options: list[Opt] = field(default_factory=list)
    # Indices of words that hold an expansion where an option could be.
    unknown: list[int] = field(default_factory=list)
    # Without permute: index of the first operand (len(words) if none).
    rest: int = 0
    # Words looked at, for the caller's work count.
    examined: int = 0
    # Index just after "--", or None.
    dashdash: int | None = None
    # With permute: the operands' indices (without, they are all from rest on).
    found: list[int] = field(default_factory=list)

    @property
    def operands(self) -> list[int]:
        """Indices of the operands, in order."""
        if self.permute:
            return self.found
        return list(range(self.rest, self.size))

    def has(self, *option_names: str) -> bool:
        return any(o.name in option_names for o in self.options)

    def value(self, *option_names: str) -> Value | None:
        """The value of the last of these options given (an empty one if it
        had none), or None."""
        found: Value | None = None
        for o in self.options:
            if o.name in option_names:
                found = o.value if o.value is not None else lit_value("")
        return found


def _long_name(name: str, spec: OptionSpec) -> str:
    if not spec.longs or name in spec.longs:
        return name
    matches = [long for long in spec.longs if long.startswith(name)]
    return matches[0] if len(matches) == 1 else name


def scan(words: Sequence[Value], spec: OptionSpec, start: int = 0) -> Scan:
    """The options and operands of ``words[start:]`` (indices into ``words``)."""
    n = len(words)
    out = Scan(n, spec.permute, rest=n)
    i = start
    done = False  # after "--" (with permute: the rest are operands)
    while i < n:
        out.examined += 1
        word = words[i]
        if done:
            out.found.append(i)
            i += 1
            continue
        text = literal(word)
        if text is None:
            out.unknown.append(i)
            if not spec.permute:
                out.rest = i
                break
            out.found.append(i)
            i += 1
            continue
        if text == "--":
            out.dashdash = i + 1
            if not spec.permute:
                out.rest = i + 1
                break
            done = True
            i += 1
            continue
        is_option = len(text) > 1 and (text[0] == "-" or (spec.plus and text[0] == "+"))
        if is_option and spec.only is not None:
            head = text.partition("=")[0] if text.startswith("--") else text[:2]
            is_option = head in spec.only
        if is_option and spec.signal and not text.startswith("--"):
            head = text[:2]
            if head not in spec.with_value and head not in ("-l", "-L"):
                if not any(o.name in spec.with_value or o.name == "-SIGNAL" for o in out.options):
                    out.options.append(Opt("-SIGNAL", lit_value(text[1:]), i))
                    i += 1
                # After the signal, "-N" is a process group.
                out.rest = i
                break
        if not is_option:
            if not spec.permute:
                out.rest = i
                break
            out.found.append(i)
            i += 1
            continue
        i = _option_word(words, i, text, spec, out)
        if out.options and out.options[-1].name in spec.last:
            out.rest = min(i, n)
            if not spec.permute:
                break
            done = True
    return out


def _option_word(words: Sequence[Value], i: int, text: str, spec: OptionSpec, out: Scan) -> int:
    """Record the option(s) in word ``i``; the index of the next word."""
    if text.startswith("--"):
        name, eq, rest = text.partition("=")
        name = _long_name(name, spec)
        if eq:
            out.options.append(Opt(name, lit_value(rest), i))
        elif name in spec.with_value:
            value = words[i + 1] if i + 1 < len(words) else None
            out.options.append(Opt(name, value, i))
            return i + 2
        else:
            out.options.append(Opt(name, None, i))
        return i + 1
    sign = text[0]
    for k in range(1, len(text)):
        name = sign + text[k]
        rest = text[k + 1 :]
        if name in spec.with_value:
            if rest:
                out.options.append(Opt(name, lit_value(rest), i))
                return i + 1
            value = words[i + 1] if i + 1 < len(words) else None
            out.options.append(Opt(name, value, i))
            return i + 2
        if name in spec.attached_value:
            out.options.append(Opt(name, lit_value(rest) if rest else None, i))
            return i + 1
        out.options.append(Opt(name, None, i))
        if name in spec.last:
            break
    return i + 1
