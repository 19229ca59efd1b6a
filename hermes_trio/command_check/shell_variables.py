"""What a script's variables can hold, as far as reading it tells.

Two questions, two answers:

- **Which variables might the script set?**  (:func:`facts_of`)  Every way
  it sets one is collected: assignments (also after ``local``/``declare``/
  ``export``/``readonly``), ``for``/``select`` loops, ``${NAME:=x}``, and the
  builtins that set the names they are given (``read``, ``mapfile``,
  ``getopts``, ``printf -v``, ``let``, ``unset``).  A variable the script
  never sets, whose name is in capitals, is the **user's environment** —
  unless something in the script can set variables it does not name
  (``eval``, ``source``/``.``, a computed name in ``declare``/``export``):
  the user chose its value, not the model.
- **What does an assignment give a variable?**  (:func:`assignment`)  A
  literal text (``FLAGS=-rf``, ``D=/home``), a fresh temporary directory
  (``tmp=$(mktemp -d)``), or something unknown.  The policy's judge applies
  them in the order the script runs, so a variable assigned only in a
  subshell, after ``&&`` or later in the script is not taken for set.

Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from hermes_trio.command_check.shell_syntax import (
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
from hermes_trio.command_check.shell_words import word_literal

__all__ = ["Facts", "Known", "assignment", "facts_of"]

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

# What a variable holds: ("lit", text), ("item", None) for a mktemp
# result, ("value", Value) for a for loop's word, or ("unknown", None).
Known = tuple[str, object]


@dataclass(frozen=True)
class Facts:
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


def facts_of(script: Script, inherited: Facts | None = None) -> Facts:
    """Which variables ``script`` may set; ``inherited`` are the facts of an
    enclosing script."""
    outer = inherited or Facts()
    names: set[str] = set()
    dynamic = outer.dynamic
    for node in _nodes(script):
        if isinstance(node, Var):
            if node.op[:1] == "=" or node.op[:2] == ":=":
                names.add(node.name)
            continue
        if isinstance(node, Compound):
            if node.kind in ("for", "select") and node.words:
                names.add(node.words[0].text)
            continue
        name = word_literal(node.words[0]) if node.words else None
        if name in _ANYTHING:
            dynamic = True
        for word in node.assigns:
            _note(word, names)
        if name in _DECLARATIONS:
            for word in node.words[1:]:
                if word_literal(word) is None and not isinstance(word.parts[0], Lit):
                    dynamic = True  # export "$k=$v", declare $(cat vars)
                _note(word, names)
        elif name in _SETTERS:
            for word in node.words[1:]:
                text = word_literal(word)
                if text is None:
                    continue
                m = _ASSIGNED.match(text)
                target = m.group(1) if m else text
                if _NAME.match(target):
                    names.add(target)
    return Facts(outer.assigned | names, dynamic)


def _note(word: Word, names: set[str]) -> None:
    first = word.parts[0] if word.parts else None
    if isinstance(first, Lit) and not first.quoted:
        m = _ASSIGNED.match(first.text)
        if m:
            names.add(m.group(1))


def assignment(word: Word) -> tuple[str | None, Known]:
    """The variable an assignment word sets, and what it gives it."""
    first = word.parts[0] if word.parts else None
    if not isinstance(first, Lit) or first.quoted:
        return None, ("unknown", None)
    m = _ASSIGNED.match(first.text)
    if not m:
        return None, ("unknown", None)
    name = m.group(1)
    if m.group(2) or m.group(3):
        return name, ("unknown", None)  # an array element, or +=
    rest = [Lit(first.text[m.end() :], False), *word.parts[1:]]
    rest = [p for p in rest if not (isinstance(p, Lit) and p.text == "")]
    if len(rest) == 1 and isinstance(rest[0], CmdSub) and _is_mktemp(rest[0]):
        return name, ("item", None)
    if all(isinstance(p, Lit) for p in rest):
        unquoted = [p for p in rest if isinstance(p, Lit) and not p.quoted]
        # An unquoted ~ is expanded in an assignment; leave those unknown.
        if not any(p.text.startswith("~") or ":~" in p.text for p in unquoted):
            return name, ("lit", "".join(p.text for p in rest if isinstance(p, Lit)))
    return name, ("unknown", None)


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
