"""Commands that run other commands (sudo, env, xargs, find -exec, ...): each
wrapper takes the arguments after its name and returns the command it runs,
or judges it itself (a script it re-parses, find's -exec commands).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol

from hermes_trio.tools.command_programs import NO_FEED, NOTHING, Feed, Output
from hermes_trio.tools.command_rules import lit_value, names, words_text
from hermes_trio.tools.shell_words import HERE, SYSTEM, Value, breadth, literal, placeholder_text

__all__ = ["WRAPPERS", "Judge", "Step", "Wrapper"]


class Judge(Protocol):
    """What a wrapper may ask of the policy's judge."""

    def flag(self, key: str, detail: str) -> None: ...

    def text(self, source: str, what: str) -> Output: ...

    def run(self, words: list[Value], feed: Feed) -> Output: ...

    def eval(self, args: Sequence[Value]) -> Output: ...

    def run_program(self, program: Feed, shell: bool, name: str) -> Output: ...


_UNKNOWN_ARG = Value((("unknown", ""),), "<input>")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


# --- commands that run other commands --------------------------------------

Step = list[Value] | Output | None
Wrapper = Callable[[Judge, list[Value], Feed], Step]


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
                seen[name] = lit_value(rest)
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
                    seen[option] = lit_value(rest)
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

    def unwrap(judge: Judge, args: list[Value], feed: Feed) -> Step:
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


def _inline(judge: Judge, value: Value, what: str) -> Output:
    if value.downloads:
        judge.flag("pipe_to_shell", f"{what} runs a download: {value.text}")
        return NOTHING
    return judge.text(placeholder_text(value), what)


def _env(judge: Judge, args: list[Value], feed: Feed) -> Step:
    i, seen = _after_options(
        args, frozenset({"-u", "-C", "-S", "-P", "--unset", "--chdir", "--split-string"})
    )
    rest = _skip_assignments(args[i:])
    split = _script_option("-S", "--split-string")(seen)
    if split is not None:
        joined = " ".join(placeholder_text(v) for v in [split, *rest])
        return judge.text(joined, "env -S")
    return rest or None


def _timeout(judge: Judge, args: list[Value], feed: Feed) -> Step:
    i, _ = _after_options(args, frozenset({"-s", "-k", "--signal", "--kill-after"}))
    return args[i + 1 :] or None


def _flock(judge: Judge, args: list[Value], feed: Feed) -> Step:
    i, seen = _after_options(
        args, frozenset({"-w", "-E", "-c", "--timeout", "--conflict-exit-code", "--command"})
    )
    script = _script_option("-c", "--command")(seen)
    if script is not None:
        return _inline(judge, script, "flock -c")
    return args[i + 1 :] or None


def _su(judge: Judge, args: list[Value], feed: Feed) -> Step:
    _, seen = _after_options(
        args,
        names(
            "-c -s -g -G -w --command --session-command --shell --group --supp-group "
            "--whitelist-environment"
        ),
    )
    script = _script_option("-c", "--command", "--session-command")(seen)
    return _inline(judge, script, "su -c") if script is not None else None


def _watch(judge: Judge, args: list[Value], feed: Feed) -> Step:
    i, seen = _after_options(args, frozenset({"-n", "-q", "--interval"}))
    rest = args[i:]
    if not rest:
        return None
    if "-x" in seen or "--exec" in seen:
        return rest
    if any(v.downloads for v in rest):
        judge.flag("pipe_to_shell", f"watch runs a download: {words_text(rest)}")
        return NOTHING
    return judge.text(" ".join(placeholder_text(v) for v in rest), "watch")


def _trap(judge: Judge, args: list[Value], feed: Feed) -> Step:
    if len(args) < 2 or literal(args[0]) in ("-", "-l", "-p", "--", ""):
        return None
    return _inline(judge, args[0], "trap")


def _eval(judge: Judge, args: list[Value], feed: Feed) -> Step:
    return judge.eval(args)


def _busybox(judge: Judge, args: list[Value], feed: Feed) -> Step:
    if args and (literal(args[0]) or "").startswith("-"):
        return None
    return args or None


_XARGS_WITH_VALUE = names(
    "-a -d -E -I -L -n -P -s --arg-file --delimiter --max-lines --max-args "
    "--max-procs --max-chars --process-slot-var --eof"
)


def _xargs(judge: Judge, args: list[Value], feed: Feed) -> Step:
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
    command = args[i:] or [lit_value("echo")]
    if replace:
        return [_substitute(v, replace, (("unknown", ""),)) for v in command]
    return [*command, _UNKNOWN_ARG]


_PARALLEL_WITH_VALUE = names(
    "-j -N -n -S -I -a -d -E -C --jobs --max-args --sshlogin --arg-file --delimiter "
    "--colsep --halt --joblog --results --tmpdir --timeout --delay --retries "
    "--memfree --load --basefile --workdir --env --tagstring --block --sshloginfile "
    "--slf"
)
_PARALLEL_INPUTS = frozenset({":::", "::::", ":::+", "::::+"})
_PARALLEL_SLOT = re.compile(r"\{(?:\d*(?:\.|/|//|/\.)?|#|%)\}")


def _parallel(judge: Judge, args: list[Value], feed: Feed) -> Step:
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
        judge.flag("pipe_to_shell", f"parallel runs a download: {words_text(template)}")
        return NOTHING
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


_FIND_NOT_TESTS = names(
    "-type -xtype -depth -maxdepth -mindepth -mount -xdev -noleaf "
    "-ignore_readdir_race -noignore_readdir_race -follow -regextype -daystart -warn "
    "-nowarn -d -print -print0 -printf -fprint -fprint0 -fprintf -ls -fls -prune "
    "-quit -true -a -and -o -or -not -delete -help -version"
)
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _find(judge: Judge, args: list[Value], feed: Feed) -> Step:
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
        roots = [lit_value(".")]
    delete = tests = alternatives = False
    negated = False
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
        elif text in ("-o", "-or", ","):
            alternatives = True
        elif text in ("!", "-not"):
            negated = True
            continue
        elif text is not None and text.startswith("-") and text not in _FIND_NOT_TESTS:
            # `! -name keep` and `-name x -o ...` select nearly everything.
            tests = tests or not negated
        negated = False
    tests = tests and not alternatives
    root = max(roots, key=breadth)
    reach = breadth(root)
    # A test that selects files narrows the working directory, not a whole
    # system tree or home.
    broad = reach == SYSTEM or (reach == HERE and not tests)
    if delete and broad:
        judge.flag("find_delete_broad", words_text([lit_value("find"), *args]))
    found = root.segments if broad else (*root.segments, ("raw", "/"), ("item", ""))
    for command in commands:
        if command:
            judge.run([_substitute(v, "{}", found) for v in command], NO_FEED)
    return NOTHING


_SUDO_WITH_VALUE = names(
    "-u -g -C -D -h -p -r -t -U -T -R --user --group --close-from --chdir --host "
    "--prompt --role --type --other-user --command-timeout --chroot"
)

WRAPPERS: dict[str, Wrapper] = {
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
