"""Which shell commands need the user's approval before the terminal tool runs
them: the rule table and the judge that applies it to a parsed command.

The command is parsed (:mod:`hermes_trio.tools.shell_syntax`), not matched as
text, so quoting (``\\rm``, ``"rm"``, ``r''m``, ``$'\\x72m'``), line
continuations and brace expansion cannot hide a command name, and ``echo
"rm -rf /"`` or ``grep reboot log.txt`` are not mistaken for one.  Every
simple command anywhere in the text is judged — after ``;``, ``&&``, ``|``,
inside ``$(...)``, backquotes, ``<(...)``, loops, functions and here-documents
fed to a shell, and inside scripts the shell parses again (``sh -c``,
``bash -lc``, ``eval``, ``su -c``, ``watch``, ``trap``, ``env -S``,
``parallel``) — by its command name, after unwrapping the commands that run
other commands:

    sudo, doas, env, nice, ionice, nohup, timeout, time, command, builtin,
    exec, stdbuf, chroot, setsid, unbuffer, taskset, chrt, flock, strace,
    coproc, busybox, toybox, xargs (its command gets one more argument:
    whatever arrives on stdin), find -exec/-execdir/-ok/-okdir (``{}`` is
    one of the files found under the start points).

A command name given with a path counts as its last component
(``/usr/bin/rm`` is ``rm``).  ``~``, ``~user``, ``$HOME`` and ``${HOME}`` are
the home directory; any other expansion is unknown and may be anything.

=====================  ==========================================================
key                    what needs approval
=====================  ==========================================================
rm_broad               ``rm`` with ``-r``/``-R``/``--recursive`` on a broad path:
                       ``/``, a top-level dir (``/usr``, ``/tmp/*``), ``/home/X``,
                       ``/usr/X``, ``/var/X``, ``/etc/X``, a home (``~``,
                       ``$HOME``, ``~/*``), ``.``, ``..``, ``*``, ``./*``, or a
                       path an unknown expansion decides (``"$DIR"``,
                       ``"$x"/*``, ``xargs rm -rf``); or any ``rm
                       --no-preserve-root``.  Not ``rm -rf ./build``,
                       ``rm -rf /tmp/foo/bar``, ``rm -rf "$HOME/.cache"``.
find_delete_broad      ``find -delete`` under ``/``, a top-level dir, a home or
                       an unknown path; under ``.`` only without a test that
                       selects files (``-name``, ``-path``, ``-mtime``, …).
                       ``find … -exec CMD {}`` judges CMD the same way.
mkfs                   ``mkfs``, ``mkfs.*``, ``mke2fs``, ``mkswap``, ``wipefs``,
                       ``mkdosfs``, ``mkntfs``
dd_device              ``dd … of=/dev/X``, except ``/dev/null`` and friends
write_device           a redirection (``>``, ``>>``, ``&>``, ``<>``) or ``tee``
                       onto a raw disk (``/dev/sda``, ``/dev/nvme0n1``, …)
fork_bomb              a function that starts itself in a pipe or in the
                       background (``:(){ :|:& };:``)
pipe_to_shell          downloaded code run by a shell or an interpreter (sh, bash,
                       zsh, dash, ksh, python, perl, ruby, node, php, lua, …):
                       ``curl … | sh``, ``wget -O- … | sudo python3``,
                       ``bash <(curl …)``, ``source <(curl …)``, ``sh -c
                       "$(curl …)"``, ``python3 -c "$(curl …)"``, ``eval
                       "$(curl …)"``, ``bash <<< "$(curl …)"``.  Downloaders:
                       curl, wget, fetch, httpie, xh, aria2c, nc.  Not ``curl …
                       | jq``, ``curl … | python -m json.tool``, ``curl … |
                       python3 -c 'code'``.
power                  ``shutdown``, ``reboot``, ``halt``, ``poweroff``,
                       ``init 0``/``6``, ``systemctl``/``loginctl``
                       ``reboot|poweroff|halt|kexec``
chmod_chown_broad      ``chmod``/``chown``/``chgrp`` ``-R`` on ``/``, a
                       top-level dir, a home or an unknown path (not on ``.``)
kill_all               ``kill`` with ``-1`` as the process (every process)
git_force_push_main    ``git push`` with ``--force``/``-f``/``+ref`` (or
                       ``--delete``/``:ref``) naming main or master, or with
                       ``--all``/``--mirror``
unreadable             what the parser cannot read or follow: unbalanced quotes,
                       unterminated constructs, nesting deeper than 24, a
                       command name that an expansion decides (``$CMD -rf /``,
                       ``$(…) args``), ``eval`` or ``sh -c`` of a string whose
                       command an expansion decides, a shell reading its script
                       from another command's output (``cat x | sh``)
=====================  ==========================================================

It is a guard rail against an over-eager model, not a sandbox: a script file,
``make``, ``npm run``, ``python -c`` code or a program that deletes files
itself runs without question.  The function is pure and takes time linear in
the length of the command.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from hermes_trio.tools.shell_syntax import (
    MAX_DEPTH,
    AndOr,
    Command,
    Compound,
    FuncDef,
    Pipeline,
    Redirect,
    Script,
    ShellSyntaxError,
    Simple,
    Word,
    decode_escapes,
    parse,
)
from hermes_trio.tools.shell_words import (
    HERE,
    SYSTEM,
    Value,
    breadth,
    command_name,
    expand,
    literal,
    placeholder_text,
)

__all__ = ["DANGEROUS_PATTERNS", "DangerPattern", "find_danger", "find_dangers"]


class DangerPattern(NamedTuple):
    key: str
    description: str
    # What in the command matched, for messages (empty in the table).
    detail: str = ""


DANGEROUS_PATTERNS: tuple[DangerPattern, ...] = (
    DangerPattern("rm_broad", "recursive delete of a broad path"),
    DangerPattern("find_delete_broad", "find -delete over a broad path"),
    DangerPattern("mkfs", "formatting a filesystem"),
    DangerPattern("dd_device", "dd writing to a device"),
    DangerPattern("write_device", "writing to a raw disk device"),
    DangerPattern("fork_bomb", "fork bomb"),
    DangerPattern("pipe_to_shell", "running downloaded code in a shell or interpreter"),
    DangerPattern("power", "shutting down or rebooting the machine"),
    DangerPattern("chmod_chown_broad", "recursive permission/owner change of a system path"),
    DangerPattern("kill_all", "killing every process"),
    DangerPattern("git_force_push_main", "force-pushing to main/master"),
    DangerPattern("unreadable", "a command the safety check cannot read"),
)
_ORDER = {pattern.key: i for i, pattern in enumerate(DANGEROUS_PATTERNS)}
_BY_KEY = {pattern.key: pattern for pattern in DANGEROUS_PATTERNS}
_DETAIL_LIMIT = 120


def find_dangers(command: str) -> tuple[DangerPattern, ...]:
    """Every rule ``command`` breaks, in table order, each with a detail."""
    judge = _Judge()
    try:
        judge.text(command, "the command")
    except RecursionError:
        judge.flag("unreadable", "nested too deeply")
    found = sorted(judge.found.items(), key=lambda item: _ORDER[item[0]])
    return tuple(_BY_KEY[key]._replace(detail=detail) for key, detail in found)


def find_danger(command: str) -> DangerPattern | None:
    """The first rule ``command`` breaks, or None."""
    dangers = find_dangers(command)
    return dangers[0] if dangers else None


# --- what a piece of script produces and reads -----------------------------


@dataclass(frozen=True, slots=True)
class _Out:
    # A download runs somewhere in it, so its output may be downloaded code.
    downloads: bool = False
    # Its output when that is known text (echo, printf, cat of known text).
    text: str | None = None


@dataclass(frozen=True, slots=True)
class _Feed:
    """Where a command's stdin comes from."""

    kind: str  # "none" (nothing to judge), "download", "text", "computed"
    text: str = ""


_NO_FEED = _Feed("none")
_NOTHING = _Out()


def _feed_of(out: object) -> _Feed:
    assert isinstance(out, _Out)
    if out.downloads:
        return _Feed("download")
    if out.text is not None:
        return _Feed("text", out.text)
    return _Feed("computed")


def _shorten(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _DETAIL_LIMIT else flat[: _DETAIL_LIMIT - 1] + "…"


def _words_text(words: Sequence[Value]) -> str:
    return _shorten(" ".join(w.text for w in words))


def _lit_value(text: str) -> Value:
    return Value((("lit", text),), text)


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


_UNKNOWN_ARG = Value((("unknown", ""),), "<input>")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


class _Judge:
    def __init__(self) -> None:
        self.found: dict[str, str] = {}
        self.depth = 0

    def flag(self, key: str, detail: str) -> None:
        self.found.setdefault(key, _shorten(detail))

    # -- scripts --

    def text(self, source: str, what: str) -> _Out:
        """Parse and judge ``source``; ``what`` names it in messages."""
        try:
            script = parse(source, depth=self.depth)
        except ShellSyntaxError as exc:
            self.flag("unreadable", f"{what}: {exc}")
            return _NOTHING
        return self.script(script, _NO_FEED)

    def script(self, script: Script, feed: _Feed) -> _Out:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH + 2:
                self.flag("unreadable", "nested too deeply")
                return _NOTHING
            downloads = False
            out = _NOTHING
            for item in script.items:
                for pipeline in item.pipelines:
                    out = self.pipeline(pipeline, feed)
                    downloads = downloads or out.downloads
            single = len(script.items) == 1 and len(script.items[0].pipelines) == 1
            return _Out(downloads, out.text if single else None)
        finally:
            self.depth -= 1

    def pipeline(self, pipeline: Pipeline, feed: _Feed) -> _Out:
        downloaded = False
        out = _NOTHING
        for j, command in enumerate(pipeline.commands):
            if j:
                feed = _Feed("download") if downloaded else _feed_of(out)
            out = self.command(command, feed)
            downloaded = downloaded or out.downloads
        return _Out(downloaded, out.text)

    def command(self, command: Command, feed: _Feed) -> _Out:
        if isinstance(command, Simple):
            return self.simple(command, feed)
        if isinstance(command, FuncDef):
            if _starts_itself_concurrently(command.body, command.name, False):
                self.flag("fork_bomb", f"{command.name}() calls itself in a pipe or background")
            return _Out(self.command(command.body, _NO_FEED).downloads)
        feed, downloads = self.redirects(command.redirects, feed)
        for word in command.words:
            downloads = any([v.downloads for v in self.expand(word)]) or downloads
        for sub in command.subs:
            downloads = self.script(sub, _NO_FEED).downloads or downloads
        text = None
        for body in command.bodies:
            out = self.script(body, feed)
            downloads = downloads or out.downloads
            text = out.text
        keeps_text = command.kind in ("group", "subshell") and len(command.bodies) == 1
        return _Out(downloads, text if keeps_text else None)

    def simple(self, command: Simple, feed: _Feed) -> _Out:
        downloads = False
        for word in command.assigns:
            downloads = any([v.downloads for v in self.expand(word)]) or downloads
        feed, redirected = self.redirects(command.redirects, feed)
        values: list[Value] = []
        for word in command.words:
            values.extend(self.expand(word))
        downloads = downloads or redirected or any(v.downloads for v in values)
        if not values:
            return _Out(downloads)
        out = self.run(values, feed)
        return _Out(downloads or out.downloads, out.text)

    def expand(self, word: Word) -> list[Value]:
        return expand(
            word,
            lambda script: self.script(script, _NO_FEED),
            lambda out: isinstance(out, _Out) and out.downloads,
        )

    def redirects(self, redirects: Sequence[Redirect], feed: _Feed) -> tuple[_Feed, bool]:
        downloads = False
        for redirect in redirects:
            if redirect.heredoc is not None:
                body = redirect.heredoc.body or Word((), "")
                value = self.expand(body)[0]
                downloads = downloads or value.downloads
                feed = self.word_feed(value, "")
                continue
            assert redirect.target is not None
            values = self.expand(redirect.target)
            downloads = downloads or any(v.downloads for v in values)
            op = redirect.op
            if op == "<<<":
                feed = self.word_feed(values[0], "\n")
            elif op == "<" and redirect.fd in (None, "0"):
                feed = _feed_of(values[0].feed) if values[0].feed is not None else _NO_FEED
            if op in (">", ">>", ">|", "&>", "&>>", "<>"):
                for value in values:
                    self.device_write(value, f"{op} {redirect.target.text}")
        return feed, downloads

    @staticmethod
    def word_feed(value: Value, suffix: str) -> _Feed:
        if value.downloads:
            return _Feed("download")
        return _Feed("text", placeholder_text(value) + suffix)

    # -- one command --

    def run(self, words: list[Value], feed: _Feed) -> _Out:
        """Judge one command given as its expanded words."""
        while words:
            name = command_name(words[0])
            if name is None:
                self.flag("unreadable", f"the command name is computed: {words[0].text}")
                return _NOTHING
            wrapper = _WRAPPERS.get(name)
            if wrapper is None:
                return self.rules(name, words, feed)
            step = wrapper(self, words[1:], feed)
            if step is None:
                return _NOTHING
            if isinstance(step, _Out):
                return step
            words = step
        return _NOTHING

    def rules(self, name: str, words: list[Value], feed: _Feed) -> _Out:
        args = words[1:]
        rule = _RULES.get(name)
        if rule is None and name.startswith("mkfs."):
            rule = _mkfs
        if rule is not None:
            rule(self, args, words)
        downloads = name in _DOWNLOADERS
        interpreter = _interpreter(name)
        if interpreter is not None:
            source = (
                _shell_source(args) if interpreter.shell else _generic_source(interpreter, args)
            )
            downloads = self.program(interpreter.shell, source, feed, name).downloads or downloads
        elif name in ("source", ".") and args:
            downloads = self.program(True, ("file", args[0]), feed, name).downloads or downloads
        elif name == "eval":
            downloads = self.eval(args).downloads or downloads
        return _Out(downloads, _output_text(name, args, feed))

    def program(
        self, shell: bool, source: tuple[str, Value | None], feed: _Feed, name: str
    ) -> _Out:
        """Judge the program an interpreter runs: inline, a file, or stdin."""
        kind, value = source
        if kind == "inline":
            assert value is not None
            if value.downloads:
                self.flag("pipe_to_shell", f"{name} runs a download: {value.text}")
                return _NOTHING
            if not shell:
                return _NOTHING
            return self.text(placeholder_text(value), f"the script given to {name}")
        if kind == "file":
            assert value is not None
            if value.feed is not None:
                program = _feed_of(value.feed)
            elif literal(value) in _STDIN_PATHS:
                program = feed
            else:
                return _NOTHING  # a script file: not ours to read
        elif kind == "stdin":
            program = feed
        else:
            return _NOTHING
        return self.run_program(program, shell, name)

    def run_program(self, program: _Feed, shell: bool, name: str) -> _Out:
        if program.kind == "download":
            self.flag("pipe_to_shell", f"{name} runs what a download printed")
        elif shell and program.kind == "text":
            return self.text(program.text, f"the script given to {name}")
        elif shell and program.kind == "computed":
            self.flag("unreadable", f"{name} runs a script that another command printed")
        return _NOTHING

    def eval(self, args: Sequence[Value]) -> _Out:
        if any(v.downloads for v in args):
            self.flag("pipe_to_shell", f"eval runs a download: {_words_text(args)}")
            return _NOTHING
        return self.text(" ".join(placeholder_text(v) for v in args), "eval")

    def device_write(self, value: Value, detail: str) -> None:
        path = literal(value)
        if path is not None and _RAW_DISK.match(os.path.normpath(path)):
            self.flag("write_device", detail)


# --- output of echo and friends -------------------------------------------

_ECHO_OPTION = re.compile(r"-[neE]+$")


def _output_text(name: str, args: Sequence[Value], feed: _Feed) -> str | None:
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

_DOWNLOADERS = _names(
    "curl wget wget2 fetch http https xh xhs curlie aria2c lwp-request GET nc ncat netcat"
)
_STDIN_PATHS = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})


@dataclass(frozen=True, slots=True)
class _Interpreter:
    shell: bool = False
    # Options whose value is the program text (-c, -e, --eval).
    inline: frozenset[str] = frozenset()
    # Options that take a value.
    with_value: frozenset[str] = frozenset()
    # Options that run something other than stdin or a script (-m module).
    elsewhere: frozenset[str] = frozenset()
    # Options whose value is the script file (php -f).
    file: frozenset[str] = frozenset()


_SHELL = _Interpreter(shell=True)
_SHELLS = _names("sh bash rbash zsh dash ksh mksh pdksh oksh ash yash posh fish csh tcsh")
_INTERPRETERS: tuple[tuple[re.Pattern[str], _Interpreter], ...] = (
    (
        re.compile(r"(?:python|pypy)[\d.]*$"),
        _Interpreter(
            inline=frozenset({"-c"}),
            with_value=frozenset({"-W", "-X", "--check-hash-based-pycs"}),
            elsewhere=frozenset({"-m"}),
        ),
    ),
    (
        re.compile(r"perl[\d.]*$"),
        _Interpreter(
            inline=frozenset({"-e", "-E"}),
            with_value=frozenset({"-I", "-M", "-m"}),
        ),
    ),
    (
        re.compile(r"j?ruby[\d.]*$"),
        _Interpreter(
            inline=frozenset({"-e"}),
            with_value=frozenset({"-r", "-I", "-C", "-E", "-F", "--encoding"}),
        ),
    ),
    (
        re.compile(r"(?:node|nodejs|bun|deno)$"),
        _Interpreter(
            inline=frozenset({"-e", "--eval", "-p", "--print"}),
            with_value=_names(
                "-r --require --import --loader --input-type -C --conditions --env-file"
            ),
        ),
    ),
    (
        re.compile(r"php[\d.]*$"),
        _Interpreter(
            inline=frozenset({"-r", "-B", "-R", "-E"}),
            with_value=frozenset({"-d", "-c", "-z", "-t"}),
            file=frozenset({"-f"}),
        ),
    ),
    (
        re.compile(r"lua(?:jit|[\d.]*)$"),
        _Interpreter(inline=frozenset({"-e"}), with_value=frozenset({"-l"})),
    ),
    (re.compile(r"(?:tclsh[\d.]*|wish|Rscript|julia|groovy|osascript)$"), _Interpreter()),
)


@functools.lru_cache(maxsize=512)
def _interpreter(name: str) -> _Interpreter | None:
    if name in _SHELLS:
        return _SHELL
    for pattern, interpreter in _INTERPRETERS:
        if pattern.match(name):
            return interpreter
    return None


def _shell_source(args: Sequence[Value]) -> tuple[str, Value | None]:
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


def _generic_source(spec: _Interpreter, args: Sequence[Value]) -> tuple[str, Value | None]:
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
            value = _lit_value(rest) if eq else (args[i + 1] if i + 1 < len(args) else None)
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
                value = _lit_value(rest) if rest else (args[i + 1] if i + 1 < len(args) else None)
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


# --- rules -----------------------------------------------------------------

Rule = Callable[[_Judge, list[Value], list[Value]], None]
_RAW_DISK = re.compile(
    r"/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|md\d|dm-\d|disk\d|loop\d|mapper/)"
)
_HARMLESS_DEVICES = re.compile(
    r"/dev/(?:null|zero|full|stdout|stderr|stdin|tty|random|urandom)$|/dev/(?:fd|shm|pts)/"
)


def _options_and_operands(
    args: Sequence[Value],
) -> tuple[list[str], list[Value]]:
    """Literal options (anywhere, as GNU tools accept them) and operands."""
    options: list[str] = []
    operands: list[Value] = []
    done = False
    for value in args:
        text = literal(value)
        if not done and text is not None and text.startswith("-") and text != "-":
            if text == "--":
                done = True
            else:
                options.append(text)
            continue
        operands.append(value)
    return options, operands


def _has_short(options: Sequence[str], letters: str) -> bool:
    return any(not o.startswith("--") and any(c in o[1:] for c in letters) for o in options)


def _has_long(options: Sequence[str], name: str) -> bool:
    # GNU tools accept unambiguous abbreviations (--rec for --recursive).
    return any(
        o.startswith("--") and len(o.split("=")[0]) > 3 and name.startswith(o.split("=")[0])
        for o in options
    )


def _rm(judge: _Judge, args: list[Value], words: list[Value]) -> None:
    options, operands = _options_and_operands(args)
    if _has_long(options, "--no-preserve-root"):
        judge.flag("rm_broad", _words_text(words))
        return
    if not (_has_short(options, "rR") or _has_long(options, "--recursive")):
        return
    if any(breadth(value) >= HERE for value in operands):
        judge.flag("rm_broad", _words_text(words))


def _mkfs(judge: _Judge, args: list[Value], words: list[Value]) -> None:
    judge.flag("mkfs", _words_text(words))


def _dd(judge: _Judge, args: list[Value], words: list[Value]) -> None:
    for value in args:
        text = literal(value)
        if text is None or not text.startswith("of="):
            continue
        path = os.path.normpath(text[3:]) if text[3:] else ""
        if path.startswith("/dev/") and not _HARMLESS_DEVICES.match(path):
            judge.flag("dd_device", _words_text(words))


def _tee(judge: _Judge, args: list[Value], words: list[Value]) -> None:
    for value in _options_and_operands(args)[1]:
        judge.device_write(value, _words_text(words))


def _power(judge: _Judge, args: list[Value], words: list[Value]) -> None:
    judge.flag("power", _words_text(words))


def _init(judge: _Judge, args: list[Value], words: list[Value]) -> None:
    operands = _options_and_operands(args)[1]
    if operands and literal(operands[0]) in ("0", "6"):
        judge.flag("power", _words_text(words))


def _systemctl(judge: _Judge, args: list[Value], words: list[Value]) -> None:
    operands = _options_and_operands(args)[1]
    if operands and literal(operands[0]) in ("reboot", "poweroff", "halt", "kexec", "soft-reboot"):
        judge.flag("power", _words_text(words))


def _chmod(judge: _Judge, args: list[Value], words: list[Value]) -> None:
    options, operands = _options_and_operands(args)
    # chmod's -r removes read permission; only -R recurses.
    if not (_has_short(options, "R") or _has_long(options, "--recursive")):
        return
    if not any(o.startswith("--reference") for o in options):
        operands = operands[1:]  # the mode or owner
    if any(breadth(value) == SYSTEM for value in operands):
        judge.flag("chmod_chown_broad", _words_text(words))


def _kill(judge: _Judge, args: list[Value], words: list[Value]) -> None:
    signal_given = False
    i = 0
    while i < len(args):
        text = literal(args[i])
        i += 1
        if text == "--":
            break
        if text in ("-s", "-n", "--signal"):
            signal_given = True
            i += 1
            continue
        if text is not None and text.startswith("-") and not signal_given and text != "-1":
            signal_given = True
            continue
        if text == "-1" and not signal_given:
            signal_given = True  # `kill -1 PID`: -1 is the signal (HUP)
            continue
        if text == "-1":
            judge.flag("kill_all", _words_text(words))
            return
    if any(literal(v) == "-1" for v in args[i:]):
        judge.flag("kill_all", _words_text(words))


_GIT_GLOBAL_WITH_VALUE = _names(
    "-C -c --git-dir --work-tree --namespace --super-prefix --config-env --exec-path"
)
_GIT_PUSH_WITH_VALUE = frozenset({"-o", "--push-option", "--repo", "--receive-pack", "--exec"})
_PROTECTED_BRANCHES = frozenset({"main", "master"})


def _git(judge: _Judge, args: list[Value], words: list[Value]) -> None:
    i = 0
    while i < len(args):
        text = literal(args[i])
        if text is None or not text.startswith("-"):
            break
        i += 2 if text in _GIT_GLOBAL_WITH_VALUE else 1
    if i >= len(args) or literal(args[i]) != "push":
        return
    force = delete = everything = False
    refs: list[str] = []
    rest = args[i + 1 :]
    j = 0
    while j < len(rest):
        text = literal(rest[j]) or ""
        j += 1
        if text.startswith("--"):
            name = text.split("=")[0]
            if name == "--force":
                force = True
            elif name == "--delete":
                delete = True
            elif name in ("--all", "--mirror", "--branches"):
                everything = True
            elif name in _GIT_PUSH_WITH_VALUE and "=" not in text:
                j += 1
            continue
        if text.startswith("-") and len(text) > 1:
            force = force or "f" in text[1:]
            delete = delete or "d" in text[1:]
            if text[-1] == "o":
                j += 1
            continue
        if text.startswith("+"):
            force = True
        if text.startswith(":"):
            delete = True
        refs.append(text.lstrip("+").rsplit(":", 1)[-1].removeprefix("refs/heads/"))
    names_main = any(ref in _PROTECTED_BRANCHES for ref in refs)
    if (force or delete) and (names_main or (force and everything)):
        judge.flag("git_force_push_main", _words_text(words))


_RULES: dict[str, Rule] = {
    "rm": _rm,
    "mkfs": _mkfs,
    "mke2fs": _mkfs,
    "mkswap": _mkfs,
    "wipefs": _mkfs,
    "mkdosfs": _mkfs,
    "mkntfs": _mkfs,
    "dd": _dd,
    "tee": _tee,
    "shutdown": _power,
    "reboot": _power,
    "halt": _power,
    "poweroff": _power,
    "init": _init,
    "telinit": _init,
    "systemctl": _systemctl,
    "loginctl": _systemctl,
    "chmod": _chmod,
    "chown": _chmod,
    "chgrp": _chmod,
    "kill": _kill,
    "git": _git,
}


# --- commands that run other commands --------------------------------------

Step = list[Value] | _Out | None
Wrapper = Callable[[_Judge, list[Value], _Feed], Step]


def _after_options(
    args: Sequence[Value],
    with_value: frozenset[str] = frozenset(),
) -> tuple[int, dict[str, Value | None]]:
    """Index of the first operand, and the options before it with their
    values.  ``with_value`` lists short (``-u``) and long (``--user``)
    options that take one (``-uroot``, ``-u root``, ``--user=root``)."""
    seen: dict[str, Value | None] = {}
    i = 0
    while i < len(args):
        text = literal(args[i])
        if text is None or text == "-" or not text.startswith("-"):
            break
        if text == "--":
            return i + 1, seen
        if text.startswith("--"):
            name, eq, rest = text.partition("=")
            if eq:
                seen[name] = _lit_value(rest)
            elif name in with_value:
                seen[name] = args[i + 1] if i + 1 < len(args) else None
                i += 1
            else:
                seen[name] = None
            i += 1
            continue
        for k in range(1, len(text)):
            option = "-" + text[k]
            if option in with_value:
                rest = text[k + 1 :]
                if rest:
                    seen[option] = _lit_value(rest)
                else:
                    seen[option] = args[i + 1] if i + 1 < len(args) else None
                    i += 1
                break
            seen[option] = None
        i += 1
    return i, seen


def _skip_assignments(words: list[Value]) -> list[Value]:
    i = 0
    while i < len(words):
        first = words[i].segments[0] if words[i].segments else ("lit", "")
        if first[0] not in ("lit", "raw") or not _ASSIGNMENT.match(first[1]):
            break
        i += 1
    return words[i:]


def _simple_wrapper(
    with_value: frozenset[str] = frozenset(),
    *,
    no_command: frozenset[str] = frozenset(),
    skip: int = 0,
    assignments: bool = False,
) -> Wrapper:
    """A wrapper of the form ``NAME [options] [skip operands] COMMAND...``;
    any option in ``no_command`` means it runs nothing (``command -v``)."""

    def unwrap(judge: _Judge, args: list[Value], feed: _Feed) -> Step:
        i, seen = _after_options(args, with_value)
        if no_command & seen.keys():
            return None
        rest = args[i + skip :]
        if assignments:
            rest = _skip_assignments(rest)
        return rest or None

    return unwrap


def _script_option(*names: str) -> Callable[[dict[str, Value | None]], Value | None]:
    def pick(seen: dict[str, Value | None]) -> Value | None:
        for name in names:
            if name in seen:
                return seen[name] or _UNKNOWN_ARG
        return None

    return pick


def _inline(judge: _Judge, value: Value, what: str) -> _Out:
    if value.downloads:
        judge.flag("pipe_to_shell", f"{what} runs a download: {value.text}")
        return _NOTHING
    return judge.text(placeholder_text(value), what)


def _env(judge: _Judge, args: list[Value], feed: _Feed) -> Step:
    i, seen = _after_options(
        args, frozenset({"-u", "-C", "-S", "-P", "--unset", "--chdir", "--split-string"})
    )
    rest = _skip_assignments(args[i:])
    split = _script_option("-S", "--split-string")(seen)
    if split is not None:
        joined = " ".join(placeholder_text(v) for v in [split, *rest])
        return judge.text(joined, "env -S")
    return rest or None


def _timeout(judge: _Judge, args: list[Value], feed: _Feed) -> Step:
    i, _ = _after_options(args, frozenset({"-s", "-k", "--signal", "--kill-after"}))
    return args[i + 1 :] or None


def _flock(judge: _Judge, args: list[Value], feed: _Feed) -> Step:
    i, seen = _after_options(
        args, frozenset({"-w", "-E", "-c", "--timeout", "--conflict-exit-code", "--command"})
    )
    script = _script_option("-c", "--command")(seen)
    if script is not None:
        return _inline(judge, script, "flock -c")
    return args[i + 1 :] or None


def _su(judge: _Judge, args: list[Value], feed: _Feed) -> Step:
    _, seen = _after_options(
        args,
        _names(
            "-c -s -g -G -w --command --session-command --shell --group --supp-group "
            "--whitelist-environment"
        ),
    )
    script = _script_option("-c", "--command", "--session-command")(seen)
    return _inline(judge, script, "su -c") if script is not None else None


def _watch(judge: _Judge, args: list[Value], feed: _Feed) -> Step:
    i, seen = _after_options(args, frozenset({"-n", "-q", "--interval"}))
    rest = args[i:]
    if not rest:
        return None
    if "-x" in seen or "--exec" in seen:
        return rest
    if any(v.downloads for v in rest):
        judge.flag("pipe_to_shell", f"watch runs a download: {_words_text(rest)}")
        return _NOTHING
    return judge.text(" ".join(placeholder_text(v) for v in rest), "watch")


def _trap(judge: _Judge, args: list[Value], feed: _Feed) -> Step:
    if len(args) < 2 or literal(args[0]) in ("-", "-l", "-p", "--", ""):
        return None
    return _inline(judge, args[0], "trap")


def _eval(judge: _Judge, args: list[Value], feed: _Feed) -> Step:
    return judge.eval(args)


def _busybox(judge: _Judge, args: list[Value], feed: _Feed) -> Step:
    if args and (literal(args[0]) or "").startswith("-"):
        return None
    return args or None


_XARGS_WITH_VALUE = _names(
    "-a -d -E -I -L -n -P -s --arg-file --delimiter --max-lines --max-args "
    "--max-procs --max-chars --process-slot-var --eof"
)


def _xargs(judge: _Judge, args: list[Value], feed: _Feed) -> Step:
    replace: str | None = None
    i = 0
    while i < len(args):
        text = literal(args[i])
        if text is None or not text.startswith("-") or text == "-":
            break
        i += 1
        if text == "--":
            break
        if text.startswith("--"):
            name, eq, rest = text.partition("=")
            if name == "--replace":
                replace = rest if eq and rest else "{}"
            elif name in _XARGS_WITH_VALUE and not eq:
                i += 1
            continue
        if text.startswith("-i"):
            replace = text[2:] or "{}"
            continue
        if text[:2] in ("-l", "-e"):
            continue  # optional attached value only
        for k in range(1, len(text)):
            if "-" + text[k] in _XARGS_WITH_VALUE:
                value: str | None = text[k + 1 :]
                if not value:
                    value = literal(args[i]) if i < len(args) else None
                    i += 1
                if text[k] == "I":
                    replace = value
                break
    command = args[i:] or [_lit_value("echo")]
    if replace:
        return [_substitute(v, replace, (("unknown", ""),)) for v in command]
    return [*command, _UNKNOWN_ARG]


_PARALLEL_WITH_VALUE = _names(
    "-j -N -n -S -I -a -d -E -C --jobs --max-args --sshlogin --arg-file --delimiter "
    "--colsep --halt --joblog --results --tmpdir --timeout --delay --retries "
    "--memfree --load --basefile --workdir --env --tagstring --block --sshloginfile "
    "--slf"
)
_PARALLEL_INPUTS = frozenset({":::", "::::", ":::+", "::::+"})
_PARALLEL_SLOT = re.compile(r"\{(?:\d*(?:\.|/|//|/\.)?|#|%)\}")


def _parallel(judge: _Judge, args: list[Value], feed: _Feed) -> Step:
    i, _ = _after_options(args, _PARALLEL_WITH_VALUE)
    template: list[Value] = []
    for value in args[i:]:
        if literal(value) in _PARALLEL_INPUTS:
            break
        template.append(value)
    if not template:
        # Without a command, parallel runs the lines of its input as commands.
        return judge.run_program(feed, True, "parallel")
    text = " ".join(placeholder_text(v) for v in template)
    text, slots = _PARALLEL_SLOT.subn("\ue000", text)
    if not slots:
        text += " \ue000"
    if any(v.downloads for v in template):
        judge.flag("pipe_to_shell", f"parallel runs a download: {_words_text(template)}")
        return _NOTHING
    return judge.text(text, "parallel")


def _substitute(value: Value, token: str, replacement: tuple[tuple[str, str], ...]) -> Value:
    segments: list[tuple[str, str]] = []
    for kind, text in value.segments:
        if kind not in ("lit", "raw") or token not in text:
            segments.append((kind, text))
            continue
        pieces = text.split(token)
        for k, piece in enumerate(pieces):
            if k:
                segments.extend(replacement)
            if piece:
                segments.append((kind, piece))
    return Value(tuple(segments), value.text, value.downloads, value.feed)


_FIND_NOT_TESTS = _names(
    "-type -xtype -depth -maxdepth -mindepth -mount -xdev -noleaf "
    "-ignore_readdir_race -noignore_readdir_race -follow -regextype -daystart -warn "
    "-nowarn -d -print -print0 -printf -fprint -fprint0 -fprintf -ls -fls -prune "
    "-quit -true -a -and -o -or -not -delete -help -version"
)
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _find(judge: _Judge, args: list[Value], feed: _Feed) -> Step:
    i = 0
    while i < len(args):
        text = literal(args[i]) or ""
        if text in ("-H", "-L", "-P") or text.startswith("-O"):
            i += 1
        elif text == "-D":
            i += 2
        else:
            break
    roots: list[Value] = []
    while i < len(args):
        text = literal(args[i])
        if text is not None and (text.startswith("-") or text in ("(", "!", ")", ",")):
            break
        roots.append(args[i])
        i += 1
    if not roots:
        roots = [_lit_value(".")]
    delete = tests = False
    commands: list[list[Value]] = []
    while i < len(args):
        text = literal(args[i])
        i += 1
        if text in _FIND_EXEC:
            start = i
            while i < len(args) and literal(args[i]) not in (";", "+"):
                i += 1
            commands.append(args[start:i])
            i += 1
        elif text == "-delete":
            delete = True
        elif text is not None and text.startswith("-") and text not in _FIND_NOT_TESTS:
            tests = True
    root = max(roots, key=breadth)
    reach = breadth(root)
    # A test that selects files narrows the working directory, not a whole
    # system tree or home.
    broad = reach == SYSTEM or (reach == HERE and not tests)
    if delete and broad:
        judge.flag("find_delete_broad", _words_text([_lit_value("find"), *args]))
    found = root.segments if broad else (*root.segments, ("raw", "/"), ("item", ""))
    for command in commands:
        if command:
            judge.run([_substitute(v, "{}", found) for v in command], _NO_FEED)
    return _NOTHING


_SUDO_WITH_VALUE = _names(
    "-u -g -C -D -h -p -r -t -U -T -R --user --group --close-from --chdir --host "
    "--prompt --role --type --other-user --command-timeout --chroot"
)

_WRAPPERS: dict[str, Wrapper] = {
    "sudo": _simple_wrapper(
        _SUDO_WITH_VALUE,
        no_command=frozenset({"-e", "--edit", "-l", "--list", "-v", "--validate", "-V"}),
        assignments=True,
    ),
    "doas": _simple_wrapper(frozenset({"-u", "-C"})),
    "env": _env,
    "nice": _simple_wrapper(frozenset({"-n", "--adjustment"})),
    "ionice": _simple_wrapper(
        frozenset(
            {"-c", "-n", "-p", "-P", "-u", "--class", "--classdata", "--pid", "--pgid", "--uid"}
        ),
        no_command=frozenset({"-p", "-P", "-u", "--pid", "--pgid", "--uid"}),
    ),
    "nohup": _simple_wrapper(),
    "timeout": _timeout,
    "time": _simple_wrapper(frozenset({"-f", "-o", "--format", "--output"})),
    "command": _simple_wrapper(no_command=frozenset({"-v", "-V"})),
    "builtin": _simple_wrapper(),
    "exec": _simple_wrapper(frozenset({"-a"})),
    "stdbuf": _simple_wrapper(frozenset({"-i", "-o", "-e", "--input", "--output", "--error"})),
    "chroot": _simple_wrapper(frozenset({"--userspec", "--groups"}), skip=1),
    "setsid": _simple_wrapper(),
    "unbuffer": _simple_wrapper(),
    "taskset": _simple_wrapper(no_command=frozenset({"-p", "--pid"}), skip=1),
    "chrt": _simple_wrapper(
        frozenset({"-T", "-P", "-D"}), no_command=frozenset({"-p", "--pid", "-m"}), skip=1
    ),
    "flock": _flock,
    "strace": _simple_wrapper(
        frozenset(
            {"-e", "-o", "-p", "-s", "-u", "-E", "-a", "-b", "-I", "-O", "-P", "-S", "-U", "-X"}
        )
    ),
    "coproc": _simple_wrapper(),
    "busybox": _busybox,
    "toybox": _busybox,
    "xargs": _xargs,
    "find": _find,
    "parallel": _parallel,
    "su": _su,
    "runuser": _su,
    "watch": _watch,
    "trap": _trap,
    "eval": _eval,
}


# --- fork bombs ------------------------------------------------------------


def _starts_itself_concurrently(node: Command | Script, name: str, concurrent: bool) -> bool:
    if isinstance(node, Script):
        return any(_and_or_starts(item, name, concurrent) for item in node.items)
    if isinstance(node, Simple):
        return concurrent and bool(node.words) and node.words[0].text == name
    if isinstance(node, Compound):
        return any(_starts_itself_concurrently(b, name, concurrent) for b in node.bodies)
    return False


def _and_or_starts(item: AndOr, name: str, concurrent: bool) -> bool:
    for pipeline in item.pipelines:
        here = concurrent or item.background or len(pipeline.commands) > 1
        if any(_starts_itself_concurrently(c, name, here) for c in pipeline.commands):
            return True
    return False
