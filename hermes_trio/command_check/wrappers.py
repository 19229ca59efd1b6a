"""Commands that run other commands (sudo, env, su, xargs, find -exec, ssh,
...): each wrapper reads its options with the one option scanner and says
which command it runs — an index into the same words (so a chain of
wrappers is walked, not copied), with the directory it runs in when the
wrapper changes it — or judges what it runs itself (a script it parses
again, find's -exec commands, a shell reading stdin).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from hermes_trio.command_check.programs import NO_FEED, NOTHING, Feed, Output
from hermes_trio.command_check.rules import words_text
from hermes_trio.command_check.shell_options import NO_OPTIONS, OptionSpec, Scan, names
from hermes_trio.command_check.shell_paths import HERE, SYSTEM, Place, is_temporary_root
from hermes_trio.command_check.shell_words import (
    UNKNOWN,
    Segment,
    Value,
    lit_value,
    literal,
    placeholder_text,
)

__all__ = ["HOME", "WRAPPERS", "Call", "Judge", "Step", "Wrapper"]


class Judge(Protocol):
    """What a wrapper may ask of the policy's judge."""

    def flag(self, key: str, detail: str) -> None: ...

    def spend(self, units: int) -> None: ...

    def scan(self, words: Sequence[Value], spec: OptionSpec, start: int) -> Scan: ...

    def inline(
        self,
        values: Sequence[Value],
        what: str,
        *,
        text: str | None = None,
        cwd: Value | None = None,
        same_shell: bool = False,
    ) -> Output:
        """Judge the shell script ``values`` hold (or ``text``), run in
        ``cwd`` when given, by a new shell unless ``same_shell``."""
        ...

    def run(self, words: Sequence[Value], feed: Feed, start: int = 0) -> Output: ...

    def run_program(self, program: Feed, shell: bool, name: str) -> Output: ...

    def breadth(self, value: Value) -> int: ...

    def place(self) -> Place: ...

    def program_file(self, value: Value, shell: bool, name: str) -> Output:
        """Judge running the script file ``value``."""
        ...

    def environ(self, value: Value) -> None:
        """``value`` (``NAME=VALUE``) is in the environment of the command
        being judged."""
        ...

    def defer(self, action: Value, what: str) -> None:
        """Judge ``action`` again at the end, in every directory the
        script went to (a trap runs later)."""
        ...


class Call(NamedTuple):
    """The command a wrapper runs: ``words[start:]``, in ``cwd`` if given."""

    words: Sequence[Value]
    start: int
    cwd: Value | None = None


Step = Call | Output | None
# (judge, words, index of the first argument, stdin) -> what runs
Wrapper = Callable[[Judge, Sequence[Value], int, Feed], Step]

HOME = Value((("home", ""),), "~")
ROOT = lit_value("/")
SOMEWHERE = Value(UNKNOWN, "<unknown directory>")
_INPUT = Value(UNKNOWN, "<input>")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _skip_assignments(judge: Judge, words: Sequence[Value], i: int) -> int:
    """The index after the ``NAME=VALUE`` words at ``i`` (env, sudo)."""
    while i < len(words):
        first = words[i].segments[0] if words[i].segments else ("lit", "")
        if first[0] not in ("lit", "raw") or not _ASSIGNMENT.match(first[1]):
            break
        judge.environ(words[i])
        i += 1
    return i


def _simple_wrapper(
    spec: OptionSpec = NO_OPTIONS,
    *,
    no_command: frozenset[str] = frozenset(),
    skip: int = 0,
    assignments: bool = False,
    chdir: frozenset[str] = frozenset(),
    login: frozenset[str] = frozenset(),
    shell: frozenset[str] = frozenset(),
) -> Wrapper:
    """A wrapper of the form ``NAME [options] [skip operands] COMMAND...``.
    Any option in ``no_command`` means it runs nothing (``command -v``);
    ``chdir`` options name the directory the command runs in, ``login``
    ones start it in a home directory; with a ``shell`` option and no
    command it starts a shell that reads stdin (``sudo -i``)."""

    def unwrap(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
        found = judge.scan(words, spec, start)
        if found.has(*no_command):
            return None
        i = found.rest + skip
        if assignments:
            i = _skip_assignments(judge, words, i)
        if i >= len(words):
            if found.has(*shell):
                return judge.run_program(feed, True, words_text(words[start - 1 : start]))
            return None
        cwd = found.value(*chdir) if chdir else None
        if cwd is None and found.has(*login):
            cwd = HOME
        return Call(words, i, cwd)

    return unwrap


def _copy(judge: Judge, values: Sequence[Value]) -> list[Value]:
    judge.spend(len(values))
    return list(values)


# --- env, timeout, flock, trap, watch, busybox --------------------------

_ENV = OptionSpec(
    with_value=names("-u -C -S -P --unset --chdir --split-string"),
    attached_value=names("--block-signal --default-signal --ignore-signal"),
)


def _env(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    found = judge.scan(words, _ENV, start)
    i = _skip_assignments(judge, words, found.rest)
    cwd = found.value("-C", "--chdir")
    split = found.value("-S", "--split-string")
    if split is not None:
        return judge.inline([split, *words[i:]], "env -S", cwd=cwd)
    return Call(words, i, cwd) if i < len(words) else None


_FLOCK = OptionSpec(
    with_value=names("-w -E -c --timeout --conflict-exit-code --command"),
)


def _flock(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    found = judge.scan(words, _FLOCK, start)
    script = found.value("-c", "--command")
    if script is not None:
        return judge.inline([script], "flock -c")
    # flock [options] FILE -c COMMAND, or flock [options] FILE COMMAND...
    i = found.rest + 1
    if i < len(words) and literal(words[i]) in ("-c", "--command"):
        return judge.inline(words[i + 1 : i + 2], "flock -c")
    return Call(words, i) if i < len(words) else None


_TRAP = OptionSpec()


def _trap(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    found = judge.scan(words, _TRAP, start)
    if found.has("-l", "-p", "-P") or len(found.operands) < 2:
        return None
    action = words[found.operands[0]]
    if literal(action) in ("-", ""):
        return None
    judge.defer(action, "trap")
    return judge.inline([action], "trap", same_shell=True)


_WATCH = OptionSpec(
    with_value=names("-n --interval -q --equexit"),
    attached_value=names("-d --differences"),
)


def _watch(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    found = judge.scan(words, _WATCH, start)
    if found.rest >= len(words):
        return None
    if found.has("-x", "--exec"):
        return Call(words, found.rest)
    return judge.inline(words[found.rest :], "watch")


def _eval(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    i = start + 1 if start < len(words) and literal(words[start]) == "--" else start
    return judge.inline(words[i:], "eval", same_shell=True)


def _busybox(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    if start < len(words) and (literal(words[start]) or "").startswith("-"):
        return None
    return Call(words, start) if start < len(words) else None


# --- su, runuser, sg, pkexec, script: other users and shells --------------

_SU = OptionSpec(
    permute=True,
    with_value=names(
        "-c -s -g -G -w -u --command --session-command --shell --group --supp-group "
        "--whitelist-environment --user"
    ),
)


def _su(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    found = judge.scan(words, _SU, start)
    operands = found.operands
    login = found.has("-l", "--login", "-")
    if operands and literal(words[operands[0]]) == "-":
        login = True
        operands = operands[1:]
    cwd = HOME if login else None
    script = found.value("-c", "--command", "--session-command")
    if script is not None:
        return judge.inline([script], "su -c", cwd=cwd)
    if found.has("-u", "--user"):
        # runuser -u USER [--] COMMAND...: the operands are the command.
        command = _copy(judge, [words[i] for i in operands])
        return Call(command, 0, cwd) if command else None
    if len(operands) > 1:
        # Arguments after the user go to the user's shell (su root -- -c CMD).
        shell_args = _copy(judge, [lit_value("sh"), *(words[i] for i in operands[1:])])
        return Call(shell_args, 0, cwd)
    # No command: the user's shell reads its commands from stdin.
    return judge.run_program(feed, True, "su")


def _sg(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    i = start
    if i < len(words) and literal(words[i]) == "-":
        i += 1
    i += 1  # the group
    if i < len(words) and literal(words[i]) == "-c":
        i += 1
    if i >= len(words):
        return judge.run_program(feed, True, "sg")
    return judge.inline(words[i:], "sg")


_SCRIPT = OptionSpec(
    permute=True,
    with_value=names(
        "-c --command -E --echo -I --log-in -O --log-out -B --log-io -T --log-timing "
        "-m --logging-format"
    ),
    attached_value=names("-t --timing"),
)


def _script(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    found = judge.scan(words, _SCRIPT, start)
    command = found.value("-c", "--command")
    if command is not None:
        return judge.inline([command], "script -c")
    return judge.run_program(feed, True, "script")


_PKEXEC = OptionSpec(with_value=names("--user -u"))


def _pkexec(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    found = judge.scan(words, _PKEXEC, start)
    if found.rest >= len(words):
        return None
    return Call(words, found.rest, None if found.has("--keep-cwd") else SOMEWHERE)


# --- systemd-run, unshare, nsenter, fakeroot, firejail, ssh, at -------------

_SYSTEMD_RUN = OptionSpec(
    with_value=names(
        "-u --unit -p --property -E --setenv -M --machine -H --host --description --slice "
        "--working-directory --uid --gid --nice --on-active --on-boot --on-startup "
        "--on-unit-active --on-unit-inactive --on-calendar --on-timezone-change "
        "--on-clock-change --timer-property --path-property --socket-property --service-type "
        "--expand-environment --property-file"
    ),
)


def _systemd_run(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    found = judge.scan(words, _SYSTEMD_RUN, start)
    if found.rest >= len(words):
        return None
    for option in found.options:
        if option.name in ("-E", "--setenv") and option.value is not None:
            judge.environ(option.value)
    cwd = found.value("--working-directory")
    if cwd is None and not found.has("-d", "--same-dir", "--scope"):
        # A service starts in / (a user's service in the home directory).
        cwd = HOME if found.has("--user") else ROOT
    return Call(words, found.rest, cwd)


_UNSHARE = OptionSpec(
    with_value=names(
        "-S --setuid -G --setgid -R --root -w --wd --propagation --map-user --map-group "
        "--map-users --map-groups --setgroups --monotonic --boottime"
    ),
    attached_value=names(
        "--mount --uts --ipc --net --pid --user --cgroup --time --mount-proc --kill-child "
        "--map-auto"
    ),
)
_NSENTER = OptionSpec(
    with_value=names("-t --target -S --setuid -G --setgid --env"),
    attached_value=names(
        "-m -u -i -n -p -U -C -T -r -w --mount --uts --ipc --net --pid --user --cgroup "
        "--time --root --wd"
    ),
)
_FAKEROOT = OptionSpec(with_value=names("-l --lib --faked -i -s -b --fd-base"))
_FIREJAIL = OptionSpec()


def _namespace_wrapper(spec: OptionSpec, chdir: tuple[str, ...]) -> Wrapper:
    """Wrappers that, without a command, start a shell reading stdin."""

    def unwrap(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
        found = judge.scan(words, spec, start)
        if found.rest >= len(words):
            return judge.run_program(feed, True, words_text(words[start - 1 : start]))
        value = found.value(*chdir) if chdir else None
        if value is not None and literal(value) == "":
            value = SOMEWHERE
        return Call(words, found.rest, value)

    return unwrap


_SSH = OptionSpec(
    with_value=names("-B -b -c -D -E -e -F -I -i -J -L -l -m -O -o -p -Q -R -S -W -w"),
)
_SSH_NO_COMMAND = names("-N -O -V -G -Q")
_LOCAL_COMMAND = re.compile(r"\s*(proxycommand|localcommand)\s*[=\s]\s*(.*)", re.I | re.S)


def _ssh(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    found = judge.scan(words, _SSH, start)
    if found.rest >= len(words):
        return None
    # ssh reads its options again after the destination (ssh host -p 22 cmd).
    again = judge.scan(words, _SSH, found.rest + 1)
    for option in (*found.options, *again.options):
        text = literal(option.value) if option.name == "-o" and option.value else None
        m = _LOCAL_COMMAND.match(text or "")
        if m and m.group(2):
            judge.inline([lit_value(m.group(2))], f"ssh -o {m.group(1)}")
    if found.has(*_SSH_NO_COMMAND) or again.has(*_SSH_NO_COMMAND):
        return None
    if again.rest >= len(words):
        # No command: the remote shell reads its commands from stdin.
        return judge.run_program(feed, True, "ssh")
    # The remote shell runs the words joined by spaces, in the remote home.
    return judge.inline(words[again.rest :], "ssh", cwd=HOME)


_SSH_AGENT = OptionSpec(with_value=names("-a -E -O -P -t"))


def _ssh_agent(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    found = judge.scan(words, _SSH_AGENT, start)
    if found.rest < len(words):
        return Call(words, found.rest)  # ssh-agent COMMAND runs it
    return Output(setup=True)  # eval "$(ssh-agent -s)"


_AT = OptionSpec(with_value=names("-q -f -t"))


def _at(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    found = judge.scan(words, _AT, start)
    if found.has("-l", "-r", "-d", "-c", "-b"):
        return None
    script = found.value("-f")
    if script is not None:
        return judge.program_file(script, True, "at -f")
    return judge.run_program(feed, True, "at")


# --- xargs, parallel, find ------------------------------------------------

_XARGS = OptionSpec(
    with_value=names(
        "-a -d -E -I -L -n -P -s --arg-file --delimiter --max-args --max-procs "
        "--max-chars --process-slot-var"
    ),
    attached_value=names("-i -l -e --replace --eof --max-lines"),
)


def _substitute(value: Value, token: str, replacement: tuple[Segment, ...]) -> Value:
    segments: list[Segment] = []
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
    return dataclasses.replace(value, segments=tuple(segments), var=None)


def _xargs(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    found = judge.scan(words, _XARGS, start)
    replace: str | None = None
    for option in found.options:
        if option.name == "-I":
            replace = literal(option.value) if option.value is not None else None
        elif option.name in ("-i", "--replace"):
            replace = (literal(option.value) if option.value is not None else None) or "{}"
    command = _copy(judge, words[found.rest :]) or [lit_value("echo")]
    if replace:
        return Call([_substitute(v, replace, UNKNOWN) for v in command], 0)
    # Its command gets one more argument: whatever arrives on stdin.
    return Call([*command, _INPUT], 0)


_PARALLEL = OptionSpec(
    with_value=names(
        "-j -N -n -S -I -a -d -E -C --jobs --max-args --sshlogin --arg-file --delimiter "
        "--colsep --halt --joblog --results --tmpdir --timeout --delay --retries "
        "--memfree --load --basefile --workdir --env --tagstring --block --sshloginfile "
        "--slf"
    ),
)
_PARALLEL_INPUTS = frozenset({":::", "::::", ":::+", "::::+"})
_PARALLEL_SLOT = re.compile(r"\{(?:\d*(?:\.|/|//|/\.)?|#|%)\}")


def _parallel(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    found = judge.scan(words, _PARALLEL, start)
    template: list[Value] = []
    for value in words[found.rest :]:
        if literal(value) in _PARALLEL_INPUTS:
            break
        template.append(value)
    judge.spend(len(template))
    if not template:
        # Without a command, parallel runs the lines of its input as commands.
        return judge.run_program(feed, True, "parallel")
    text = " ".join(placeholder_text(v) for v in template)
    text, slots = _PARALLEL_SLOT.subn("\ue000", text)
    if not slots:
        text += " \ue000"
    return judge.inline(template, "parallel", text=text)


_FIND_HEAD = OptionSpec(
    with_value=names("-D"), attached_value=names("-O"), only=names("-H -L -P -D -O")
)
# Tests that select some of the files (not -type, -user, -newer with no
# file...): a find with one of them under . or /tmp is not a blanket delete.
_FIND_SELECTING = names(
    "-name -iname -path -ipath -wholename -iwholename -regex -iregex -lname -ilname "
    "-newer -anewer -cnewer -newermt -newerat -newerct -newerBt -mtime -mmin -atime -amin "
    "-ctime -cmin -size -empty -links -inum -samefile -perm -used"
)
_FIND_PATTERNS = names("-name -iname -path -ipath -wholename -iwholename -lname -ilname")
_FIND_REGEXES = names("-regex -iregex")
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_EVERYTHING_REGEX = frozenset({".*", ".+", "^.*$", ".*.*", "^.*"})
_EVERYTHING_PATTERN = re.compile(r"[*?]*\**$")


def _selects(test: str, argument: Value | None) -> bool:
    """Whether ``test argument`` selects some files rather than nearly all."""
    if test not in _FIND_SELECTING:
        return False
    text = literal(argument) if argument is not None else None
    if test in _FIND_PATTERNS:
        return text is not None and not _EVERYTHING_PATTERN.fullmatch(text.rsplit("/", 1)[-1])
    if test in _FIND_REGEXES:
        return text is not None and text not in _EVERYTHING_REGEX
    if test == "-size":
        return text is not None and text.rstrip("cwbkMG") not in ("+0", "-1", "+-1")
    return True


def _find(judge: Judge, words: Sequence[Value], start: int, feed: Feed) -> Step:
    found = judge.scan(words, _FIND_HEAD, start)
    i = found.rest
    roots: list[Value] = []
    while i < len(words):
        text = literal(words[i])
        if text is not None and (text.startswith("-") or text in ("(", "!", ")", ",")):
            break
        roots.append(words[i])
        i += 1
    if not roots:
        roots = [lit_value(".")]
    judge.spend(len(words) - start)
    delete = selecting = alternatives = False
    negated = False
    commands: list[list[Value]] = []
    while i < len(words):
        text = literal(words[i])
        i += 1
        if text in _FIND_EXEC:
            begin = i
            while i < len(words) and literal(words[i]) not in (";", "+"):
                i += 1
            commands.append(list(words[begin:i]))
            i += 1
        elif text == "-delete":
            delete = True
        elif text in ("-o", "-or", ","):
            alternatives = True
        elif text in ("!", "-not"):
            negated = True
            continue
        elif text is not None and text.startswith("-"):
            argument = words[i] if i < len(words) else None
            # `! -name keep` and `-name x -o ...` select nearly everything.
            selecting = selecting or (not negated and _selects(text, argument))
        negated = False
    selecting = selecting and not alternatives
    place = judge.place()
    reaches = [(judge.breadth(root), root) for root in roots]
    reach, root = max(reaches, key=lambda pair: pair[0])
    # A test that selects files narrows the working directory or a
    # temporary directory, not a whole system tree or home.
    temporary = all(is_temporary_root(r, place) for r in roots)
    broad = (reach == SYSTEM and not (selecting and temporary)) or (reach == HERE and not selecting)
    if delete and broad:
        judge.flag("find_delete_broad", words_text(words[start - 1 :]))
    found_path = root.segments if broad else (*root.segments, ("raw", "/"), ("item", ""))
    for command in commands:
        if command:
            judge.run([_substitute(v, "{}", found_path) for v in command], NO_FEED)
    return NOTHING


# --- the table ----------------------------------------------------------

_SUDO = OptionSpec(
    with_value=names(
        "-u -g -C -D -h -p -r -t -U -T -R --user --group --close-from --chdir --host "
        "--prompt --role --type --other-user --command-timeout --chroot"
    ),
)

WRAPPERS: dict[str, Wrapper] = {
    "sudo": _simple_wrapper(
        _SUDO,
        no_command=names("-e --edit -l --list -v --validate -V --version -K --remove-timestamp"),
        assignments=True,
        chdir=names("-D --chdir"),
        login=names("-i --login"),
        shell=names("-i --login -s --shell"),
    ),
    "doas": _simple_wrapper(
        OptionSpec(with_value=names("-u -C")), no_command=names("-C"), shell=names("-s")
    ),
    "pkexec": _pkexec,
    "env": _env,
    "nice": _simple_wrapper(OptionSpec(with_value=names("-n --adjustment"))),
    "ionice": _simple_wrapper(
        OptionSpec(with_value=names("-c -n -p -P -u --class --classdata --pid --pgid --uid")),
        no_command=names("-p -P -u --pid --pgid --uid"),
    ),
    "nohup": _simple_wrapper(),
    "timeout": _simple_wrapper(OptionSpec(with_value=names("-s -k --signal --kill-after")), skip=1),
    "time": _simple_wrapper(OptionSpec(with_value=names("-f -o --format --output"))),
    "command": _simple_wrapper(no_command=names("-v -V")),
    "builtin": _simple_wrapper(OptionSpec(only=frozenset())),
    "exec": _simple_wrapper(OptionSpec(with_value=names("-a"))),
    "stdbuf": _simple_wrapper(OptionSpec(with_value=names("-i -o -e --input --output --error"))),
    "chroot": _simple_wrapper(OptionSpec(with_value=names("--userspec --groups")), skip=1),
    "setsid": _simple_wrapper(),
    "unbuffer": _simple_wrapper(),
    "taskset": _simple_wrapper(no_command=names("-p --pid"), skip=1),
    "chrt": _simple_wrapper(
        OptionSpec(with_value=names("-T -P -D")), no_command=names("-p --pid -m --max"), skip=1
    ),
    "flock": _flock,
    "strace": _simple_wrapper(
        OptionSpec(
            with_value=names("-e -o -p -s -u -E -a -b -I -O -P -S -U -X"),
        )
    ),
    "coproc": _simple_wrapper(OptionSpec(only=frozenset())),
    "busybox": _busybox,
    "toybox": _busybox,
    "xargs": _xargs,
    "find": _find,
    "parallel": _parallel,
    "su": _su,
    "runuser": _su,
    "sg": _sg,
    "script": _script,
    "systemd-run": _systemd_run,
    "unshare": _namespace_wrapper(_UNSHARE, ("-w", "--wd")),
    "nsenter": _namespace_wrapper(_NSENTER, ("-w", "--wd")),
    "fakeroot": _namespace_wrapper(_FAKEROOT, ()),
    "firejail": _namespace_wrapper(_FIREJAIL, ()),
    "ssh": _ssh,
    "ssh-agent": _ssh_agent,
    "at": _at,
    "batch": _at,
    "watch": _watch,
    "trap": _trap,
    "eval": _eval,
}
