"""The judge of the command check: it walks a parsed command in the order
the shell would run it, keeping track of where the command is (``cd``),
what its variables hold, which functions, aliases and traps it defined and
which files it downloaded or wrote, and applies the rules
(:mod:`hermes_trio.command_check.rules`) to every simple command it finds,
after unwrapping the commands that run other commands
(:mod:`hermes_trio.command_check.wrappers`).  Every step counts work
against a budget; :mod:`hermes_trio.command_check.policy` holds the rule
table and the entry points.  Pure.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from hermes_trio.command_check.programs import (
    DOWNLOADERS,
    NO_FEED,
    NOTHING,
    STDIN_PATHS,
    Feed,
    Output,
    downloaded_files,
    feed_of,
    interpreter,
    is_setup_command,
    output_of,
    program_source,
)
from hermes_trio.command_check.rules import (
    ARGUMENT_RULES,
    device_write,
    rule_for,
    shorten,
    words_text,
)
from hermes_trio.command_check.shell_options import OptionSpec, Scan, scan
from hermes_trio.command_check.shell_paths import (
    START,
    Place,
    breadth,
    merge_dirs,
    normalize_dir,
    rooted,
)
from hermes_trio.command_check.shell_syntax import (
    COMMAND_COST,
    MAX_DEPTH,
    PLACEHOLDERS,
    AndOr,
    Command,
    Compound,
    FuncDef,
    Pipeline,
    Redirect,
    Script,
    ShellSyntaxError,
    Simple,
    Var,
    Word,
    parse,
)
from hermes_trio.command_check.shell_variables import Facts, Known, assignment, facts_of
from hermes_trio.command_check.shell_words import (
    UNKNOWN,
    Segment,
    Value,
    command_name,
    expand,
    lit_value,
    literal,
    placeholder_text,
    word_literal,
)
from hermes_trio.command_check.wrappers import HOME, WRAPPERS, Call

__all__ = ["CommandJudge", "OverBudget"]

# Distinct words a for loop's body is judged with; more make it unknown.
MAX_LOOP_VALUES = 16

Dirs = tuple[tuple[Segment, ...], ...]


class OverBudget(Exception):
    """The judge spent its work budget."""


@dataclass(frozen=True, slots=True)
class _State:
    """Where the script may be, and what its variables hold."""

    cwds: Dirs
    values: dict[str, Known]


_UNKNOWN_VALUE: Known = ("unknown", None)
_UNSET: Known = ("unset", None)
_DYNAMIC_SETTERS = frozenset({"eval", "source", "."})
_DECLARATIONS = frozenset({"local", "declare", "typeset", "export", "readonly"})
_SETTERS = frozenset({"read", "mapfile", "readarray", "getopts", "let", "unset"})


# Names whose words a for loop's body is judged with one by one; other plain
# words (file names, numbers) all behave alike, so one stands for them all.
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
_NOTABLE_WORDS = frozenset({"main", "master", "HEAD", "0", "6"})
_CD_OPTIONS = OptionSpec(only=frozenset({"-L", "-P", "-e", "-@"}))
_SET_ERREXIT = re.compile(r"-[a-zA-Z]*e")
_PLACEHOLDER_CHARS = frozenset(PLACEHOLDERS)
# A command whose name the user's environment decides is tried as each of
# these; if one would need approval, so does the command.
_EXPLORED = (
    *sorted(ARGUMENT_RULES),
    "sh",
    "perl",
    "node",
    "source",
    *sorted(set(WRAPPERS) - {"trap"}),
)
# Leading words that run the next one as the command (for fork bombs).
_PREFIXES = frozenset({"command", "builtin", "exec", "nohup", "setsid", "time", "nice"})


class CommandJudge:
    """Walks a parsed command, judging every simple command in it; what it
    finds is in ``found`` (rule key: detail), its work in ``work``."""

    def __init__(self, start: str | None, budget: int) -> None:
        self.found: dict[str, str] = {}
        self.work = 0
        self.budget = budget
        self.depth = 0
        self.start = start
        self.facts = Facts()
        # What the variables the script set so far hold, in the order it runs.
        self.values: dict[str, Known] = {}
        # Where the command may be now, where it was before the last cd,
        # pushd's stack, and every directory it went to.
        self.cwds: Dirs = (START,)
        self.previous: Dirs | None = None
        self.dirstack: list[Dirs] = []
        self.visited: dict[tuple[Segment, ...], None] = {START: None}
        # The last command was a cd: where it leads if it works, and if not.
        self.cd_result: tuple[Dirs, Dirs] | None = None
        self.exits = False
        self.errexit = False
        self.functions: dict[str, Command] = {}
        # Functions judged, with the state they were called in.
        self.called: set[object] = set()
        self.called_names: set[str] = set()
        self.calling: set[str] = set()
        self.aliases: dict[str, str | None] = {}
        self.expanding: set[str] = set()
        # Names of files a download wrote ("*": one whose name is unknown),
        # and of files the command wrote otherwise, with their text if known.
        self.downloaded: set[str] = set()
        self.written: dict[str, str | None] = {}
        self.deferred: list[tuple[Value, str, Facts]] = []
        # Functions defined in the text being judged, in order.
        self.defined: list[str] = []
        # >(...) scripts, judged with what the command around them writes.
        self.outputs: list[Script] = []
        self.exploring = 0

    # -- bookkeeping --

    def spend(self, units: int) -> None:
        self.work += units
        if self.work > self.budget:
            self.work = self.budget
            raise OverBudget

    def flag(self, key: str, detail: str) -> None:
        self.found.setdefault(key, shorten(detail))

    def place(self) -> Place:
        return Place(self.cwds, self.start)

    def breadth(self, value: Value) -> int:
        self.spend(len(value.segments) + sum(len(d) for d in self.cwds))
        return breadth(value, self.place())

    def scan(self, words: Sequence[Value], spec: OptionSpec, start: int = 0) -> Scan:
        found = scan(words, spec, start)
        self.spend(found.examined)
        return found

    def environ(self, value: Value) -> None:
        name = (literal(value) or value.segments[0][1]).partition("=")[0]
        self.facts = Facts(self.facts.assigned | {name}, self.facts.dynamic)

    def defer(self, action: Value, what: str) -> None:
        if not self.exploring:
            self.deferred.append((action, what, self.facts))

    # -- where the script is and what its variables hold --

    def snapshot(self) -> _State:
        self.spend(len(self.values))
        return _State(self.cwds, dict(self.values))

    def restore(self, state: _State) -> None:
        self.spend(len(state.values))
        self.cwds = state.cwds
        self.values = dict(state.values)

    def merge(self, states: Sequence[_State]) -> None:
        """Continue in any of ``states``: every directory of them, and the
        values they agree on."""
        self.cwds = merge_dirs(*(state.cwds for state in states))
        names: dict[str, None] = {}
        for state in states:
            names.update(dict.fromkeys(state.values))
        self.spend(len(names) * len(states))
        values: dict[str, Known] = {}
        for name in names:
            seen = {state.values.get(name, _UNSET) for state in states}
            values[name] = seen.pop() if len(seen) == 1 else _UNKNOWN_VALUE
        self.values = {name: v for name, v in values.items() if v is not _UNSET}

    # -- scripts --

    def top(self, command: str) -> None:
        self.text(command, "the command", same_shell=True)
        if self.deferred and len(self.visited) > 1:
            # Traps run later, wherever the script went by then.
            self.cwds = merge_dirs(tuple(self.visited))
            for action, what, facts in self.deferred:
                self.facts = facts
                self.inline([action], what, same_shell=True)

    def text(self, source: str, what: str, *, same_shell: bool = False) -> Output:
        """Parse and judge ``source``; ``what`` names it in messages.  A new
        shell (``sh -c``) starts without the variables set so far; the same
        one (``eval``) keeps them."""
        try:
            script = parse(source, depth=self.depth, meter=self.spend)
        except ShellSyntaxError as exc:
            self.flag("unreadable", f"{what}: {exc}")
            return NOTHING
        self.spend(len(source))
        outer, errexit, values = self.facts, self.errexit, self.values
        self.facts = facts_of(script, outer)
        if not same_shell:
            self.values = {}
        defined = len(self.defined)
        try:
            out = self.script(script, NO_FEED)
            self.drain_outputs(Feed("computed"))
            self.uncalled(defined)
            return out
        finally:
            self.facts, self.errexit = outer, errexit
            if not same_shell:
                self.values = values

    def script(self, script: Script, feed: Feed) -> Output:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH + 2:
                self.flag("unreadable", "nested too deeply")
                return NOTHING
            downloads = False
            out = NOTHING
            for item in script.items:
                out = self.and_or(item, feed)
                downloads = downloads or out.downloads
            single = len(script.items) == 1 and len(script.items[0].pipelines) == 1
            if not single:
                return Output(downloads)
            return Output(downloads, out.text, out.file, out.setup)
        finally:
            self.depth -= 1

    def and_or(self, item: AndOr, feed: Feed) -> Output:
        entry = self.snapshot() if item.background else None
        # Where the list may stop: after a command that failed before `&&`,
        # or one that worked before `||`.
        stops: list[_State] = []
        cd: tuple[Dirs, Dirs] | None = None
        dead = False
        downloads = False
        out = NOTHING
        for k, pipeline in enumerate(item.pipelines):
            if k:
                op = item.ops[k - 1] if k - 1 < len(item.ops) else "&&"
                stop = self.snapshot()
                if cd is not None:
                    success, failure = cd
                    stop = _State(failure if op == "&&" else success, stop.values)
                    self.cwds = success if op == "&&" else failure
                stops.append(stop)
            self.cd_result = None
            self.exits = False
            out = self.pipeline(pipeline, feed)
            downloads = downloads or out.downloads
            single = len(pipeline.commands) == 1
            cd = self.cd_result if single else None
            dead = self.exits and single
        ends: list[_State] = []
        if cd is not None:
            ends.append(_State(cd[0], self.values))
            if not self.errexit:
                ends.append(_State(cd[1], self.values))  # the cd may fail
        elif not dead:
            ends.append(_State(self.cwds, self.values))
        if stops:
            self.merge([*stops, *ends])
        elif ends:
            self.cwds = merge_dirs(*(state.cwds for state in ends))
        if entry is not None:
            self.restore(entry)  # a background job runs in a subshell
        for d in self.cwds:
            self.visited[d] = None
        return Output(downloads, out.text, out.file, out.setup)

    def pipeline(self, pipeline: Pipeline, feed: Feed) -> Output:
        several = len(pipeline.commands) > 1
        downloaded = False
        out = NOTHING
        for j, command in enumerate(pipeline.commands):
            if j:
                feed = Feed("download") if downloaded else feed_of(out)
            entry = self.snapshot() if several else None
            out = self.command(command, feed)
            if entry is not None:
                self.restore(entry)  # each part of a pipeline runs in a subshell
            downloaded = downloaded or out.downloads
        return Output(downloaded, out.text, out.file, out.setup)

    def command(self, command: Command, feed: Feed) -> Output:
        if isinstance(command, Simple):
            return self.simple(command, feed)
        if isinstance(command, FuncDef):
            return self.define(command)
        outer_outputs, self.outputs = self.outputs, []
        entry = self.snapshot()
        feed, downloads, writes = self.redirects(command.redirects, feed)
        text: str | None = None
        if command.kind in ("for", "select"):
            downloads = self.loop(command, feed) or downloads
        else:
            for word in command.words:
                downloads = any([v.downloads for v in self.expand(word)]) or downloads
            for sub in command.subs:
                downloads = self.script(sub, NO_FEED).downloads or downloads
            out = self.bodies(command, feed)
            downloads = downloads or out.downloads
            text = out.text
        if command.kind == "subshell":
            self.restore(entry)
        elif command.kind != "group":
            self.merge([entry, self.snapshot()])  # the bodies may not run
        keeps_text = command.kind in ("group", "subshell") and len(command.bodies) == 1
        text = text if keeps_text else None
        self.after_output(writes, downloads, Output(text=text))
        self.outputs = outer_outputs
        return Output(downloads, text)

    def bodies(self, command: Compound, feed: Feed) -> Output:
        entry = self.snapshot()
        downloads = False
        out = NOTHING
        for body in command.bodies:
            out = self.script(body, feed)
            downloads = downloads or out.downloads
        if command.kind in ("while", "until") and self.changed(entry):
            # A later round starts where the last one ended.
            self.merge([entry, self.snapshot()])
            for body in command.bodies:
                self.script(body, feed)
        return Output(downloads, out.text)

    def changed(self, state: _State) -> bool:
        return self.cwds != state.cwds or self.values != state.values

    def loop(self, command: Compound, feed: Feed) -> bool:
        name = word_literal(command.words[0]) if command.words else None
        values: list[Value] = []
        downloads = False
        for word in command.words[1:]:
            expanded = self.expand(word)
            downloads = downloads or any(v.downloads for v in expanded)
            values.extend(expanded)
        for sub in command.subs:
            downloads = self.script(sub, NO_FEED).downloads or downloads
        choices: list[Value | None] = [None]
        if len(command.words) > 1:
            distinct: dict[object, Value] = {}
            for value in values:
                distinct.setdefault(_loop_signature(value), value)
            if 0 < len(distinct) <= MAX_LOOP_VALUES:
                choices = list(distinct.values())
        entry = self.snapshot()
        after: list[_State] = [entry]  # the list may be empty
        for choice in choices:
            self.restore(entry)
            if name is not None:
                # The variable holds each word in turn.
                self.values[name] = ("value", choice) if choice is not None else _UNKNOWN_VALUE
            round_start = self.snapshot()
            downloads = self.bodies(command, feed).downloads or downloads
            if self.changed(round_start):
                # A later round starts where this one ended.
                self.merge([round_start, self.snapshot()])
                self.bodies(command, feed)
            after.append(self.snapshot())
        self.merge(after)
        return downloads

    def define(self, definition: FuncDef) -> Output:
        """A function is judged where it is called (with the directory and
        variables of that moment); one never called, at the end."""
        if _starts_itself_concurrently(definition.body, definition.name, False):
            self.flag("fork_bomb", f"{definition.name}() calls itself in a pipe or background")
        self.functions[definition.name] = definition.body
        self.defined.append(definition.name)
        return NOTHING

    def call(self, name: str) -> None:
        """Judge a function's body where it is called; its cd and variables
        stay in effect after it."""
        self.spend(len(self.values))
        key = (name, self.cwds, frozenset(self.values.items()))
        self.called_names.add(name)
        if name in self.calling or key in self.called:
            return
        self.called.add(key)
        self.calling.add(name)
        try:
            self.command(self.functions[name], NO_FEED)
        finally:
            self.calling.discard(name)

    def uncalled(self, since: int) -> None:
        """Judge the functions defined since index ``since`` that nothing
        called (something this check does not follow might)."""
        names = self.defined[since:]
        del self.defined[since:]
        for name in names:
            if name not in self.called_names and name in self.functions:
                entry = self.snapshot()
                self.call(name)
                self.restore(entry)

    # -- words --

    def expand(self, word: Word) -> list[Value]:
        values = expand(word, self)
        if "HOME" in self.facts.assigned:
            # The script changes HOME, so ~ is no longer the user's home.
            values = [_unknown_homes(v) for v in values]
        return values

    def variable(self, var: Var) -> tuple[Segment, ...]:
        if var.prefix == "#":
            return (("item", ""),)
        if var.prefix == "!":
            return UNKNOWN
        name, op = var.name, var.op
        plain = op in ("", "?", ":?")
        facts = self.facts
        if name in ("HOME", "PWD") and name not in facts.assigned:
            if plain or op[:1] in "-=" or op[:2] in (":-", ":="):
                return (("home", ""),) if name == "HOME" else (("pwd", ""),)
        if not plain:
            return UNKNOWN
        known = self.values.get(name)
        if known is not None:
            kind, data = known
            if kind == "value":
                assert isinstance(data, Value)
                return data.segments
            if kind == "item":
                return (("item", ""),)
            if kind == "lit":
                assert isinstance(data, str)
                if var.quoted:
                    return (("lit", data),)
                return UNKNOWN if any(c.isspace() for c in data) else (("raw", data),)
            return UNKNOWN
        if facts.from_environment(name):
            return (("env", ""),)
        return UNKNOWN

    def substitution(self, script: Script, how: str) -> object:
        if how == ">(":
            self.outputs.append(script)
            return NOTHING
        entry = self.snapshot()
        try:
            return self.script(script, NO_FEED)
        finally:
            self.restore(entry)  # it runs in a subshell

    @staticmethod
    def downloads(result: object) -> bool:
        return isinstance(result, Output) and result.downloads

    def redirects(
        self, redirects: Sequence[Redirect], feed: Feed
    ) -> tuple[Feed, bool, list[tuple[Value, bool]]]:
        """The command's stdin, whether a redirection downloads, and the
        files its output is written to."""
        downloads = False
        writes: list[tuple[Value, bool]] = []
        for redirect in redirects:
            if redirect.heredoc is not None:
                body = redirect.heredoc.body or Word((), "")
                value = self.expand(body)[0]
                downloads = downloads or value.downloads
                feed = _word_feed(value, "")
                continue
            assert redirect.target is not None
            values = self.expand(redirect.target)
            downloads = downloads or any(v.downloads for v in values)
            op = redirect.op
            if op == "<<<":
                feed = _word_feed(values[0], "\n")
            elif op == "<" and redirect.fd in (None, "0"):
                value = values[0]
                if value.feed is not None:
                    feed = feed_of(value.feed)
                else:
                    feed = Feed("file", _basename(value))
            if op in (">", ">>", ">|", "&>", "&>>", "<>"):
                for value in values:
                    device_write(self, value, f"{op} {redirect.target.text}")
                if redirect.fd in (None, "1") or op.startswith("&"):
                    writes.extend((v, op in (">>", "&>>")) for v in values)
        return feed, downloads, writes

    def after_output(
        self, writes: Sequence[tuple[Value, bool]], downloads: bool, out: Output
    ) -> None:
        """Remember what the command wrote into files (a download, known
        text, or something else), and judge the ``>(...)`` scripts that read
        its output."""
        for value, append in writes:
            if downloads:
                self.downloaded.add(_basename(value))
            else:
                self.wrote(value, None if append else out.text)
        self.drain_outputs(Feed("download") if downloads else Feed("computed"))

    def wrote(self, value: Value, text: str | None) -> None:
        name = _basename(value)
        self.written[name] = text
        self.downloaded.discard(name)

    def copied(self, args: Sequence[Value]) -> None:
        """cp, mv, ln, install: the target holds what the sources held."""
        paths = [v for v in args if not (literal(v) or "").startswith("-")]
        if len(paths) < 2:
            return
        sources, target = [_basename(v) for v in paths[:-1]], paths[-1]
        if any(self.is_downloaded(name) for name in sources):
            self.downloaded.add(_basename(target))
        elif any(name in self.written for name in sources):
            self.written[_basename(target)] = None

    def drain_outputs(self, feed: Feed) -> None:
        while self.outputs:
            script = self.outputs.pop()
            entry = self.snapshot()
            try:
                self.script(script, feed)
            finally:
                self.restore(entry)

    # -- one command --

    def simple(self, command: Simple, feed: Feed) -> Output:
        outer_outputs, self.outputs = self.outputs, []
        try:
            return self.simple_command(command, feed)
        finally:
            self.outputs = outer_outputs

    def simple_command(self, command: Simple, feed: Feed) -> Output:
        self.spend(COMMAND_COST)
        downloads = False
        for word in command.assigns:
            downloads = any([v.downloads for v in self.expand(word)]) or downloads
        feed, redirected, writes = self.redirects(command.redirects, feed)
        values: list[Value] = []
        for word in command.words:
            values.extend(self.expand(word))
        downloads = downloads or redirected or any(v.downloads for v in values)
        if not values:
            for word in command.assigns:
                self.assign(word)
            self.after_output(writes, downloads, Output(text=""))
            return Output(downloads)
        entry = dict(self.values) if command.assigns else None
        for word in command.assigns:
            self.assign(word)  # for this command only
        try:
            return self.simple_words(command, values, feed, writes, downloads)
        finally:
            if entry is not None:
                self.values = entry

    def assign(self, word: Word) -> None:
        name, known = assignment(word)
        if name is not None:
            self.values[name] = known

    def sets(self, name: str, args: Sequence[Word]) -> None:
        """What a builtin that sets variables does to them."""
        if name in _DYNAMIC_SETTERS:
            self.values.clear()  # eval or source may set anything
        elif name in _DECLARATIONS:
            for word in args:
                if "=" in (word_literal(word) or word.text):
                    self.assign(word)
                elif (word_literal(word) or "-").startswith("-"):
                    continue
                elif name == "local":
                    self.values[word.text] = _UNKNOWN_VALUE
        elif name == "printf":
            texts = [word_literal(w) for w in args]
            if "-v" in texts[:-1]:
                target = texts[texts.index("-v") + 1]
                if target:
                    self.values[target.partition("[")[0]] = _UNKNOWN_VALUE
        elif name in _SETTERS:
            for word in args:
                target = (word_literal(word) or "").partition("=")[0]
                if target and not target.startswith("-"):
                    self.values[target] = _UNKNOWN_VALUE

    def simple_words(
        self,
        command: Simple,
        values: list[Value],
        feed: Feed,
        writes: list[tuple[Value, bool]],
        downloads: bool,
    ) -> Output:
        k = 0
        while k < len(values) - 1 and command_name(values[k]) in ("builtin", "command"):
            k += 1
        name = command_name(values[k])
        if name in ("cd", "pushd", "popd"):
            self.change_dir(name, values, k + 1)
            return Output(downloads)
        if name in ("exit", "return") or (name == "exec" and len(values) > 1):
            self.exits = True
        elif name == "set":
            self.set_options(values[1:])
        elif name in ("alias", "unalias"):
            self.alias_definitions(name, values[1:])
        if name is not None:
            self.sets(name, _arguments(command.words))
        first = command_name(values[0])
        if first in self.functions and not self.exploring:
            self.call(first)
        out = self.run(values, feed, direct=True)
        downloads = downloads or out.downloads
        if out.setup and not self.trusts_setup(values[0]):
            out = Output(out.downloads, out.text, out.file)
        self.after_output(writes, downloads or feed.kind == "download", out)
        return Output(downloads, out.text, out.file, out.setup)

    def run(
        self, words: Sequence[Value], feed: Feed, start: int = 0, *, direct: bool = False
    ) -> Output:
        """Judge one command given as its expanded words from ``start``;
        ``direct``: as the shell reads it (aliases and functions apply)."""
        entry, facts = self.cwds, self.facts
        keyword = False  # after `time` or `coproc`, the shell looks up functions
        try:
            i = start
            while i < len(words):
                self.spend(2)
                name = command_name(words[i])
                if name is None:
                    return self.computed(words, i, feed)
                if direct and i == start and name in self.aliases:
                    if name not in self.expanding:
                        return self.alias(name, words, i)
                if keyword and name in self.functions and not self.exploring:
                    self.call(name)
                keyword = direct and name in ("time", "coproc") and (i == start or keyword)
                wrapper = WRAPPERS.get(name)
                if wrapper is None:
                    return self.rules(name, words, i, feed)
                step = wrapper(self, words, i + 1, feed)
                if step is None:
                    return NOTHING
                if isinstance(step, Output):
                    return step
                assert isinstance(step, Call)
                words, i = step.words, step.start
                if step.cwd is not None:
                    self.cwds = self.directories(step.cwd)
            return NOTHING
        finally:
            self.cwds, self.facts = entry, facts

    def rules(self, name: str, words: Sequence[Value], i: int, feed: Feed) -> Output:
        args = words[i + 1 :]
        self.spend(len(args))
        rule = rule_for(name)
        if rule is not None:
            rule(self, args, words[i:])
        downloads = name in DOWNLOADERS
        if downloads:
            self.downloaded.update(downloaded_files(name, args))
        if name == "tee" and feed.kind == "download":
            self.downloaded.update(_basename(v) for v in args if not v.text.startswith("-"))
        if "/" in (literal(words[i]) or ""):
            self.run_file(_basename(words[i]), True, words[i].text)
        if name in ("cp", "mv", "ln", "install"):
            self.copied(args)
        if name == "tee" and feed.kind != "download":
            for value in args:
                if not value.text.startswith("-"):
                    self.wrote(value, feed.text if feed.kind == "text" else None)
        spec = interpreter(name)
        if spec is not None:
            kind, source = program_source(spec, args, self.spend)
            downloads = self.program(spec.shell, kind, source, feed, name).downloads or downloads
        elif name in ("source", ".") and args:
            if args[0].feed is not None or literal(args[0]) in STDIN_PATHS:
                out = self.program(True, "file", args[0], feed, name)
            else:
                out = self.run_file(_basename(args[0]), True, name, same_shell=True)
            downloads = out.downloads or downloads
        if is_setup_command(name, args):
            return Output(downloads, setup=True)
        out = output_of(name, args, feed)
        return Output(downloads, out.text, out.file)

    def computed(self, words: Sequence[Value], i: int, feed: Feed) -> Output:
        """A command whose name an expansion decides."""
        word = words[i]
        var = word.var
        default = _default_name(var) if var is not None else None
        if (
            var is None
            or var.prefix
            or (var.op not in ("", "?", ":?") and default is None)
            or not self.facts.from_environment(var.name)
        ):
            self.flag("unreadable", f"the command name is computed: {word.text}")
            return NOTHING
        if default is not None:
            self.run([lit_value(default), *words[i + 1 :]], feed)
        danger = self.explore(words, i, feed)
        if danger is not None:
            self.flag(
                "unreadable",
                f"the command name comes from ${var.name}; as {danger} it would need "
                f"approval: {words_text(words[i:])}",
            )
        return NOTHING

    def explore(self, words: Sequence[Value], i: int, feed: Feed) -> str | None:
        """The first command name that would make ``words[i:]`` need approval."""
        if self.exploring:
            return "<any command>"
        trial = list(words[i:])
        self.spend(len(trial))
        found, self.found = self.found, {}
        self.exploring += 1
        try:
            for name in _EXPLORED:
                trial[0] = lit_value(name)
                self.run(trial, feed)
                # What the check cannot read is no reason on its own here.
                if any(key != "unreadable" for key in self.found):
                    return name
                self.found.clear()
            return None
        finally:
            self.exploring -= 1
            self.found = found

    def alias(self, name: str, words: Sequence[Value], i: int) -> Output:
        value = self.aliases[name]
        if value is None:
            self.flag("unreadable", f"the alias {name} has computed text")
            return NOTHING
        args = [_requote(v) for v in words[i + 1 :]]
        # An alias ending in a blank makes the next word an alias too.
        if value[-1:].isspace() and args and args[0] in self.aliases:
            if args[0] not in self.expanding and self.aliases[args[0]] is not None:
                args[0] = self.aliases[args[0]] or ""
        rest = " ".join(args)
        self.spend(len(rest) + len(value))
        self.expanding.add(name)
        try:
            return self.text(f"{value} {rest}", f"the alias {name}", same_shell=True)
        finally:
            self.expanding.discard(name)

    def alias_definitions(self, name: str, args: Sequence[Value]) -> None:
        for value in args:
            text = literal(value)
            if text is None:
                self.flag("unreadable", f"{name} with computed text: {value.text}")
                continue
            if name == "unalias":
                if text == "-a":
                    self.aliases.clear()
                self.aliases.pop(text, None)
            elif "=" in text and not text.startswith("-"):
                alias, _, body = text.partition("=")
                self.aliases[alias] = body

    def set_options(self, args: Sequence[Value]) -> None:
        texts = [literal(v) or "" for v in args]
        for k, text in enumerate(texts):
            if text == "--":
                break
            if _SET_ERREXIT.match(text):
                self.errexit = True
            elif text.startswith("+") and "e" in text:
                self.errexit = False
            elif text == "-o" and k + 1 < len(texts) and texts[k + 1] == "errexit":
                self.errexit = True

    # -- the working directory --

    def directories(self, target: Value) -> Dirs:
        """The directories ``cd target`` may lead to from here."""
        self.spend(len(target.segments) + sum(len(d) for d in self.cwds))
        return merge_dirs(tuple(normalize_dir(rooted(target.segments, d)) for d in self.cwds))

    def change_dir(self, name: str, values: Sequence[Value], start: int) -> None:
        old = self.cwds
        found = self.scan(values, _CD_OPTIONS, start)
        operands = [values[i] for i in found.operands]
        new: Dirs
        if name == "popd":
            new = self.dirstack.pop() if self.dirstack and not operands else (UNKNOWN,)
        elif not operands:
            new = (UNKNOWN,) if name == "pushd" else self.directories(HOME)
        else:
            target = operands[0]
            text = literal(target)
            if text == "-":
                new = self.previous or (UNKNOWN,)
            elif name == "pushd" and text is not None and text[:1] in "+-":
                new = (UNKNOWN,)
            elif "CDPATH" in self.facts.assigned and not (text or "/").startswith(("/", ".")):
                new = (UNKNOWN,)  # cd looks the name up in CDPATH first
            else:
                new = self.directories(target)
        if name == "pushd":
            self.dirstack.append(old)
        self.previous = old
        self.cd_result = (new, old)
        self.cwds = new
        for d in new:
            self.visited[d] = None

    # -- programs --

    def program(self, shell: bool, kind: str, value: Value | None, feed: Feed, name: str) -> Output:
        """Judge the program an interpreter runs: inline, a file, or stdin."""
        if kind == "inline":
            assert value is not None
            return self.inline([value], f"the script given to {name}", shell=shell)
        if kind == "file":
            assert value is not None
            return self.program_file(value, shell, name, feed)
        if kind == "stdin":
            return self.run_program(feed, shell, name)
        return NOTHING

    def program_file(self, value: Value, shell: bool, name: str, feed: Feed = NO_FEED) -> Output:
        if value.feed is not None:
            return self.run_program(feed_of(value.feed), shell, name)
        if literal(value) in STDIN_PATHS:
            return self.run_program(feed, shell, name)
        return self.run_file(_basename(value), shell, name)

    def run_file(self, file: str, shell: bool, name: str, *, same_shell: bool = False) -> Output:
        """Judge a program running the file ``file`` (its name)."""
        if self.is_downloaded(file):
            self.flag("pipe_to_shell", f"{name} runs a downloaded file: {file}")
        elif file in self.written and shell:
            text = self.written[file]
            if text is None:
                self.flag("unreadable", f"{name} runs {file}, which another command wrote")
            else:
                return self.text(text, f"{file} run by {name}", same_shell=same_shell)
        return NOTHING  # a script file: not ours to read

    def run_program(self, program: Feed, shell: bool, name: str) -> Output:
        if program.kind == "download":
            self.flag("pipe_to_shell", f"{name} runs what a download printed")
        elif program.kind == "file":
            return self.run_file(program.text, shell, name)
        elif shell and program.kind == "text":
            return self.text(program.text, f"the script given to {name}")
        elif shell and program.kind == "computed":
            self.flag("unreadable", f"{name} runs a script that another command printed")
        return NOTHING

    def inline(
        self,
        values: Sequence[Value],
        what: str,
        *,
        text: str | None = None,
        cwd: Value | None = None,
        shell: bool = True,
        same_shell: bool = False,
    ) -> Output:
        """Judge a script given as text (``sh -c``, ``eval``, ``su -c``, ...)."""
        self.spend(len(values))
        if any(v.downloads for v in values):
            self.flag("pipe_to_shell", f"{what} runs a download: {words_text(values)}")
            return NOTHING
        if values and all(isinstance(v.output, Output) and v.output.setup for v in values):
            return NOTHING  # eval "$(ssh-agent -s)"
        if not shell:
            return NOTHING
        source = text if text is not None else " ".join(placeholder_text(v) for v in values)
        if source.strip() and set(source) <= _PLACEHOLDER_CHARS | set(" \t\n"):
            self.flag("unreadable", f"{what} runs text an expansion decides: {words_text(values)}")
            return NOTHING
        entry = self.cwds
        if cwd is not None:
            self.cwds = self.directories(cwd)
        try:
            return self.text(source, what, same_shell=same_shell)
        finally:
            self.cwds = entry

    def trusts_setup(self, word: Value) -> bool:
        """Whether a setup tool's output is the installed tool's: not a
        function or a relative path, and PATH is not changed."""
        name = command_name(word)
        path = literal(word) or ""
        return (
            name not in self.functions
            and ("/" not in path or path.startswith("/"))
            and "PATH" not in self.facts.assigned
        )

    def is_downloaded(self, name: str) -> bool:
        if not self.downloaded:
            return False
        return name in self.downloaded or "*" in self.downloaded or name == "*"


# --- helpers -----------------------------------------------------------------


def _arguments(words: Sequence[Word]) -> Sequence[Word]:
    """The arguments of a simple command, after ``builtin``/``command``."""
    k = 0
    while k < len(words) - 1 and word_literal(words[k]) in ("builtin", "command"):
        k += 1
    return words[k + 1 :]


def _word_feed(value: Value, suffix: str) -> Feed:
    if value.downloads:
        return Feed("download")
    return Feed("text", placeholder_text(value) + suffix)


def _basename(value: Value) -> str:
    text = literal(value)
    if text is None:
        return "*"
    return text.rstrip("/").rsplit("/", 1)[-1] or "*"


def _unknown_homes(value: Value) -> Value:
    if not any(kind == "home" for kind, _ in value.segments):
        return value
    segments = tuple(UNKNOWN[0] if kind == "home" else (kind, t) for kind, t in value.segments)
    return Value(segments, value.text, value.downloads, value.feed, value.output, True)


def _default_name(var: Var) -> str | None:
    """The literal default of ``${NAME:-default}``, if that is a command name."""
    for op in (":-", ":=", "-", "="):
        if var.op.startswith(op):
            default = var.op[len(op) :]
            return default if re.fullmatch(r"[A-Za-z0-9_./+-]+", default) else None
    return None


def _requote(value: Value) -> str:
    """A word as shell text again (for an alias's arguments)."""
    out: list[str] = []
    for kind, text in value.segments:
        if kind == "lit":
            out.append(shlex.quote(text))
        elif kind == "raw":
            out.append(text)
        else:
            out.append(placeholder_text(Value(((kind, text),))))
    return "".join(out) or "''"


def _loop_signature(value: Value) -> object:
    """Values of a for loop that the rules treat alike share a signature."""
    text = literal(value)
    if text is None:
        return value.segments
    if (
        _PLAIN_WORD.fullmatch(text)
        and text not in _NOTABLE_WORDS
        and rule_for(text) is None
        and text not in WRAPPERS
        and interpreter(text) is None
        and text not in DOWNLOADERS
    ):
        return "plain"
    return text


# --- fork bombs ------------------------------------------------------------


def _called_name(command: Simple) -> str | None:
    for word in command.words:
        text = word_literal(word)
        if text not in _PREFIXES:
            return text
    return None


def _starts_itself_concurrently(node: Command | Script, name: str, concurrent: bool) -> bool:
    if isinstance(node, Script):
        return any(_and_or_starts(item, name, concurrent) for item in node.items)
    if isinstance(node, Simple):
        return concurrent and _called_name(node) == name
    if isinstance(node, Compound):
        return any(_starts_itself_concurrently(b, name, concurrent) for b in node.bodies)
    return False


def _and_or_starts(item: AndOr, name: str, concurrent: bool) -> bool:
    for pipeline in item.pipelines:
        here = concurrent or item.background or len(pipeline.commands) > 1
        if any(_starts_itself_concurrently(c, name, here) for c in pipeline.commands):
            return True
    return False
