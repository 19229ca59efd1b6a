"""The rules of the dangerous-command table (see
:mod:`hermes_trio.tools.command_policy` for the table and how commands are
read): what each rule key means and the checks on one command's arguments.

A rule gets the command's expanded arguments and words and calls ``flag(key,
detail)`` for what it finds.  Pure functions.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

from hermes_trio.tools.shell_words import HERE, SYSTEM, Value, breadth, literal

__all__ = [
    "DANGEROUS_PATTERNS",
    "RULES",
    "DangerPattern",
    "Flag",
    "device_write",
    "lit_value",
    "names",
    "rule_for",
    "shorten",
    "words_text",
]


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

DETAIL_LIMIT = 120

# Called with a rule key and what matched.
Flag = Callable[[str, str], None]


def shorten(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= DETAIL_LIMIT else flat[: DETAIL_LIMIT - 1] + "…"


def words_text(words: Sequence[Value]) -> str:
    return shorten(" ".join(w.text for w in words))


def lit_value(text: str) -> Value:
    return Value((("lit", text),), text)


def names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# --- rules -----------------------------------------------------------------

Rule = Callable[[Flag, list[Value], list[Value]], None]
RAW_DISK = re.compile(
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


def _rm(flag: Flag, args: list[Value], words: list[Value]) -> None:
    options, operands = _options_and_operands(args)
    if _has_long(options, "--no-preserve-root"):
        flag("rm_broad", words_text(words))
        return
    if not (_has_short(options, "rR") or _has_long(options, "--recursive")):
        return
    if any(breadth(value) >= HERE for value in operands):
        flag("rm_broad", words_text(words))


def mkfs(flag: Flag, args: list[Value], words: list[Value]) -> None:
    flag("mkfs", words_text(words))


def _dd(flag: Flag, args: list[Value], words: list[Value]) -> None:
    for value in args:
        text = literal(value)
        if text is None or not text.startswith("of="):
            continue
        path = os.path.normpath(text[3:]) if text[3:] else ""
        if path.startswith("/dev/") and not _HARMLESS_DEVICES.match(path):
            flag("dd_device", words_text(words))


def _tee(flag: Flag, args: list[Value], words: list[Value]) -> None:
    for value in _options_and_operands(args)[1]:
        device_write(flag, value, words_text(words))


def _power(flag: Flag, args: list[Value], words: list[Value]) -> None:
    flag("power", words_text(words))


def _init(flag: Flag, args: list[Value], words: list[Value]) -> None:
    operands = _options_and_operands(args)[1]
    if operands and literal(operands[0]) in ("0", "6"):
        flag("power", words_text(words))


def _systemctl(flag: Flag, args: list[Value], words: list[Value]) -> None:
    operands = _options_and_operands(args)[1]
    if operands and literal(operands[0]) in ("reboot", "poweroff", "halt", "kexec", "soft-reboot"):
        flag("power", words_text(words))


def _chmod(flag: Flag, args: list[Value], words: list[Value]) -> None:
    options, operands = _options_and_operands(args)
    # chmod's -r removes read permission; only -R recurses.
    if not (_has_short(options, "R") or _has_long(options, "--recursive")):
        return
    if not any(o.startswith("--reference") for o in options):
        operands = operands[1:]  # the mode or owner
    if any(breadth(value) == SYSTEM for value in operands):
        flag("chmod_chown_broad", words_text(words))


def _kill(flag: Flag, args: list[Value], words: list[Value]) -> None:
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
            flag("kill_all", words_text(words))
            return
    if any(literal(v) == "-1" for v in args[i:]):
        flag("kill_all", words_text(words))


_GIT_GLOBAL_WITH_VALUE = names(
    "-C -c --git-dir --work-tree --namespace --super-prefix --config-env --exec-path"
)
_GIT_PUSH_WITH_VALUE = frozenset({"-o", "--push-option", "--repo", "--receive-pack", "--exec"})
_PROTECTED_BRANCHES = frozenset({"main", "master"})


def _git(flag: Flag, args: list[Value], words: list[Value]) -> None:
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
        flag("git_force_push_main", words_text(words))


def device_write(flag: Flag, value: Value, detail: str) -> None:
    """Flag ``value`` if it names a raw disk (a redirection or tee target)."""
    path = literal(value)
    if path is not None and RAW_DISK.match(os.path.normpath(path)):
        flag("write_device", detail)


RULES: dict[str, Rule] = {
    "rm": _rm,
    "mkfs": mkfs,
    "mke2fs": mkfs,
    "mkswap": mkfs,
    "wipefs": mkfs,
    "mkdosfs": mkfs,
    "mkntfs": mkfs,
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


def rule_for(name: str) -> Rule | None:
    """The check for command ``name``'s arguments, if it has one."""
    rule = RULES.get(name)
    if rule is None and name.startswith("mkfs."):
        return mkfs
    return rule
