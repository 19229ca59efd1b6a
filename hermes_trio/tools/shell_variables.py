"""Which variables of a script certainly hold a fresh temporary directory.

``tmp=$(mktemp -d); …; rm -rf "$tmp"`` is an everyday idiom, and a
recursive delete of an unknown ``$tmp`` would otherwise need approval.  A
variable counts only when every way the script sets it is ``NAME=$(mktemp
…)`` (also after ``local``/``declare``/``export``/``readonly``): a loop
variable, ``read``, ``printf -v``, any other value, or an ``eval``/``source``
anywhere in the script (which could set anything) disqualifies it.  Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from hermes_trio.tools.shell_syntax import (
    Arith,
    Array,
    CmdSub,
    Command,
    Compound,
    FuncDef,
    Lit,
    ProcSub,
    Script,
    Simple,
    Var,
    Word,
)

__all__ = ["temporary_variables"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
_ASSIGNED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?)=")
_DECLARATIONS = frozenset({"local", "declare", "typeset", "export", "readonly"})
# Builtins that set the variables named in their arguments.
_SETTERS = frozenset({"read", "mapfile", "readarray", "getopts", "printf", "let", "unset"})
_ANYTHING = frozenset({"eval", "source", "."})


def temporary_variables(script: Script, inherited: frozenset[str] = frozenset()) -> frozenset[str]:
    """Names set only from ``mktemp`` in ``script``; ``inherited`` names (set
    so by an enclosing script) stay temporary unless ``script`` sets them
    otherwise."""
    kinds: dict[str, set[bool]] = {}
    for command in _commands(script):
        if isinstance(command, Compound):
            if command.kind in ("for", "select") and command.words:
                kinds.setdefault(command.words[0].text, set()).add(False)
            continue
        name = _literal(command.words[0]) if command.words else None
        if name in _ANYTHING:
            return frozenset()
        for word in command.assigns:
            _note(word, kinds)
        if name in _DECLARATIONS:
            for word in command.words[1:]:
                _note(word, kinds)
        elif name in _SETTERS:
            for word in command.words[1:]:
                text = _literal(word) or ""
                m = _ASSIGNED.match(text)
                target = m.group(1) if m else text
                if _NAME.match(target):
                    kinds.setdefault(target, set()).add(False)
    own = {name for name, seen in kinds.items() if seen == {True}}
    return frozenset((inherited - kinds.keys()) | own)


def _note(word: Word, kinds: dict[str, set[bool]]) -> None:
    first = word.parts[0] if word.parts else None
    if not isinstance(first, Lit) or first.quoted:
        return
    m = _ASSIGNED.match(first.text)
    if not m:
        return
    plain = not m.group(2) and not m.group(3) and m.end() == len(first.text)
    rest = [p for p in word.parts[1:] if not (isinstance(p, Lit) and p.text == "")]
    is_mktemp = plain and len(rest) == 1 and isinstance(rest[0], CmdSub) and _is_mktemp(rest[0])
    kinds.setdefault(m.group(1), set()).add(is_mktemp)


def _is_mktemp(sub: CmdSub) -> bool:
    items = sub.script.items
    if len(items) != 1 or len(items[0].pipelines) != 1:
        return False
    commands = items[0].pipelines[0].commands
    if len(commands) != 1 or not isinstance(commands[0], Simple):
        return False
    words = commands[0].words
    return bool(words) and _literal(words[0]) == "mktemp"


def _literal(word: Word) -> str | None:
    if all(isinstance(p, Lit) for p in word.parts):
        return "".join(p.text for p in word.parts if isinstance(p, Lit))
    return None


def _commands(script: Script) -> Iterator[Simple | Compound]:
    """Every simple and compound command in ``script``, nested ones included."""
    stack: list[Script | Command | Word] = [script]
    while stack:
        node = stack.pop()
        if isinstance(node, Script):
            for item in node.items:
                for pipeline in item.pipelines:
                    stack.extend(pipeline.commands)
        elif isinstance(node, FuncDef):
            stack.append(node.body)
        elif isinstance(node, Simple):
            yield node
            stack.extend(node.assigns)
            stack.extend(node.words)
            stack.extend(r.target for r in node.redirects if r.target is not None)
        elif isinstance(node, Compound):
            yield node
            stack.extend(node.bodies)
            stack.extend(node.subs)
            stack.extend(node.words)
        else:
            for part in node.parts:
                if isinstance(part, CmdSub | ProcSub):
                    stack.append(part.script)
                elif isinstance(part, Var | Arith):
                    stack.extend(part.subs)
                elif isinstance(part, Array):
                    stack.extend(part.words)
