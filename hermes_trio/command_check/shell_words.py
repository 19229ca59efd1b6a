"""Words as the shell will pass them to a command, as far as that can be known
without running anything: quoting removed, brace and tilde expansion done,
and every other expansion kept as a symbolic segment.

A :class:`Value` is a tuple of segments ``(kind, text)``:

``lit``      quoted literal text (not globbed)
``raw``      unquoted literal text (``*``, ``?`` and ``[...]`` still glob)
``home``     a home directory (``~``, ``~user``, ``$HOME``, ``${HOME}``)
``pwd``      the directory the command runs in (``$PWD``, ``~+``, ``$(pwd)``)
``top``      the top of the git checkout it runs in (``$(git rev-parse
             --show-toplevel)``): that directory or one above it
``item``     some specific name, not ``.`` or ``..`` (``$((...))``, a
             ``<(...)`` path, a ``mktemp`` result, one of ``find``'s results)
``env``      a variable of the user's environment that the script never
             sets (``$SCRIPT_DIR``): the user chose it, the model did not
``unknown``  anything at all, including empty, ``/`` or several words

Which variable is which is the caller's knowledge (:class:`Expander`);
:mod:`hermes_trio.command_check.shell_paths` says how much of the file system a
path can reach.  Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from hermes_trio.command_check.shell_syntax import (
    Arith,
    Array,
    CmdSub,
    Lit,
    Opaque,
    ProcSub,
    Script,
    Simple,
    Var,
    Word,
)

__all__ = [
    "UNKNOWN",
    "Expander",
    "Segment",
    "Value",
    "command_name",
    "expand",
    "lit_value",
    "literal",
    "placeholder_text",
    "word_literal",
]

Segment = tuple[str, str]
UNKNOWN: tuple[Segment, ...] = (("unknown", ""),)

# A brace expansion that would give more words than this is not followed.
MAX_BRACE_WORDS = 256
# Words with more braces or unquoted text than this are not brace-expanded
# (they count as unknown), which bounds the work and the recursion.
_MAX_BRACES = 64
_MAX_BRACE_TEXT = 4096
_GLOB = re.compile(r"[*?]|\[[^\]]+\]")
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*$")
_SEQUENCE = re.compile(r"(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?$")

_PLACEHOLDER_OF = {
    "unknown": "\ue000",
    "home": "\ue001",
    "pwd": "\ue002",
    "start": "\ue002",
    "item": "\ue003",
    "env": "\ue004",
    "top": "\ue005",
}


@dataclass(frozen=True, slots=True)
class Value:
    segments: tuple[Segment, ...]
    # Source text of the word it came from, for messages.
    text: str = ""
    # A command substitution inside it runs a download.
    downloads: bool = False
    # When the whole word is one <(...): what that command produces.
    feed: object | None = None
    # When the whole word is one $(...) or `...`: what that command printed.
    output: object | None = None
    # An unquoted expansion (or "$@") that the script controls: it may be
    # split into several words, each anything.
    split: bool = False
    # When the whole word is one variable reference: that reference.
    var: Var | None = None


def lit_value(text: str) -> Value:
    return Value((("lit", text),), text)


def literal(value: Value) -> str | None:
    """The word's text if it holds no expansion."""
    if all(kind in ("lit", "raw") for kind, _ in value.segments):
        return "".join(text for _, text in value.segments)
    return None


def word_literal(word: Word) -> str | None:
    """The text of a word that holds no expansion, quotes removed (not
    brace- or tilde-expanded)."""
    if all(isinstance(p, Lit) for p in word.parts):
        return "".join(p.text for p in word.parts if isinstance(p, Lit))
    return None


def placeholder_text(value: Value) -> str:
    """The word's text with each expansion replaced by a parser placeholder,
    for reading a string the shell will parse again (``sh -c``, ``eval``)."""
    return "".join(
        text if kind in ("lit", "raw") else _PLACEHOLDER_OF[kind] for kind, text in value.segments
    )


def command_name(value: Value) -> str | None:
    """The name a command word runs (``/usr/bin/rm`` → ``rm``), or None when
    an expansion or a glob decides it."""
    base: list[str] = []
    for kind, text in reversed(value.segments):
        if kind not in ("lit", "raw"):
            return None
        if kind == "raw" and _GLOB.search(text.rsplit("/", 1)[-1]):
            return None
        if "/" in text:
            base.append(text.rsplit("/", 1)[1])
            break
        base.append(text)
    return "".join(reversed(base))


# --- expansion ------------------------------------------------------------


class Expander(Protocol):
    """What expansion asks of the policy's judge."""

    def variable(self, var: Var) -> tuple[Segment, ...]:
        """The segments ``var`` expands to (its nested substitutions are
        judged separately)."""
        ...

    def substitution(self, script: Script, how: str) -> object:
        """Judge a nested script (``how``: ``"$("``, ``"<("`` or ``">("``)
        and return what it produces."""
        ...

    def downloads(self, result: object) -> bool:
        """Whether a substitution's result is a download."""
        ...

    def spend(self, units: int) -> None:
        """Count work; may raise to stop."""
        ...


def expand(word: Word, expander: Expander) -> list[Value]:
    """The values ``word`` becomes; every script nested in it is judged once
    (they run when the word is expanded)."""
    segments: list[Segment] = []
    downloads = split = False
    feed: object | None = None
    output: object | None = None
    parts = [p for p in word.parts if not (isinstance(p, Lit) and not p.text)]
    expander.spend(2 * len(word.parts) + 2)
    for part in word.parts:
        kind_segments: Sequence[Segment]
        if isinstance(part, Lit):
            kind_segments = (("lit" if part.quoted else "raw", part.text),)
        elif isinstance(part, Var):
            for script in part.subs:
                downloads = expander.downloads(expander.substitution(script, "$(")) or downloads
            kind_segments = expander.variable(part)
            many = part.name in ("@", "*") or part.op[:3] in ("[@]", "[*]")
            unknown = any(kind == "unknown" for kind, _ in kind_segments)
            split = split or (unknown and (many or not part.quoted))
        elif isinstance(part, CmdSub):
            result = expander.substitution(part.script, "$(")
            downloads = expander.downloads(result) or downloads
            known = known_output(part.script)
            kind_segments = known if known is not None else UNKNOWN
            split = split or (known is None and not part.quoted)
            if len(parts) == 1:
                output = result
        elif isinstance(part, ProcSub):
            result = expander.substitution(part.script, part.direction + "(")
            downloads = expander.downloads(result) or downloads
            kind_segments = (("item", ""),)
            if len(parts) == 1:
                feed = result
        elif isinstance(part, Arith):
            for script in part.subs:
                downloads = expander.downloads(expander.substitution(script, "$(")) or downloads
            kind_segments = (("item", ""),)
        elif isinstance(part, Array):
            for inner in part.words:
                downloads = any(v.downloads for v in expand(inner, expander)) or downloads
            kind_segments = UNKNOWN
        else:
            assert isinstance(part, Opaque)
            kind_segments = ((part.kind, ""),)
            split = split or (part.kind == "unknown" and not part.quoted)
        for kind, text in kind_segments:
            if segments and segments[-1][0] == kind and kind in ("lit", "raw"):
                segments[-1] = (kind, segments[-1][1] + text)
            else:
                segments.append((kind, text))
    var = parts[0] if len(parts) == 1 and isinstance(parts[0], Var) else None
    values = _braces(segments, expander.spend)
    expander.spend(2 * len(values))
    return [Value(tuple(_tilde(v)), word.text, downloads, feed, output, split, var) for v in values]


# Substitutions whose output is known well enough: a directory, or a path
# to a named program.
_PWD_OPTIONS = frozenset({"-L", "-P"})


def known_output(script: Script) -> tuple[Segment, ...] | None:
    """The segments a ``$(...)`` of ``script`` stands for, when it is one of
    a few commands whose output is known (``pwd``, ``git rev-parse
    --show-toplevel``, ``which NAME``, ``mktemp``)."""
    if len(script.items) != 1 or len(script.items[0].pipelines) != 1:
        return None
    commands = script.items[0].pipelines[0].commands
    if len(commands) != 1 or not isinstance(commands[0], Simple):
        return None
    command = commands[0]
    if command.assigns or any(r.op not in (">", "2>") for r in command.redirects):
        return None
    words = [word_literal(w) for w in command.words]
    if not words or any(w is None for w in words):
        return None
    name, *args = words
    assert name is not None
    if name == "pwd" and all(a in _PWD_OPTIONS for a in args):
        return (("pwd", ""),)
    if name == "realpath" and args in ([], ["."]):
        return (("pwd", ""),)
    if name == "git" and args == ["rev-parse", "--show-toplevel"]:
        return (("top", ""),)
    if name == "mktemp":
        return (("item", ""),)
    program: str | None = None
    if name == "which" and len(args) == 1:
        program = args[0]
    elif name in ("command", "type") and len(args) == 2 and args[0] in ("-v", "-p", "-P"):
        program = args[1]
    if program and "/" not in program and _USER.match(program):
        return (("item", ""), ("lit", "/" + program))
    return None


def _tilde(segments: list[Segment]) -> list[Segment]:
    if not segments or segments[0][0] != "raw" or not segments[0][1].startswith("~"):
        return segments
    text = segments[0][1]
    slash = text.find("/")
    if slash < 0 and len(segments) > 1 and segments[1][0] != "raw":
        return segments  # ~"x": a quoted character in the prefix stops expansion
    prefix = text[1:] if slash < 0 else text[1:slash]
    rest = "" if slash < 0 else text[slash:]
    if prefix == "":
        kind = "home"
    elif prefix == "+":
        kind = "pwd"
    elif prefix == "-":
        kind = "unknown"
    elif _USER.match(prefix):
        kind = "home"  # another user's home is as broad as one's own
    else:
        return segments
    out: list[Segment] = [(kind, "")]
    if rest:
        out.append(("raw", rest))
    return out + segments[1:]


def _braces(segments: list[Segment], spend: Callable[[int], None]) -> list[list[Segment]]:
    """Brace expansion (``{a,b}``, ``{1..3}``) over unquoted text; ``spend``
    is told the work (atoms copied and scanned)."""
    if not any(kind == "raw" and "{" in text and "}" in text for kind, text in segments):
        return [segments]
    opening = sum(text.count("{") for kind, text in segments if kind == "raw")
    size = sum(len(text) for kind, text in segments if kind == "raw")
    if opening > _MAX_BRACES or size > _MAX_BRACE_TEXT:
        return [list(UNKNOWN)]
    # One atom per unquoted character, so braces can span quoted parts.
    atoms: list[Segment] = []
    for kind, text in segments:
        if kind == "raw":
            atoms.extend(("raw", c) for c in text)
        else:
            atoms.append((kind, text))
    results: list[list[Segment]] = []
    if not _expand_atoms(atoms, results, spend):
        return [list(UNKNOWN)]
    spend(sum(len(r) for r in results))
    return [_merge(r) for r in results]


def _merge(atoms: Iterable[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for kind, text in atoms:
        if out and out[-1][0] == kind and kind in ("lit", "raw"):
            out[-1] = (kind, out[-1][1] + text)
        else:
            out.append((kind, text))
    return out


def _expand_atoms(
    atoms: list[Segment], results: list[list[Segment]], spend: Callable[[int], None]
) -> bool:
    """Append the expansions of ``atoms`` to ``results``; False past the cap."""
    spend(len(atoms))
    found = _find_brace(atoms)
    if found is None:
        results.append(atoms)
        return len(results) <= MAX_BRACE_WORDS
    start, end, alternatives = found
    for alternative in alternatives:
        if not _expand_atoms(atoms[:start] + alternative + atoms[end + 1 :], results, spend):
            return False
    return True


def _find_brace(atoms: list[Segment]) -> tuple[int, int, list[list[Segment]]] | None:
    for start, atom in enumerate(atoms):
        if atom != ("raw", "{") or (start > 0 and atoms[start - 1] == ("raw", "$")):
            continue
        depth = 0
        commas: list[int] = []
        for i in range(start + 1, len(atoms)):
            a = atoms[i]
            if a == ("raw", "{"):
                depth += 1
            elif a == ("raw", "}"):
                if depth == 0:
                    if commas:
                        bounds = [start, *commas, i]
                        alts = [
                            atoms[bounds[k] + 1 : bounds[k + 1]] for k in range(len(bounds) - 1)
                        ]
                        return start, i, alts
                    sequence = _sequence(atoms[start + 1 : i])
                    if sequence is not None:
                        return start, i, [[("raw", s)] for s in sequence]
                    break
                depth -= 1
            elif a == ("raw", ",") and depth == 0:
                commas.append(i)
    return None


def _sequence(atoms: list[Segment]) -> list[str] | None:
    if not all(kind == "raw" for kind, _ in atoms):
        return None
    m = _SEQUENCE.match("".join(text for _, text in atoms))
    if not m:
        return None
    first, last, step_text = m.group(1), m.group(2), m.group(3)
    step = abs(int(step_text)) if step_text else 1
    step = step or 1
    if first.lstrip("-").isdigit() and last.lstrip("-").isdigit():
        a, b = int(first), int(last)
        if abs(b - a) // step > MAX_BRACE_WORDS:
            return None
        values = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [str(v) for v in values]
    if first.isalpha() and last.isalpha():
        a, b = ord(first), ord(last)
        values = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [chr(v) for v in values]
    return None
