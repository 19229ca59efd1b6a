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
the home directory, ``$PWD`` the working directory, and a variable the
script sets only from ``mktemp`` a specific path; any other expansion is
unknown and may be anything (empty, ``/``, several words).  Control flow is
not followed: ``true || rm -rf /`` is judged as if ``rm`` ran.

=====================  ==========================================================
key                    what needs approval
=====================  ==========================================================
rm_broad               ``rm`` with ``-r``/``-R``/``--recursive`` on a broad path:
                       ``/``, a top-level dir (``/usr``, ``/tmp/*``),
                       ``/home/X``, ``/Users/X``, ``/usr/X``, ``/var/lib``, a
                       home (``~``, ``$HOME``, ``~/*``, ``~/.*``), ``.``,
                       ``..``, ``../..``, ``*``, ``./*``, or a path an unknown
                       expansion decides (``"$DIR"``, ``"$x"/*``,
                       ``/tmp/$x``, ``xargs rm -rf``); or any ``rm
                       --no-preserve-root``.  Not ``rm -rf ./build``,
                       ``rm -rf /tmp/foo/bar``, ``rm -rf "$HOME/.cache"``,
                       ``rm -rf build/$x``, ``rm -rf ./*.o``.
find_delete_broad      ``find -delete`` under ``/``, a top-level dir, a home or
                       an unknown path; under ``.`` only without a test that
                       selects files (``-name``, ``-path``, ``-mtime``, …; not
                       ``-type``, and not under ``!`` or beside ``-o``).
                       ``find … -exec CMD {}`` judges CMD with ``{}`` standing
                       for the start point by the same measure.
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
                       ``--delete``/``:ref``) naming main or master, or
                       ``--force`` with ``--all``/``--mirror``
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

from collections.abc import Sequence

from hermes_trio.tools.command_programs import (
    DOWNLOADERS,
    NO_FEED,
    NOTHING,
    STDIN_PATHS,
    Feed,
    Output,
    feed_of,
    generic_source,
    interpreter,
    output_text,
    shell_source,
)
from hermes_trio.tools.command_rules import (
    DANGEROUS_PATTERNS,
    DangerPattern,
    device_write,
    rule_for,
    shorten,
    words_text,
)
from hermes_trio.tools.command_wrappers import WRAPPERS
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
    parse,
)
from hermes_trio.tools.shell_variables import temporary_variables
from hermes_trio.tools.shell_words import (
    Value,
    command_name,
    expand,
    literal,
    placeholder_text,
)

__all__ = ["DANGEROUS_PATTERNS", "DangerPattern", "find_danger", "find_dangers"]

_ORDER = {pattern.key: i for i, pattern in enumerate(DANGEROUS_PATTERNS)}
_BY_KEY = {pattern.key: pattern for pattern in DANGEROUS_PATTERNS}


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


class _Judge:
    def __init__(self) -> None:
        self.found: dict[str, str] = {}
        self.depth = 0
        # Variables that hold a fresh mktemp directory in the script being judged.
        self.temporary: frozenset[str] = frozenset()

    def flag(self, key: str, detail: str) -> None:
        self.found.setdefault(key, shorten(detail))

    # -- scripts --

    def text(self, source: str, what: str) -> Output:
        """Parse and judge ``source``; ``what`` names it in messages."""
        try:
            script = parse(source, depth=self.depth)
        except ShellSyntaxError as exc:
            self.flag("unreadable", f"{what}: {exc}")
            return NOTHING
        outer = self.temporary
        self.temporary = temporary_variables(script, outer)
        try:
            return self.script(script, NO_FEED)
        finally:
            self.temporary = outer

    def script(self, script: Script, feed: Feed) -> Output:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH + 2:
                self.flag("unreadable", "nested too deeply")
                return NOTHING
            downloads = False
            out = NOTHING
            for item in script.items:
                for pipeline in item.pipelines:
                    out = self.pipeline(pipeline, feed)
                    downloads = downloads or out.downloads
            single = len(script.items) == 1 and len(script.items[0].pipelines) == 1
            return Output(downloads, out.text if single else None)
        finally:
            self.depth -= 1

    def pipeline(self, pipeline: Pipeline, feed: Feed) -> Output:
        downloaded = False
        out = NOTHING
        for j, command in enumerate(pipeline.commands):
            if j:
                feed = Feed("download") if downloaded else feed_of(out)
            out = self.command(command, feed)
            downloaded = downloaded or out.downloads
        return Output(downloaded, out.text)

    def command(self, command: Command, feed: Feed) -> Output:
        if isinstance(command, Simple):
            return self.simple(command, feed)
        if isinstance(command, FuncDef):
            if _starts_itself_concurrently(command.body, command.name, False):
                self.flag("fork_bomb", f"{command.name}() calls itself in a pipe or background")
            return Output(self.command(command.body, NO_FEED).downloads)
        feed, downloads = self.redirects(command.redirects, feed)
        for word in command.words:
            downloads = any([v.downloads for v in self.expand(word)]) or downloads
        for sub in command.subs:
            downloads = self.script(sub, NO_FEED).downloads or downloads
        text = None
        for body in command.bodies:
            out = self.script(body, feed)
            downloads = downloads or out.downloads
            text = out.text
        keeps_text = command.kind in ("group", "subshell") and len(command.bodies) == 1
        return Output(downloads, text if keeps_text else None)

    def simple(self, command: Simple, feed: Feed) -> Output:
        downloads = False
        for word in command.assigns:
            downloads = any([v.downloads for v in self.expand(word)]) or downloads
        feed, redirected = self.redirects(command.redirects, feed)
        values: list[Value] = []
        for word in command.words:
            values.extend(self.expand(word))
        downloads = downloads or redirected or any(v.downloads for v in values)
        if not values:
            return Output(downloads)
        out = self.run(values, feed)
        return Output(downloads or out.downloads, out.text)

    def expand(self, word: Word) -> list[Value]:
        return expand(
            word,
            lambda script: self.script(script, NO_FEED),
            lambda out: isinstance(out, Output) and out.downloads,
            self.temporary,
        )

    def redirects(self, redirects: Sequence[Redirect], feed: Feed) -> tuple[Feed, bool]:
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
                feed = feed_of(values[0].feed) if values[0].feed is not None else NO_FEED
            if op in (">", ">>", ">|", "&>", "&>>", "<>"):
                for value in values:
                    device_write(self.flag, value, f"{op} {redirect.target.text}")
        return feed, downloads

    @staticmethod
    def word_feed(value: Value, suffix: str) -> Feed:
        if value.downloads:
            return Feed("download")
        return Feed("text", placeholder_text(value) + suffix)

    # -- one command --

    def run(self, words: list[Value], feed: Feed) -> Output:
        """Judge one command given as its expanded words."""
        while words:
            name = command_name(words[0])
            if name is None:
                self.flag("unreadable", f"the command name is computed: {words[0].text}")
                return NOTHING
            wrapper = WRAPPERS.get(name)
            if wrapper is None:
                return self.rules(name, words, feed)
            step = wrapper(self, words[1:], feed)
            if step is None:
                return NOTHING
            if isinstance(step, Output):
                return step
            words = step
        return NOTHING

    def rules(self, name: str, words: list[Value], feed: Feed) -> Output:
        args = words[1:]
        rule = rule_for(name)
        if rule is not None:
            rule(self.flag, args, words)
        downloads = name in DOWNLOADERS
        spec = interpreter(name)
        if spec is not None:
            source = shell_source(args) if spec.shell else generic_source(spec, args)
            downloads = self.program(spec.shell, source, feed, name).downloads or downloads
        elif name in ("source", ".") and args:
            downloads = self.program(True, ("file", args[0]), feed, name).downloads or downloads
        elif name == "eval":
            downloads = self.eval(args).downloads or downloads
        return Output(downloads, output_text(name, args, feed))

    def program(
        self, shell: bool, source: tuple[str, Value | None], feed: Feed, name: str
    ) -> Output:
        """Judge the program an interpreter runs: inline, a file, or stdin."""
        kind, value = source
        if kind == "inline":
            assert value is not None
            if value.downloads:
                self.flag("pipe_to_shell", f"{name} runs a download: {value.text}")
                return NOTHING
            if not shell:
                return NOTHING
            return self.text(placeholder_text(value), f"the script given to {name}")
        if kind == "file":
            assert value is not None
            if value.feed is not None:
                program = feed_of(value.feed)
            elif literal(value) in STDIN_PATHS:
                program = feed
            else:
                return NOTHING  # a script file: not ours to read
        elif kind == "stdin":
            program = feed
        else:
            return NOTHING
        return self.run_program(program, shell, name)

    def run_program(self, program: Feed, shell: bool, name: str) -> Output:
        if program.kind == "download":
            self.flag("pipe_to_shell", f"{name} runs what a download printed")
        elif shell and program.kind == "text":
            return self.text(program.text, f"the script given to {name}")
        elif shell and program.kind == "computed":
            self.flag("unreadable", f"{name} runs a script that another command printed")
        return NOTHING

    def eval(self, args: Sequence[Value]) -> Output:
        if any(v.downloads for v in args):
            self.flag("pipe_to_shell", f"eval runs a download: {words_text(args)}")
            return NOTHING
        return self.text(" ".join(placeholder_text(v) for v in args), "eval")


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
