"""The rules of the dangerous-command table (see
:mod:`hermes_trio.command_check.policy` for the table and how commands are
read): what each rule key means and the checks on one command's arguments.

A rule gets a :class:`RuleContext` (to flag what it finds, to measure a
path where the command runs, to judge a script an option holds) and the
command's expanded arguments and words.  Options are read with the one
option scanner (:mod:`hermes_trio.command_check.shell_options`).  Pure functions.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from hermes_trio.command_check.shell_options import OptionSpec, names, scan
from hermes_trio.command_check.shell_paths import HERE, SYSTEM
from hermes_trio.command_check.shell_words import Value, literal

__all__ = [
    "DANGEROUS_PATTERNS",
    "RULES",
    "DangerPattern",
    "RuleContext",
    "controlled",
    "device_write",
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


class RuleContext(Protocol):
    """What a rule may ask of the policy's judge."""

    def flag(self, key: str, detail: str) -> None: ...

    def breadth(self, value: Value) -> int:
        """How much of the file system ``value`` reaches where the command runs."""
        ...

    def spend(self, units: int) -> None: ...

    def inline(self, values: Sequence[Value], what: str) -> object:
        """Judge the shell script ``values`` hold."""
        ...


def shorten(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= DETAIL_LIMIT else flat[: DETAIL_LIMIT - 1] + "…"


def words_text(words: Sequence[Value]) -> str:
    return shorten(" ".join(w.text for w in words))


def controlled(value: Value) -> bool:
    """Whether the script decides part of ``value`` in a way the check
    cannot read (not the user's environment, home or working directory)."""
    return any(kind == "unknown" for kind, _ in value.segments)


# --- rules -----------------------------------------------------------------

Rule = Callable[[RuleContext, Sequence[Value], Sequence[Value]], None]
RAW_DISK = re.compile(
    r"/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|md\d|dm-\d|disk\d|loop\d|mapper/)"
)
_HARMLESS_DEVICES = re.compile(
    r"/dev/(?:null|zero|full|stdout|stderr|stdin|tty|random|urandom)$|/dev/(?:fd|shm|pts)/"
)


def _may_be_option(
    ctx: RuleContext, args: Sequence[Value], unknown: Sequence[int], targets: Sequence[int]
) -> bool:
    """Whether a word the script controls may be the option that makes one
    of ``targets`` (indices of broad operands) dangerous: another word, or
    one that may split into the option and the path."""
    candidates = [i for i in unknown if controlled(args[i])]
    return any(c != t or args[c].split for c in candidates for t in targets)


_RM = OptionSpec(
    permute=True,
    attached_value=names("--interactive --preserve-root"),
    longs=names(
        "--recursive --force --no-preserve-root --preserve-root --interactive "
        "--one-file-system --dir --verbose --help --version"
    ),
)


def _rm(ctx: RuleContext, args: Sequence[Value], words: Sequence[Value]) -> None:
    found = scan(args, _RM)
    ctx.spend(found.examined)
    if found.has("--no-preserve-root"):
        ctx.flag("rm_broad", words_text(words))
        return
    broad = [i for i in found.operands if ctx.breadth(args[i]) >= HERE]
    if not broad:
        return
    recursive = found.has("-r", "-R", "--recursive")
    # FLAGS=-rf; rm $FLAGS ~ and rm "$@": a word the script controls may be -r.
    if recursive or _may_be_option(ctx, args, found.unknown, broad):
        ctx.flag("rm_broad", words_text(words))


def mkfs(ctx: RuleContext, args: Sequence[Value], words: Sequence[Value]) -> None:
    ctx.flag("mkfs", words_text(words))


def _dd(ctx: RuleContext, args: Sequence[Value], words: Sequence[Value]) -> None:
    ctx.spend(len(args))
    for value in args:
        text = literal(value)
        if text is None or not text.startswith("of="):
            continue
        path = os.path.normpath(text[3:]) if text[3:] else ""
        if path.startswith("/dev/") and not _HARMLESS_DEVICES.match(path):
            ctx.flag("dd_device", words_text(words))


_TEE = OptionSpec(permute=True, attached_value=names("--output-error"))


def _tee(ctx: RuleContext, args: Sequence[Value], words: Sequence[Value]) -> None:
    found = scan(args, _TEE)
    ctx.spend(found.examined)
    for i in found.operands:
        device_write(ctx, args[i], words_text(words))


def _power(ctx: RuleContext, args: Sequence[Value], words: Sequence[Value]) -> None:
    ctx.flag("power", words_text(words))


_INIT = OptionSpec(permute=True)


def _init(ctx: RuleContext, args: Sequence[Value], words: Sequence[Value]) -> None:
    found = scan(args, _INIT)
    ctx.spend(found.examined)
    if found.operands and literal(args[found.operands[0]]) in ("0", "6"):
        ctx.flag("power", words_text(words))


_SYSTEMCTL = OptionSpec(
    permute=True,
    with_value=names(
        "-t --type -s --signal -p --property -H --host -M --machine -n --lines -o --output "
        "--root --kill-whom --kill-value --job-mode --what --boot-loader-menu "
        "--boot-loader-entry --reboot-argument --timestamp --check-inhibitors --state --image"
    ),
)
_POWER_VERBS = names("reboot poweroff halt kexec soft-reboot suspend-then-hibernate")


def _systemctl(ctx: RuleContext, args: Sequence[Value], words: Sequence[Value]) -> None:
    found = scan(args, _SYSTEMCTL)
    ctx.spend(found.examined)
    if found.operands and literal(args[found.operands[0]]) in _POWER_VERBS:
        ctx.flag("power", words_text(words))


_CHMOD = OptionSpec(
    permute=True,
    # chmod -w and -x are modes, not options.
    only=names(
        "-c -f -v -R --changes --silent --quiet --verbose --recursive --reference "
        "--no-preserve-root --preserve-root --help --version"
    ),
)
_CHOWN = OptionSpec(permute=True)


def _owner_rule(spec: OptionSpec) -> Rule:
    def rule(ctx: RuleContext, args: Sequence[Value], words: Sequence[Value]) -> None:
        found = scan(args, spec)
        ctx.spend(found.examined)
        candidates = [i for i in found.unknown if controlled(args[i])]
        targets = [i for i in found.operands if i not in candidates]
        if not found.has("--reference"):
            targets = targets[1:]  # the mode or owner
        broad = [i for i in targets if ctx.breadth(args[i]) == SYSTEM]
        if not broad:
            return
        # chmod -r removes read permission; only -R recurses.
        if found.has("-R", "--recursive") or _may_be_option(ctx, args, candidates, broad):
            ctx.flag("chmod_chown_broad", words_text(words))

    return rule


_KILL = OptionSpec(with_value=names("-s -n --signal"), signal=True)


def _kill(ctx: RuleContext, args: Sequence[Value], words: Sequence[Value]) -> None:
    found = scan(args, _KILL)
    ctx.spend(found.examined)
    if any(literal(args[i]) == "-1" for i in found.operands):
        ctx.flag("kill_all", words_text(words))


# --- git ---------------------------------------------------------------------

_GIT = OptionSpec(
    with_value=names(
        "-C -c --git-dir --work-tree --namespace --super-prefix --config-env --exec-path"
    ),
)
_GIT_PUSH = OptionSpec(
    permute=True,
    with_value=names("-o --push-option --repo --receive-pack --exec"),
    attached_value=names("--force-with-lease --recurse-submodules --signed"),
    longs=names(
        "--force --force-with-lease --force-if-includes --delete --all --branches --mirror "
        "--tags --follow-tags --atomic --dry-run --porcelain --prune --no-verify --verify "
        "--set-upstream --thin --no-thin --quiet --verbose --progress --signed --push-option "
        "--repo --receive-pack --exec --recurse-submodules --ipv4 --ipv6 "
        "--no-force-with-lease --no-atomic --no-signed --no-follow-tags"
    ),
)
_PROTECTED_BRANCHES = frozenset({"main", "master"})
# The branch checked out, which may be main.
_CURRENT_BRANCH = frozenset({"HEAD", "@"})
# Configuration that git runs as a shell command.
_COMMAND_CONFIG = names(
    "core.pager core.editor core.sshcommand core.fsmonitor sequence.editor diff.external "
    "gpg.program credential.helper uploadpack.packobjectshook"
)


def _git(ctx: RuleContext, args: Sequence[Value], words: Sequence[Value]) -> None:
    found = scan(args, _GIT)
    ctx.spend(found.examined)
    for option in found.options:
        if option.name == "-c" and option.value is not None:
            _git_config(ctx, option.value)
    i = found.rest
    if i >= len(args) or literal(args[i]) != "push":
        return
    push = scan(args, _GIT_PUSH, i + 1)
    ctx.spend(push.examined)
    force = push.has("-f", "--force", "--force-with-lease") or any(
        (literal(args[j]) or "").startswith("+") for j in push.operands
    )
    delete = push.has("-d", "--delete") or any(
        (literal(args[j]) or "").startswith(":") for j in push.operands
    )
    refspecs = push.operands[1:]  # after the repository
    if force and (push.has("--all", "--mirror", "--branches") or not refspecs):
        if not (push.has("--tags") and not refspecs):
            ctx.flag("git_force_push_main", words_text(words))
            return
    if (force or delete) and any(_may_name_main(args[j]) for j in refspecs):
        ctx.flag("git_force_push_main", words_text(words))


def _may_name_main(value: Value) -> bool:
    text = literal(value)
    if text is None:
        return True
    destination = text.lstrip("+").rsplit(":", 1)[-1] or text.lstrip("+:")
    ref = destination.removeprefix("refs/heads/")
    return ref in _PROTECTED_BRANCHES or ref in _CURRENT_BRANCH


def _git_config(ctx: RuleContext, value: Value) -> None:
    text = literal(value)
    if text is None:
        return
    key, eq, command = text.partition("=")
    key = key.lower()
    if not eq:
        return
    if key.startswith("alias.") or key == "credential.helper":
        if command.startswith("!"):
            ctx.inline([Value((("lit", command[1:]),), text)], f"git -c {key}")
    elif key in _COMMAND_CONFIG or key.startswith("pager."):
        ctx.inline([Value((("lit", command),), text)], f"git -c {key}")


def device_write(ctx: RuleContext, value: Value, detail: str) -> None:
    """Flag ``value`` if it names a raw disk (a redirection or tee target)."""
    path = literal(value)
    if path is not None and RAW_DISK.match(os.path.normpath(path)):
        ctx.flag("write_device", detail)


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
    "chmod": _owner_rule(_CHMOD),
    "chown": _owner_rule(_CHOWN),
    "chgrp": _owner_rule(_CHOWN),
    "kill": _kill,
    "git": _git,
}

# Rules that look at their arguments: a command whose name an environment
# variable decides is tried as each of them.
ARGUMENT_RULES = frozenset({"rm", "dd", "tee", "init", "systemctl", "chmod", "kill", "git"})


def rule_for(name: str) -> Rule | None:
    """The check for command ``name``'s arguments, if it has one."""
    rule = RULES.get(name)
    if rule is None and name.startswith("mkfs."):
        return mkfs
    return rule
