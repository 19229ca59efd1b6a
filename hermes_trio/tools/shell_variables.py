"""What a script's variables can hold, as far as reading it tells.

Every way the script sets a variable is collected: assignments (also after
``local``/``declare``/``export``/``readonly``), ``for``/``select`` loops,
and the builtins that set the names they are given (``read``, ``mapfile``,
``getopts``, ``printf -v``, ``let``, ``unset``).  Then a variable is

- a **constant** when every assignment gives it the same literal text
  (``FLAGS=-rf``, ``D=/home``);
- **temporary** when every assignment is ``NAME=$(mktemp …)``, a fresh
  temporary directory (``tmp=$(mktemp -d); …; rm -rf "$tmp"``);
- a **loop** variable when only ``for`` loops set it (the judge binds it to
  each word of the loop in turn);
- the **environment's** when the script never sets it, its name is in
  capitals, and nothing in the script can set variables it does not name
  (``eval``, ``source``/``.``, a computed name in ``declare``/``export``):
  the user chose its value, not the model.

Anything else may hold anything.  Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

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
from hermes_trio.tools.shell_words import word_literal

__all__ = ["Facts", "facts_of"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*$")
_ASSIGNED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?)=")
_DECLARATIONS = frozenset({"local", "declare", "typeset", "export", "readonly"})
# Builtins that set the variables named in their arguments.
_SETTERS = frozenset({"read", "mapfile", "readarray", "getopts", "printf", "let", "unset"})
_ANYTHING = frozenset({"eval", "source", "."})
# Variables the shell itself sets.
_SHELL_SET = frozenset(
    "BASH_ARGC BASH_ARGV BASH_ARGV0 BASH_COMMAND BASH_LINENO BASH_REMATCH BASH_SOURCE "
    "BASH_SUBSHELL BASHPID COPROC DIRSTACK EPOCHREALTIME EPOCHSECONDS FUNCNAME GROUPS "
    "HISTCMD LINENO MAPFILE OLDPWD OPTARG OPTIND PIPESTATUS PPID RANDOM REPLY SECONDS "
    "SRANDOM READLINE_LINE READLINE_POINT COMP_WORDS COMP_CWORD IFS".split()
)
# "${NAME:=x}" and "${NAME=x}" assign too.
_DEFAULT_ASSIGN = frozenset({"=", ":="})


@dataclass(frozen=True)
class Facts:
    constants: Mapping[str, str] = field(default_factory=dict)
    temporary: frozenset[str] = frozenset()
    loops: frozenset[str] = frozenset()
    # Every name the script (or an enclosing one) may set.
    assigned: frozenset[str] = frozenset()
    # The script may set variables it does not name.
    dynamic: bool = False

    def from_environment(self, name: str) -> bool:
        """Whether ``$name`` is the user's environment variable."""
        return (
            not self.dynamic
            and name not in self.assigned
            and name not in _SHELL_SET
            and _ENV_NAME.match(name) is not None
        )


_OTHER = "\0other"
_MKTEMP = "\0mktemp"
_LOOP = "\0loop"


def facts_of(script: Script, inherited: Facts | None = None) -> Facts:
    """The facts about ``script``'s variables; ``inherited`` are those of an
    enclosing script, which hold unless ``script`` sets the name itself."""
    outer = inherited or Facts()
    kinds: dict[str, set[str]] = {}
    dynamic = outer.dynamic
    for node in _nodes(script):
        if isinstance(node, Var):
            if node.op[:2] in _DEFAULT_ASSIGN or node.op[:1] in _DEFAULT_ASSIGN:
                kinds.setdefault(node.name, set()).add(_OTHER)
            continue
        if isinstance(node, Compound):
            if node.kind in ("for", "select") and node.words:
                kinds.setdefault(node.words[0].text, set()).add(_LOOP)
            continue
        name = word_literal(node.words[0]) if node.words else None
        if name in _ANYTHING:
            dynamic = True
        for word in node.assigns:
            _note(word, kinds)
        if name in _DECLARATIONS:
            for word in node.words[1:]:
                text = word_literal(word)
                if text is None and not isinstance(word.parts[0], Lit):
                    dynamic = True  # export "$k=$v", declare $(cat vars)
                _note(word, kinds)
        elif name in _SETTERS:
            for word in node.words[1:]:
                text = word_literal(word)
                if text is None:
                    continue
                m = _ASSIGNED.match(text)
                target = m.group(1) if m else text
                if _NAME.match(target):
                    kinds.setdefault(target, set()).add(_OTHER)
    constants = dict(outer.constants)
    temporary = set(outer.temporary)
    for name, seen in kinds.items():
        constants.pop(name, None)
        temporary.discard(name)
        if len(seen) == 1:
            (kind,) = seen
            if kind == _MKTEMP:
                temporary.add(name)
            elif not kind.startswith("\0"):
                constants[name] = kind
    loops = {name for name, seen in kinds.items() if seen == {_LOOP}}
    if dynamic:
        # eval or source may set any of them to anything.
        constants, temporary, loops = {}, set(), set()
    return Facts(
        constants,
        frozenset(temporary),
        frozenset(loops),
        outer.assigned | kinds.keys(),
        dynamic,
    )


def _note(word: Word, kinds: dict[str, set[str]]) -> None:
    first = word.parts[0] if word.parts else None
    if not isinstance(first, Lit) or first.quoted:
        return
    m = _ASSIGNED.match(first.text)
    if not m:
        return
    names = kinds.setdefault(m.group(1), set())
    plain = not m.group(2) and not m.group(3)
    rest = [Lit(first.text[m.end() :], False), *word.parts[1:]]
    rest = [p for p in rest if not (isinstance(p, Lit) and p.text == "")]
    if plain and len(rest) == 1 and isinstance(rest[0], CmdSub) and _is_mktemp(rest[0]):
        names.add(_MKTEMP)
        return
    if plain and all(isinstance(p, Lit) for p in rest):
        unquoted = [p for p in rest if isinstance(p, Lit) and not p.quoted]
        # An unquoted ~ is expanded in an assignment; leave those unknown.
        if not any(p.text.startswith("~") or ":~" in p.text for p in unquoted):
            names.add("".join(p.text for p in rest if isinstance(p, Lit)))
            return
    names.add(_OTHER)


def _is_mktemp(sub: CmdSub) -> bool:
    items = sub.script.items
    if len(items) != 1 or len(items[0].pipelines) != 1:
        return False
    commands = items[0].pipelines[0].commands
    if len(commands) != 1 or not isinstance(commands[0], Simple):
        return False
    words = commands[0].words
    return bool(words) and word_literal(words[0]) == "mktemp"


def _nodes(script: Script) -> Iterator[Simple | Compound | Var]:
    """Every simple and compound command and every variable reference in
    ``script``, nested ones included."""
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
            stack.extend(r.heredoc.body for r in node.redirects if r.heredoc and r.heredoc.body)
        elif isinstance(node, Compound):
            yield node
            stack.extend(node.bodies)
            stack.extend(node.subs)
            stack.extend(node.words)
        else:
            for part in node.parts:
                if isinstance(part, CmdSub | ProcSub):
                    stack.append(part.script)
                elif isinstance(part, Var):
                    yield part
                    stack.extend(part.subs)
                elif isinstance(part, Arith):
                    stack.extend(part.subs)
                elif isinstance(part, Array):
                    stack.extend(part.words)
