"""A parser for the part of POSIX sh (and common bash) that a command policy
must read: words with their quoting, operators, redirections, here-documents,
command and process substitution, compound commands and function
definitions.

It is pure (no I/O) and never executes or expands anything; it only records
the structure, so a policy can ask "which commands run, with which words".
Quoting is resolved the way the shell resolves it (``\\rm``, ``"rm"``,
``r''m`` and ``$'\\x72m'`` are all the word ``rm``); expansions stay
symbolic (:class:`Var`, :class:`CmdSub`, ...).

What it does not understand raises :class:`ShellSyntaxError`, and so does
nesting deeper than :data:`MAX_DEPTH`: a caller that judges safety must treat
that as "cannot tell".  Work is linear in the input, apart from a bounded
look-back when ``$((`` turns out to be a command substitution.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "MAX_DEPTH",
    "PLACEHOLDERS",
    "AndOr",
    "Arith",
    "Array",
    "CmdSub",
    "Command",
    "Compound",
    "FuncDef",
    "HereDoc",
    "Lit",
    "Opaque",
    "Part",
    "Pipeline",
    "ProcSub",
    "Redirect",
    "Script",
    "ShellSyntaxError",
    "Simple",
    "Var",
    "Word",
    "decode_escapes",
    "parse",
]

# Substitutions, compound commands and inline scripts nested deeper than this
# are refused rather than followed (each level costs Python stack frames).
MAX_DEPTH = 24

# Characters a caller may put into text it hands back to the parser, standing
# for a value it cannot know: the parser turns each into an Opaque part.
PLACEHOLDERS: dict[str, str] = {
    "\ue000": "unknown",
    "\ue001": "home",
    "\ue002": "pwd",
    "\ue003": "item",
    "\ue004": "env",
    "\ue005": "top",
}


class ShellSyntaxError(ValueError):
    """Text the parser cannot read; ``str()`` says what and where."""


# --- words ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lit:
    """Literal text; ``quoted`` text is not subject to globbing, braces or ``~``."""

    text: str
    quoted: bool


@dataclass(frozen=True, slots=True)
class Var:
    """``$name`` or ``${[#!]name[op...]}``; ``subs`` are substitutions inside
    ``op``.  ``quoted``: inside double quotes (not split into words)."""

    name: str
    op: str = ""
    prefix: str = ""
    subs: tuple[Script, ...] = ()
    quoted: bool = False


@dataclass(frozen=True, slots=True)
class CmdSub:
    """``$(...)`` or a backquoted command; ``quoted`` as for :class:`Var`."""

    script: Script
    quoted: bool = False


@dataclass(frozen=True, slots=True)
class ProcSub:
    """``<(...)`` or ``>(...)``."""

    script: Script
    direction: Literal["<", ">"]


@dataclass(frozen=True, slots=True)
class Arith:
    """``$((...))``; ``subs`` are the command substitutions inside."""

    subs: tuple[Script, ...]


@dataclass(frozen=True, slots=True)
class Array:
    """The ``(a b c)`` of an array assignment."""

    words: tuple[Word, ...]


@dataclass(frozen=True, slots=True)
class Opaque:
    """A placeholder character (see :data:`PLACEHOLDERS`)."""

    kind: str
    quoted: bool = False


Part = Lit | Var | CmdSub | ProcSub | Arith | Array | Opaque


@dataclass(frozen=True, slots=True)
class Word:
    parts: tuple[Part, ...]
    # The source text, for messages.
    text: str


# --- commands -------------------------------------------------------------


@dataclass(slots=True)
class HereDoc:
    delimiter: str
    quoted: bool
    strip_tabs: bool
    # Filled in when the parser reaches the line after the redirection.
    body: Word | None = None


@dataclass(frozen=True, slots=True)
class Redirect:
    op: str
    fd: str | None
    target: Word | None
    heredoc: HereDoc | None = None


@dataclass(frozen=True, slots=True)
class Simple:
    assigns: tuple[Word, ...]
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...]


@dataclass(frozen=True, slots=True)
class Compound:
    """``{ }``, ``( )``, if, for, while, until, case, ``(( ))`` and ``[[ ]]``.

    ``words`` holds a for/select loop's variable and list, a case's subject
    and patterns, or the words of ``[[ ]]``."""

    kind: str
    bodies: tuple[Script, ...] = ()
    words: tuple[Word, ...] = ()
    subs: tuple[Script, ...] = ()
    redirects: tuple[Redirect, ...] = ()


@dataclass(frozen=True, slots=True)
class FuncDef:
    name: str
    body: Command


Command = Simple | Compound | FuncDef


@dataclass(frozen=True, slots=True)
class Pipeline:
    commands: tuple[Command, ...]


@dataclass(frozen=True, slots=True)
class AndOr:
    pipelines: tuple[Pipeline, ...]
    background: bool = False
    # The operator before each pipeline after the first: "&&" or "||".
    ops: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Script:
    items: tuple[AndOr, ...] = field(default=())


Meter = Callable[[int], None]
# What the meter is told for each command parsed, on top of its characters:
# a command costs about as much to read as this many characters.
COMMAND_COST = 16


def parse(text: str, *, depth: int = 0, meter: Meter | None = None) -> Script:
    """The syntax tree of ``text``; raises :class:`ShellSyntaxError`.

    ``meter`` is told the length of every text the parser reads, ``text``
    and the parts it reads again (backquotes, here-documents), so a caller
    can bound the total work; it may raise to stop the parse."""
    return _Parser(text, depth, meter).script()


# --- lexing helpers -------------------------------------------------------

# Characters that end an unquoted word.
_BREAK = frozenset(" \t\n;&|<>()")
# A run of characters that need no special handling inside an unquoted word.
_PLAIN = re.compile(r"[^ \t\n;&|<>()\\'\"$`\ue000-\ue003]+")
_DQ_PLAIN = re.compile(r"[^\"\\$`\ue000-\ue003]+")
_HEREDOC_PLAIN = re.compile(r"[^\\$`\ue000-\ue003]+")
_OPERATOR = re.compile(r"&&|\|\||;;&|;;|;&|\|&|&>>|&>|>>|>\||>&|<<<|<<-|<<|<>|<&|[;&|()<>\n]")
_REDIRECT_OPS = frozenset({">", "<", ">>", ">|", ">&", "<&", "<>", "&>", "&>>", "<<", "<<-", "<<<"})
_RESERVED = re.compile(
    r"(?:if|then|else|elif|fi|do|done|case|esac|while|until|for|select|in|function"
    r"|\{|\}|!|\[\[)(?=[ \t\n;&|<>()]|$)"
)
_COND_END = re.compile(r"\]\](?=[ \t\n;&|<>()]|$)")
_COND_OP = re.compile(r"&&|\|\||[&|<>()!]")
_IO_NUMBER = re.compile(r"(\d+|\{[A-Za-z_][A-Za-z0-9_]*\})(?=[<>])")
_PARAM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+|[@*#?$!\-]")
_ASSIGN_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=$")
_EXTGLOB = frozenset("@!+*?")
# First characters that can start a blank run, an operator, a reserved word
# or an io number: the hot paths test these before running a regex.
_BLANK_START = frozenset(" \t\\#")
_OPERATOR_START = frozenset(";&|()<>\n")
_RESERVED_START = frozenset("iteEfdcwusn{}![")
_IO_START = frozenset("0123456789{")
_BLANKS = re.compile(r"(?:[ \t]+|\\\n)+")

_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_NUMERIC_ESCAPE = re.compile(
    r"([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})"
)


def decode_escapes(text: str) -> str:
    """Backslash escapes as ``$'...'``, ``echo -e`` and ``printf`` decode them."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[nxt])
            i += 2
            continue
        if nxt == "c" and i + 2 < n:
            out.append(chr(ord(text[i + 2]) & 0x1F))
            i += 3
            continue
        m = _NUMERIC_ESCAPE.match(text, i + 1)
        if m:
            digits = m.group(1) or m.group(2) or m.group(3) or m.group(4)
            base = 8 if m.group(1) else 16
            code = int(digits, base)
            out.append(chr(code) if code < 0x110000 else "\ufffd")
            i = m.end()
            continue
        out.append("\\" + nxt)
        i += 2
    return "".join(out)


class _Parser:
    def __init__(self, src: str, depth: int, meter: Meter | None = None) -> None:
        if depth > MAX_DEPTH:
            raise ShellSyntaxError("nested too deeply")
        if meter is not None:
            meter(len(src))
        self.meter = meter
        self.src = src
        self.n = len(src)
        self.pos = 0
        self.depth = depth
        self.pending: list[HereDoc] = []

    # -- errors and depth --

    def error(self, message: str) -> ShellSyntaxError:
        return ShellSyntaxError(f"{message} (at character {self.pos + 1})")

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ShellSyntaxError("nested too deeply")

    def leave(self) -> None:
        self.depth -= 1

    # -- low-level scanning --

    def skip_blanks(self) -> None:
        src = self.src
        if self.pos < self.n and src[self.pos] not in _BLANK_START:
            return
        while self.pos < self.n:
            m = _BLANKS.match(src, self.pos)
            if m:
                self.pos = m.end()
                continue
            if src[self.pos] == "#":
                end = src.find("\n", self.pos)
                self.pos = self.n if end < 0 else end
            break

    def newline(self) -> None:
        self.pos += 1
        if self.pending:
            self.read_heredocs()

    def skip_linebreaks(self) -> None:
        while True:
            self.skip_blanks()
            if self.pos < self.n and self.src[self.pos] == "\n":
                self.newline()
                continue
            return

    def peek_op(self) -> str | None:
        if self.pos >= self.n:
            return None
        src = self.src
        c = src[self.pos]
        if c not in _OPERATOR_START:
            return None
        if c in "<>" and src.startswith("(", self.pos + 1):
            return None  # process substitution: a word
        m = _OPERATOR.match(src, self.pos)
        return m.group() if m else None

    def take_op(self, op: str) -> None:
        if op == "\n":
            self.newline()
        else:
            self.pos += len(op)

    def peek_reserved(self) -> str | None:
        if self.pos >= self.n or self.src[self.pos] not in _RESERVED_START:
            return None
        m = _RESERVED.match(self.src, self.pos)
        return m.group() if m else None

    def expect_reserved(self, word: str) -> None:
        self.skip_linebreaks()
        if self.peek_reserved() != word:
            found = self.src[self.pos : self.pos + 10] or "end of input"
            raise self.error(f"expected '{word}', found {found!r}")
        self.pos += len(word)

    def expect_op(self, op: str) -> None:
        self.skip_blanks()
        if self.peek_op() != op:
            found = self.src[self.pos : self.pos + 10] or "end of input"
            raise self.error(f"expected '{op}', found {found!r}")
        self.take_op(op)

    # -- here-documents --

    def read_heredocs(self) -> None:
        src = self.src
        for doc in self.pending:
            lines: list[str] = []
            while self.pos < self.n:
                end = src.find("\n", self.pos)
                line = src[self.pos : self.n if end < 0 else end]
                self.pos = self.n if end < 0 else end + 1
                check = line.lstrip("\t") if doc.strip_tabs else line
                if check == doc.delimiter:
                    break
                lines.append(check + "\n")
            body = "".join(lines)
            if doc.quoted:
                doc.body = Word((Lit(body, True),), body)
            else:
                inner = _Parser(body, self.depth + 1, self.meter)
                doc.body = Word(tuple(inner.quoted_parts(heredoc=True)), body)
        self.pending.clear()

    # -- words --

    def word(self) -> Word | None:
        src = self.src
        start = self.pos
        parts: list[Part] = []
        while self.pos < self.n:
            c = src[self.pos]
            m = _PLAIN.match(src, self.pos)
            if m:
                parts.append(Lit(m.group(), False))
                self.pos = m.end()
                continue
            if c in "<>":
                if src.startswith("(", self.pos + 1):
                    parts.append(self.procsub("<" if c == "<" else ">"))
                    continue
                break
            if c == "(":
                last = parts[-1] if parts else None
                if isinstance(last, Lit) and not last.quoted and last.text[-1:] in _EXTGLOB:
                    # An extglob pattern such as !(keep) or *(x).
                    parts.append(Lit(self.balanced_parens(), False))
                    continue
                if parts and _ASSIGN_PREFIX.match(src, start, self.pos):
                    parts.append(self.array())
                    continue
                break
            if c in _BREAK:
                break
            if c == "\\":
                if self.pos + 1 >= self.n:
                    parts.append(Lit("\\", True))
                    self.pos += 1
                elif src[self.pos + 1] == "\n":
                    self.pos += 2
                else:
                    parts.append(Lit(src[self.pos + 1], True))
                    self.pos += 2
                continue
            if c == "'":
                end = src.find("'", self.pos + 1)
                if end < 0:
                    raise self.error("unterminated single quote")
                parts.append(Lit(src[self.pos + 1 : end], True))
                self.pos = end + 1
                continue
            if c == '"':
                self.pos += 1
                parts.extend(self.quoted_parts(heredoc=False))
                if not parts or not isinstance(parts[-1], Lit) or not parts[-1].quoted:
                    parts.append(Lit("", True))  # "" is an (empty) word
                continue
            if c == "$":
                parts.extend(self.dollar(quoted=False))
                continue
            if c == "`":
                parts.append(self.backquote())
                continue
            if c in PLACEHOLDERS:
                parts.append(Opaque(PLACEHOLDERS[c], False))
                self.pos += 1
                continue
            break  # pragma: no cover - every character is handled above
        if self.pos == start:
            return None
        return Word(tuple(parts), src[start : self.pos])

    def balanced_parens(self) -> str:
        src = self.src
        start = self.pos
        depth = 0
        while self.pos < self.n:
            c = src[self.pos]
            if c == "\\":
                self.pos += 2
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    self.pos += 1
                    return src[start : self.pos]
            self.pos += 1
        raise self.error("unterminated pattern")

    def array(self) -> Array:
        self.pos += 1  # (
        words: list[Word] = []
        while True:
            self.skip_linebreaks()
            if self.pos >= self.n:
                raise self.error("unterminated array")
            if self.src[self.pos] == ")":
                self.pos += 1
                return Array(tuple(words))
            word = self.word()
            if word is None:
                raise self.error(f"unexpected {self.src[self.pos]!r} in an array")
            words.append(word)

    def quoted_parts(self, *, heredoc: bool) -> list[Part]:
        """Parts of a double-quoted string (after the opening quote), or of a
        here-document body when ``heredoc`` (which ends at the end of input)."""
        src = self.src
        plain = _HEREDOC_PLAIN if heredoc else _DQ_PLAIN
        escapable = "$`\\\n" if heredoc else '$`"\\\n'
        parts: list[Part] = []
        while self.pos < self.n:
            c = src[self.pos]
            m = plain.match(src, self.pos)
            if m:
                parts.append(Lit(m.group(), True))
                self.pos = m.end()
                continue
            if c == '"':
                self.pos += 1
                return parts
            if c == "\\":
                nxt = src[self.pos + 1 : self.pos + 2]
                if nxt and nxt in escapable:
                    if nxt != "\n":
                        parts.append(Lit(nxt, True))
                    self.pos += 2
                else:
                    parts.append(Lit("\\", True))
                    self.pos += 1
                continue
            if c == "$":
                parts.extend(self.dollar(quoted=True))
                continue
            if c == "`":
                parts.append(self.backquote(quoted=True))
                continue
            parts.append(Opaque(PLACEHOLDERS[c], True))
            self.pos += 1
        if heredoc:
            return parts
        raise self.error("unterminated double quote")

    def dollar(self, *, quoted: bool) -> list[Part]:
        src = self.src
        nxt = src[self.pos + 1 : self.pos + 2]
        if nxt == "'" and not quoted:
            return [self.ansi_c()]
        if nxt == '"' and not quoted:
            self.pos += 2
            return [*self.quoted_parts(heredoc=False), Lit("", True)]
        if nxt == "(":
            if src.startswith("((", self.pos + 1):
                arith = self.arith(self.pos + 3)
                if arith is not None:
                    return [arith]
            self.pos += 2
            return [CmdSub(self.until_paren(), quoted)]
        if nxt == "{":
            return [self.braced_param(quoted)]
        m = _PARAM.match(src, self.pos + 1)
        if m:
            name = m.group()
            if name[0].isdigit():
                name = name[0]  # $10 is ${1}0
            self.pos += 1 + len(name)
            return [Var(name, quoted=quoted)]
        self.pos += 1
        return [Lit("$", quoted)]

    def ansi_c(self) -> Lit:
        src = self.src
        i = self.pos + 2
        start = i
        while i < self.n:
            c = src[i]
            if c == "\\":
                i += 2
                continue
            if c == "'":
                self.pos = i + 1
                return Lit(decode_escapes(src[start:i]), True)
            i += 1
        raise self.error("unterminated $'...' string")

    def arith(self, start: int) -> Arith | None:
        """``$((...))`` from just after ``$((``, or None if it is really ``$( (...) )``."""
        saved = self.pos
        self.pos = start
        src = self.src
        depth = 0
        subs: list[Script] = []
        while self.pos < self.n:
            c = src[self.pos]
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    if src.startswith(")", self.pos + 1):
                        self.pos += 2
                        return Arith(tuple(subs))
                    break
                depth -= 1
            elif c == "$":
                subs.extend(_subs_of(self.dollar(quoted=True)))
                continue
            elif c == "`":
                subs.append(self.backquote().script)
                continue
            elif c == "\\":
                self.pos += 1
            elif c in "'\"":
                break
            self.pos += 1
        self.pos = saved
        return None

    def braced_param(self, quoted: bool) -> Var:
        src = self.src
        self.pos += 2  # ${
        prefix = ""
        if self.pos < self.n and src[self.pos] in "#!" and not src.startswith("}", self.pos + 1):
            prefix = src[self.pos]
            self.pos += 1
        m = _PARAM.match(src, self.pos)
        if not m:
            raise self.error("bad ${...} substitution")
        name = m.group()
        self.pos = m.end()
        op_start = self.pos
        subs: list[Script] = []
        while self.pos < self.n:
            c = src[self.pos]
            if c == "}":
                op = src[op_start : self.pos]
                self.pos += 1
                return Var(name, op, prefix, tuple(subs), quoted)
            if c == "\\":
                self.pos += 2
            elif c == "'":
                end = src.find("'", self.pos + 1)
                if end < 0:
                    raise self.error("unterminated single quote")
                self.pos = end + 1
            elif c == '"':
                self.pos += 1
                subs.extend(_subs_of(self.quoted_parts(heredoc=False)))
            elif c == "$":
                subs.extend(_subs_of(self.dollar(quoted=True)))
            elif c == "`":
                subs.append(self.backquote().script)
            else:
                self.pos += 1
        raise self.error("unterminated ${...}")

    def backquote(self, *, quoted: bool = False) -> CmdSub:
        src = self.src
        i = self.pos + 1
        out: list[str] = []
        while i < self.n:
            c = src[i]
            if c == "\\" and i + 1 < self.n:
                nxt = src[i + 1]
                out.append(nxt if nxt in "$`\\" else "\\" + nxt)
                i += 2
                continue
            if c == "`":
                self.pos = i + 1
                inner = _Parser("".join(out), self.depth + 1, self.meter)
                return CmdSub(inner.script(), quoted)
            out.append(c)
            i += 1
        raise self.error("unterminated backquote")

    def until_paren(self) -> Script:
        """A script up to the matching ``)``, which is consumed."""
        self.enter()
        body = self.list_(stop_words=frozenset(), stop_ops=frozenset({")"}))
        self.skip_linebreaks()
        if self.peek_op() != ")":
            raise self.error("unterminated $( or (")
        self.pos += 1
        self.leave()
        return body

    def procsub(self, direction: Literal["<", ">"]) -> ProcSub:
        self.pos += 2
        return ProcSub(self.until_paren(), direction)

    # -- grammar --

    def script(self) -> Script:
        body = self.list_(stop_words=frozenset(), stop_ops=frozenset())
        self.skip_linebreaks()
        if self.pos < self.n:
            raise self.error(f"unexpected {self.src[self.pos : self.pos + 10]!r}")
        if self.pending:
            self.read_heredocs()  # unterminated here-documents run to the end
        return body

    def list_(self, *, stop_words: frozenset[str], stop_ops: frozenset[str]) -> Script:
        items: list[AndOr] = []
        while True:
            self.skip_linebreaks()
            if self.pos >= self.n:
                break
            op = self.peek_op()
            if op is not None:
                if op in stop_ops:
                    break
                if op not in _REDIRECT_OPS and op != "(":
                    raise self.error(f"unexpected {op!r}")
            if self.peek_reserved() in stop_words:
                break
            pipelines, ops = self.and_or()
            self.skip_blanks()
            op = self.peek_op()
            if op in (";", "&"):
                self.pos += 1
                items.append(AndOr(pipelines, op == "&", ops))
                continue
            items.append(AndOr(pipelines, False, ops))
            if op == "\n":
                continue
            break
        return Script(tuple(items))

    def and_or(self) -> tuple[tuple[Pipeline, ...], tuple[str, ...]]:
        pipelines = [self.pipeline()]
        ops: list[str] = []
        while True:
            self.skip_blanks()
            op = self.peek_op()
            if op not in ("&&", "||"):
                return tuple(pipelines), tuple(ops)
            ops.append(op)
            self.pos += 2
            self.skip_linebreaks()
            pipelines.append(self.pipeline())

    def pipeline(self) -> Pipeline:
        self.skip_blanks()
        while self.peek_reserved() == "!":
            self.pos += 1
            self.skip_blanks()
        commands = [self.command()]
        while True:
            self.skip_blanks()
            op = self.peek_op()
            if op not in ("|", "|&"):
                return Pipeline(tuple(commands))
            self.pos += len(op)
            self.skip_linebreaks()
            commands.append(self.command())

    def command(self) -> Command:
        self.enter()
        if self.meter is not None:
            self.meter(COMMAND_COST)
        try:
            self.skip_blanks()
            word = self.peek_reserved()
            if word is not None and word != "!":
                handler = _COMPOUND_PARSERS.get(word)
                if handler is None:
                    if word == "in":
                        return self.simple()
                    raise self.error(f"unexpected '{word}'")
                kind, bodies, words, subs = handler(self)
            elif self.peek_op() == "(":
                kind, bodies, words, subs = self.subshell_or_arith()
            else:
                return self.simple()
            return Compound(kind, bodies, words, subs, self.trailing_redirects())
        finally:
            self.leave()

    def trailing_redirects(self) -> tuple[Redirect, ...]:
        redirects: list[Redirect] = []
        while True:
            self.skip_blanks()
            fd = None
            m = _IO_NUMBER.match(self.src, self.pos)
            if m and not self.src.startswith("(", m.end() + 1):
                fd = m.group(1)
                self.pos = m.end()
            op = self.peek_op()
            if op not in _REDIRECT_OPS:
                if fd is not None:
                    raise self.error("expected a redirection")
                return tuple(redirects)
            redirects.append(self.redirect(op, fd))

    def redirect(self, op: str, fd: str | None) -> Redirect:
        self.pos += len(op)
        self.skip_blanks()
        target = self.word()
        if target is None:
            raise self.error(f"expected a word after {op!r}")
        if op in ("<<", "<<-"):
            quoted = any(not isinstance(p, Lit) or p.quoted for p in target.parts)
            delimiter = "".join(p.text if isinstance(p, Lit) else "" for p in target.parts)
            if not all(isinstance(p, Lit) for p in target.parts):
                delimiter = target.text
            doc = HereDoc(delimiter, quoted, op == "<<-")
            self.pending.append(doc)
            return Redirect(op, fd, None, doc)
        return Redirect(op, fd, target)

    def simple(self) -> Command:
        src = self.src
        assigns: list[Word] = []
        words: list[Word] = []
        redirects: list[Redirect] = []
        while True:
            self.skip_blanks()
            if self.pos >= self.n:
                break
            m = _IO_NUMBER.match(src, self.pos) if src[self.pos] in _IO_START else None
            if m and not src.startswith("(", m.end() + 1):
                self.pos = m.end()
                op = self.peek_op()
                if op not in _REDIRECT_OPS:
                    raise self.error("expected a redirection")
                redirects.append(self.redirect(op, m.group(1)))
                continue
            op = self.peek_op()
            if op in _REDIRECT_OPS:
                redirects.append(self.redirect(op, None))
                continue
            if op is not None:
                break
            word = self.word()
            if word is None:
                break
            if not words and _is_assignment(word):
                assigns.append(word)
            else:
                words.append(word)
        if (
            len(words) == 1
            and not assigns
            and not redirects
            and self.peek_op() == "("
            and all(isinstance(p, Lit) for p in words[0].parts)
        ):
            return self.function_body(words[0].text)
        if not (assigns or words or redirects):
            found = src[self.pos : self.pos + 10] or "end of input"
            raise self.error(f"expected a command, found {found!r}")
        return Simple(tuple(assigns), tuple(words), tuple(redirects))

    def function_body(self, name: str) -> FuncDef:
        self.expect_op("(")
        self.expect_op(")")
        self.skip_linebreaks()
        return FuncDef(name, self.command())

    # compound commands: each returns (kind, bodies, words, subs)

    def group(self) -> tuple[str, tuple[Script, ...], tuple[Word, ...], tuple[Script, ...]]:
        self.pos += 1
        body = self.list_(stop_words=frozenset({"}"}), stop_ops=frozenset())
        self.expect_reserved("}")
        return "group", (body,), (), ()

    def subshell_or_arith(
        self,
    ) -> tuple[str, tuple[Script, ...], tuple[Word, ...], tuple[Script, ...]]:
        if self.src.startswith("((", self.pos):
            arith = self.arith(self.pos + 2)
            if arith is not None:
                return "arith", (), (), arith.subs
        self.pos += 1
        return "subshell", (self.until_paren(),), (), ()

    def if_(self) -> tuple[str, tuple[Script, ...], tuple[Word, ...], tuple[Script, ...]]:
        self.pos += 2
        bodies = [self.list_(stop_words=frozenset({"then"}), stop_ops=frozenset())]
        self.expect_reserved("then")
        branch_end = frozenset({"elif", "else", "fi"})
        bodies.append(self.list_(stop_words=branch_end, stop_ops=frozenset()))
        while True:
            self.skip_linebreaks()
            word = self.peek_reserved()
            if word == "elif":
                self.pos += 4
                bodies.append(self.list_(stop_words=frozenset({"then"}), stop_ops=frozenset()))
                self.expect_reserved("then")
                bodies.append(self.list_(stop_words=branch_end, stop_ops=frozenset()))
                continue
            if word == "else":
                self.pos += 4
                bodies.append(self.list_(stop_words=frozenset({"fi"}), stop_ops=frozenset()))
            self.expect_reserved("fi")
            return "if", tuple(bodies), (), ()

    def loop(self) -> tuple[str, tuple[Script, ...], tuple[Word, ...], tuple[Script, ...]]:
        kind = self.peek_reserved() or ""
        self.pos += len(kind)
        cond = self.list_(stop_words=frozenset({"do"}), stop_ops=frozenset())
        return kind, (cond, self.do_done()), (), ()

    def do_done(self) -> Script:
        self.skip_linebreaks()
        if self.peek_reserved() == "{":
            self.pos += 1
            body = self.list_(stop_words=frozenset({"}"}), stop_ops=frozenset())
            self.expect_reserved("}")
            return body
        self.expect_reserved("do")
        body = self.list_(stop_words=frozenset({"done"}), stop_ops=frozenset())
        self.expect_reserved("done")
        return body

    def for_(self) -> tuple[str, tuple[Script, ...], tuple[Word, ...], tuple[Script, ...]]:
        kind = self.peek_reserved() or ""
        self.pos += len(kind)
        self.skip_blanks()
        subs: tuple[Script, ...] = ()
        words: list[Word] = []
        if self.src.startswith("((", self.pos):
            arith = self.arith(self.pos + 2)
            if arith is None:
                raise self.error("bad for ((...)) header")
            subs = arith.subs
            self.skip_blanks()
            if self.peek_op() == ";":
                self.pos += 1
            return kind, (self.do_done(),), (), subs
        name = self.word()
        if name is None:
            raise self.error(f"expected a variable name after '{kind}'")
        self.skip_linebreaks()
        if self.peek_reserved() == "in":
            self.pos += 2
            while True:
                self.skip_blanks()
                op = self.peek_op()
                if op in (";", "\n"):
                    self.take_op(op)
                    break
                if op is not None or self.pos >= self.n:
                    break
                word = self.word()
                if word is None:
                    break
                words.append(word)
        elif self.peek_op() == ";":
            self.pos += 1
        # The loop variable first, then the words it takes.
        return kind, (self.do_done(),), (name, *words), subs

    def case(self) -> tuple[str, tuple[Script, ...], tuple[Word, ...], tuple[Script, ...]]:
        self.pos += 4
        self.skip_blanks()
        subject = self.word()
        if subject is None:
            raise self.error("expected a word after 'case'")
        words = [subject]
        bodies: list[Script] = []
        self.expect_reserved("in")
        ends = frozenset({";;", ";&", ";;&"})
        while True:
            self.skip_linebreaks()
            if self.peek_reserved() == "esac":
                self.pos += 4
                return "case", tuple(bodies), tuple(words), ()
            if self.peek_op() == "(":
                self.pos += 1
            while True:
                self.skip_blanks()
                pattern = self.word()
                if pattern is None:
                    raise self.error("expected a case pattern")
                words.append(pattern)
                self.skip_blanks()
                if self.peek_op() == "|":
                    self.pos += 1
                    continue
                break
            self.expect_op(")")
            bodies.append(self.list_(stop_words=frozenset({"esac"}), stop_ops=ends))
            self.skip_linebreaks()
            op = self.peek_op()
            if op in ends:
                self.pos += len(op)
            elif self.peek_reserved() != "esac":
                raise self.error("expected ';;' or 'esac'")

    def cond(self) -> tuple[str, tuple[Script, ...], tuple[Word, ...], tuple[Script, ...]]:
        self.pos += 2
        words: list[Word] = []
        while True:
            self.skip_blanks()
            if self.pos >= self.n:
                raise self.error("unterminated [[")
            if self.src[self.pos] == "\n":
                self.newline()
                continue
            m = _COND_END.match(self.src, self.pos)
            if m:
                self.pos = m.end()
                return "cond", (), tuple(words), ()
            m = _COND_OP.match(self.src, self.pos)
            if m and not (m.group() in "<>" and self.src.startswith("(", m.end())):
                self.pos = m.end()
                continue
            word = self.word()
            if word is None:
                raise self.error("unexpected text in [[ ]]")
            words.append(word)


def _function_keyword(
    parser: _Parser,
) -> tuple[str, tuple[Script, ...], tuple[Word, ...], tuple[Script, ...]]:
    # Parsed as a compound so that `function f { ...; }` fits the table below;
    # the definition is returned as a one-command body of kind "function".
    parser.pos += len("function")
    parser.skip_blanks()
    name = parser.word()
    if name is None:
        raise parser.error("expected a function name")
    parser.skip_blanks()
    if parser.src.startswith("(", parser.pos):
        parser.expect_op("(")
        parser.expect_op(")")
    parser.skip_linebreaks()
    body = parser.command()
    definition = FuncDef(name.text, body)
    return "function", (Script((AndOr((Pipeline((definition,)),)),)),), (), ()


_COMPOUND_PARSERS = {
    "{": _Parser.group,
    "if": _Parser.if_,
    "while": _Parser.loop,
    "until": _Parser.loop,
    "for": _Parser.for_,
    "select": _Parser.for_,
    "case": _Parser.case,
    "[[": _Parser.cond,
    "function": _function_keyword,
}


def _subs_of(parts: list[Part]) -> list[Script]:
    out: list[Script] = []
    for part in parts:
        if isinstance(part, CmdSub | ProcSub):
            out.append(part.script)
        elif isinstance(part, Var | Arith):
            out.extend(part.subs)
    return out


def _is_assignment(word: Word) -> bool:
    first = word.parts[0]
    if not isinstance(first, Lit) or first.quoted:
        return False
    eq = first.text.find("=")
    if eq < 0:
        return bool(len(word.parts) > 1 and isinstance(word.parts[1], Array))
    return bool(_ASSIGN_PREFIX.match(first.text[: eq + 1]))
