"""Words as the shell will pass them to a command, as far as that can be known
without running anything: quoting removed, brace and tilde expansion done,
and every other expansion kept as a symbolic segment.

A :class:`Value` is a tuple of segments ``(kind, text)``:

``lit``      quoted literal text (not globbed)
``raw``      unquoted literal text (``*``, ``?`` and ``[...]`` still glob)
``home``     the home directory (``~``, ``~user``, ``$HOME``, ``${HOME}``)
``pwd``      the working directory (``$PWD``, ``~+``)
``item``     some non-empty name that is not ``.`` or ``..`` (``$((...))``,
             a ``<(...)`` path, one of ``find``'s results)
``unknown``  anything at all, including empty, ``/`` or several words

:func:`breadth` then says how much of the file system a path argument can
reach.  Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from hermes_trio.tools.shell_syntax import (
    Arith,
    Array,
    CmdSub,
    Lit,
    Opaque,
    Part,
    ProcSub,
    Script,
    Var,
    Word,
)

__all__ = [
    "HERE",
    "NARROW",
    "SYSTEM",
    "Value",
    "breadth",
    "command_name",
    "expand",
    "literal",
    "placeholder_text",
]

Segment = tuple[str, str]

# Breadth of a path argument.
NARROW = 0  # a specific file or directory
HERE = 1  # the working directory, its parent, or everything in it
SYSTEM = 2  # /, a top-level directory, a home directory, or unknown

# Second-level directories as broad as top-level ones: whole homes and the
# system's own trees (not /var/www or /etc/nginx, which users manage).
_SYSTEM_PARENTS = frozenset({"home", "Users", "usr"})
_SYSTEM_SECOND_LEVEL = frozenset({("var", "lib")})
# A brace expansion that would give more words than this is not followed.
MAX_BRACE_WORDS = 256
# Words with more braces or unquoted text than this are not brace-expanded
# (they count as unknown), which bounds the work and the recursion.
_MAX_BRACES = 64
_MAX_BRACE_TEXT = 4096
_GLOB = re.compile(r"[*?]|\[[^\]]+\]")
_BRACKET = re.compile(r"\[[^\]]*\]")
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*$")
_SEQUENCE = re.compile(r"(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?$")

_PLACEHOLDER_OF = {"unknown": "\ue000", "home": "\ue001", "pwd": "\ue002", "item": "\ue003"}


@dataclass(frozen=True, slots=True)
class Value:
    segments: tuple[Segment, ...]
    # Source text of the word it came from, for messages.
    text: str = ""
    # A command substitution inside it runs a download.
    downloads: bool = False
    # When the whole word is one <(...): what that command produces.
    feed: object | None = None


def literal(value: Value) -> str | None:
    """The word's text if it holds no expansion."""
    if all(kind in ("lit", "raw") for kind, _ in value.segments):
        return "".join(text for _, text in value.segments)
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

SubJudge = Callable[[Script], object]


def _var_kind(var: Var, temporary: frozenset[str]) -> str:
    if var.prefix == "#":
        return "item"
    if var.prefix == "!":
        return "unknown"
    if var.name in temporary and var.op in ("", "?", ":?"):
        return "item"
    if var.name in ("HOME", "PWD") and (
        var.op == "" or var.op[:1] in "-=?" or var.op[:2] in (":-", ":=", ":?")
    ):
        return "home" if var.name == "HOME" else "pwd"
    return "unknown"


def expand(
    word: Word,
    judge: SubJudge,
    downloads_of: Callable[[object], bool],
    temporary: frozenset[str] = frozenset(),
) -> list[Value]:
    """The values ``word`` becomes.  ``judge`` is called once on every script
    nested in it (they run when the word is expanded) and returns what it
    produces; ``downloads_of`` says whether such a result is a download.
    Variables in ``temporary`` hold a fresh temporary directory (``item``)."""
    segments: list[Segment] = []
    downloads = False
    feed: object | None = None
    for part in word.parts:
        kind, text, nested = _segment(part, temporary)
        for script in nested:
            result = judge(script)
            downloads = downloads or downloads_of(result)
            if isinstance(part, ProcSub) and len(word.parts) == 1:
                feed = result
        if segments and segments[-1][0] == kind and kind in ("lit", "raw"):
            segments[-1] = (kind, segments[-1][1] + text)
        else:
            segments.append((kind, text))
    values = _braces(segments)
    return [Value(tuple(_tilde(v)), word.text, downloads, feed) for v in values]


def _segment(part: Part, temporary: frozenset[str]) -> tuple[str, str, Sequence[Script]]:
    if isinstance(part, Lit):
        return ("lit" if part.quoted else "raw"), part.text, ()
    if isinstance(part, Var):
        return _var_kind(part, temporary), "", part.subs
    if isinstance(part, CmdSub):
        return "unknown", "", (part.script,)
    if isinstance(part, ProcSub):
        return "item", "", (part.script,)
    if isinstance(part, Arith):
        return "item", "", part.subs
    if isinstance(part, Array):
        nested = [s for w in part.words for p in w.parts for s in _segment(p, temporary)[2]]
        return "unknown", "", nested
    assert isinstance(part, Opaque)
    return part.kind, "", ()


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


def _braces(segments: list[Segment]) -> list[list[Segment]]:
    """Brace expansion (``{a,b}``, ``{1..3}``) over unquoted text."""
    if not any(kind == "raw" and "{" in text and "}" in text for kind, text in segments):
        return [segments]
    opening = sum(text.count("{") for kind, text in segments if kind == "raw")
    size = sum(len(text) for kind, text in segments if kind == "raw")
    if opening > _MAX_BRACES or size > _MAX_BRACE_TEXT:
        return [[("unknown", "")]]
    # One atom per unquoted character, so braces can span quoted parts.
    atoms: list[Segment] = []
    for kind, text in segments:
        if kind == "raw":
            atoms.extend(("raw", c) for c in text)
        else:
            atoms.append((kind, text))
    results: list[list[Segment]] = []
    if not _expand_atoms(atoms, results):
        return [[("unknown", "")]]
    return [_merge(r) for r in results]


def _merge(atoms: Iterable[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for kind, text in atoms:
        if out and out[-1][0] == kind and kind in ("lit", "raw"):
            out[-1] = (kind, out[-1][1] + text)
        else:
            out.append((kind, text))
    return out


def _expand_atoms(atoms: list[Segment], results: list[list[Segment]]) -> bool:
    """Append the expansions of ``atoms`` to ``results``; False past the cap."""
    found = _find_brace(atoms)
    if found is None:
        results.append(atoms)
        return len(results) <= MAX_BRACE_WORDS
    start, end, alternatives = found
    for alternative in alternatives:
        if not _expand_atoms(atoms[:start] + alternative + atoms[end + 1 :], results):
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


# --- how much a path can reach -------------------------------------------


def _is_glob(component: list[Segment]) -> bool:
    return any(kind == "raw" and (_GLOB.search(text) or "(" in text) for kind, text in component)


def _matches_nearly_everything(component: list[Segment]) -> bool:
    # `*`, `.*`, `*.*`, `[a-z]*`, extglobs: nothing specific is left after
    # removing the pattern syntax (`*.o` keeps the `o`).
    rest: list[str] = []
    for kind, text in component:
        if kind == "raw":
            if "(" in text:
                return True
            rest.append(_BRACKET.sub("", text).replace("*", "").replace("?", ""))
        elif kind == "lit":
            rest.append(text)
        else:
            return False
    return set("".join(rest)) <= {"."}


def breadth(value: Value) -> int:
    """NARROW, HERE or SYSTEM: how much a path argument can reach.

    Expansions that may be empty cut the path there (``"$DIR"/*`` may be
    ``/*``), a glob that matches nearly everything stands for its directory,
    and ``..`` is followed lexically.
    """
    if not any(text or kind not in ("lit", "raw") for kind, text in value.segments):
        return NARROW  # an empty argument names no file
    components: list[list[Segment]] = [[]]
    for kind, text in value.segments:
        if kind in ("lit", "raw"):
            pieces = text.split("/")
            for i, piece in enumerate(pieces):
                if i:
                    components.append([])
                if piece:
                    components[-1].append((kind, piece))
        else:
            components[-1].append((kind, text))
    first = components[0]
    if len(components) > 1 and not first:
        base, rest = "abs", components[1:]
    elif first == [("home", "")]:
        base, rest = "home", components[1:]
    elif first == [("pwd", "")]:
        base, rest = "rel", components[1:]
    elif first and all(kind == "unknown" for kind, _ in first):
        return SYSTEM
    else:
        base, rest = "rel", components
    names: list[str] = []
    up = 0
    for component in rest:
        if not component:
            continue
        kinds = {kind for kind, _ in component}
        if kinds == {"unknown"}:
            break
        if kinds <= {"lit", "raw"}:
            text = "".join(t for _, t in component)
            if text == ".":
                continue
            if text == "..":
                if names:
                    names.pop()
                elif base == "rel":
                    up += 1
                elif base == "home":
                    base, names = "abs", ["home"]
                continue
            if _is_glob(component) and _matches_nearly_everything(component):
                break
        names.append("".join(t for _, t in component) or "?")
    return _level(base, names, up)


def _level(base: str, names: list[str], up: int) -> int:
    if base == "abs":
        if len(names) <= 1:
            return SYSTEM
        if len(names) == 2 and (
            names[0] in _SYSTEM_PARENTS or tuple(names) in _SYSTEM_SECOND_LEVEL
        ):
            return SYSTEM
        return NARROW
    if base == "home":
        return NARROW if names else SYSTEM
    if names:
        return NARROW
    return HERE if up <= 1 else SYSTEM
