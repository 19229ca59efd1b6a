"""Dangerous-command detection and the approval policy around it.

``find_danger`` is pure: a table of regexes over the raw shell command text.
It is a guard rail against an over-eager model, not a sandbox — anything can
be hidden behind variables, ``eval`` of computed strings or a script file, so
the patterns aim at the obvious, catastrophic forms and at few false
positives on everyday commands.

Command names are only recognised at *command positions*: the start of the
text, after ``;`` ``&`` ``|`` newline ``(`` ``{`` backtick ``$(``, after
``sh -c '`` / ``eval "``, and after wrappers such as ``sudo -u x``, ``env``,
``nohup``, ``timeout 10``, ``FOO=bar`` or ``then``/``do``.  That keeps
``grep reboot log.txt`` and ``echo "rm -rf /"`` from matching while
``cd / && sudo /bin/rm -rf /usr`` still does.

=====================  ==========================================================
key                    what it catches
=====================  ==========================================================
rm_broad               ``rm`` with a recursive flag on ``/``, ``/*``, a top-level
                       dir (``/usr``, ``/tmp/*``), ``/home/NAME``, ``~``,
                       ``$HOME``, ``.``, ``..``, ``*``, ``./*``; or any ``rm
                       --no-preserve-root``.  Not ``rm -rf ./build`` or
                       ``rm -rf /tmp/foo/bar``.
find_delete_broad      ``find / ... -delete`` (or ``~``, ``$HOME``, top-level dirs)
mkfs                   ``mkfs``, ``mkfs.ext4``, ``mke2fs``, ``mkswap``, ``wipefs``
dd_device              ``dd ... of=/dev/...`` except ``/dev/null`` and friends
write_device           ``> /dev/sda``, ``>> /dev/nvme0n1``, ``tee /dev/sdb`` (raw disks)
fork_bomb              ``:(){ :|:& };:`` and the same shape with any function name
pipe_to_shell          ``curl ... | sh``, ``wget -O- ... | sudo bash``,
                       ``bash <(curl ...)``, ``sh -c "$(curl ...)"``
power                  ``shutdown``, ``reboot``, ``halt``, ``poweroff``,
                       ``init 0``/``init 6``, ``systemctl reboot|poweroff|halt``
chmod_chown_broad      ``chmod -R``/``chown -R``/``chgrp -R`` on ``/``, a
                       top-level dir, ``~`` or ``$HOME`` (not on ``.``)
kill_all               ``kill -9 -1`` / ``kill -- -1`` (signal every process)
git_force_push_main    ``git push --force``/``-f``/``+main`` naming main or master
=====================  ==========================================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

from hermes_trio.config import TRUE_WORDS
from hermes_trio.tools.base import ApprovalDecision, ApprovalRequest, ToolContext

__all__ = [
    "DANGEROUS_PATTERNS",
    "DangerPattern",
    "check_approval",
    "find_danger",
    "yolo_from_env",
]


class DangerPattern(NamedTuple):
    key: str
    description: str
    regex: re.Pattern[str]


# Building blocks, spliced into the patterns below as <NAME>.
_PARTS: dict[str, str] = {
    # Where a new simple command can begin (see the module docstring).
    "START": r"""(?:^|[;&|\n({`]|\$\(|-c\s+['"]|\beval\s+['"]?)""",
    # Wrappers that run the next word as the command (``sudo -u root``, ``env``,
    # ``timeout 10``, ``FOO=bar``).  The loops are possessive (``*+``): a wrapper
    # never needs to give text back, and backtracking here is exponential on
    # inputs like "sudo -u sudo -u ...".
    "WRAP": (
        r"""(?:(?:sudo|doas)(?:\s+-(?:[ugCDprtUT]\s*[^\s;&|()`-]<W>*+|[A-Za-z]++))*+\s+"""
        r"""|(?:env|nohup|exec|command|builtin|time|nice|ionice|then|do|else|!)"""
        r"""(?:\s+-<W>++)*+\s+"""
        r"""|timeout(?:\s+-<W>++)*+\s+<W>++\s+"""
        r"""|\w++=<W>*+\s+)*+"""
    ),
    # One character of a plain word: a scan over it stops at the next place a
    # command could start, so each starting point costs only its own word.
    "W": r"[^\s;&|()`]",
    # A command word may be given with a path (/bin/rm, ~/bin/reboot).  Only
    # path characters, so that the scan stops at the next separator.
    "DIR": r"(?:[\w.~+-]*+/)*+",
    # End of a word: whitespace, a separator, a closing quote/paren or the end.
    "END": r"""(?=[\s;&|)`'"]|$)""",
    # The rest of the current simple command: up to ; & | newline, or a nested
    # command in $(...) or backticks, which is checked from its own start.
    # Bounded, because every command word scans it: unbounded, a long line of
    # "{rm {rm ..." would take quadratic time, on the event loop.
    "REST": r"[^;&|\n(`]{0,1024}",
    "Q": r"""['"]?""",
    # Paths whose recursive removal or chmod is catastrophic: /, a top-level
    # dir (optionally /*), /home/NAME, ~ and $HOME (optionally /*).
    "SYSTEM": (
        r"(?:/\*?"
        r"|/[^/\s;&|'\"]+/?\*?"
        r"|/(?:home|Users)/[^/\s;&|'\"]+/?\*?"
        r"|~[\w.-]*/?\*?"
        r"|\$\{?HOME\}?/?\*?)"
    ),
    # rm additionally must not wipe the working directory, its parent or `*`.
    "HERE": r"(?:\.{1,2}/?\*?|\*)",
    "SHELL": r"(?:ba|z|k|da|fi|c|tc)?sh",
    "DISK": r"(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|md\d|dm-\d|disk\d|loop\d)",
}
_PARTS["CMD"] = "<START>\\s*<WRAP><DIR>"


def _expand(template: str) -> str:
    # Repeat until stable: parts may refer to other parts (CMD -> START, WRAP, DIR).
    while True:
        expanded = re.sub(r"<([A-Z]+)>", lambda m: _PARTS[m.group(1)], template)
        if expanded == template:
            return expanded
        template = expanded


def _p(key: str, description: str, *template: str) -> DangerPattern:
    return DangerPattern(key, description, re.compile(_expand("".join(template))))


DANGEROUS_PATTERNS: tuple[DangerPattern, ...] = (
    _p(
        "rm_broad",
        "recursive delete of a broad path",
        r"<CMD>rm<END>(?:",
        r"(?=<REST>\s(?:-[A-Za-z]*[rR][A-Za-z]*|--recursive)<END>)",
        r"(?=<REST>\s<Q>(?:<SYSTEM>|<HERE>)<Q><END>)",
        r"|(?=<REST>\s--no-preserve-root<END>))",
    ),
    _p(
        "find_delete_broad",
        "find -delete over a broad path",
        r"<CMD>find\s<Q><SYSTEM><Q><END>(?=<REST>\s-delete<END>)",
    ),
    _p(
        "mkfs",
        "formatting a filesystem",
        r"<CMD>(?:mkfs(?:\.\w+)?|mke2fs|mkswap|wipefs)<END>",
    ),
    _p(
        "dd_device",
        "dd writing to a device",
        r"<CMD>dd<END><REST>\sof=<Q>/dev/(?!(?:null|zero|stdout|stderr|tty)\b|fd/)",
    ),
    _p(
        "write_device",
        "writing to a raw disk device",
        r"(?:>>?|\btee(?:\s+-\S+)*)\s*<Q>/dev/<DISK>",
    ),
    _p(
        "fork_bomb",
        "fork bomb",
        # The lookbehind and ++ keep this linear on long runs of word characters.
        r"(?<![\w:])(?P<f>[\w:]++)\s*\(\)\s*\{\s*(?P=f)\s*\|\s*(?P=f)\s*&",
    ),
    _p(
        "pipe_to_shell",
        "piping a download into a shell",
        r"<CMD>(?:curl|wget|fetch)<END>[^;&\n]{0,1024}\|\s*<WRAP><DIR><SHELL><END>",
        r"|<CMD><SHELL><END><REST>(?:<\(|\$\()\s*(?:curl|wget|fetch)\b",
    ),
    _p(
        "power",
        "shutting down or rebooting the machine",
        r"<CMD>(?:shutdown|reboot|halt|poweroff|(?:tel)?init\s+[06]",
        r"|systemctl\s+(?:-\S+\s+)*(?:reboot|poweroff|halt|kexec))<END>",
    ),
    _p(
        "chmod_chown_broad",
        "recursive permission/owner change of a system path",
        r"<CMD>(?:chmod|chown|chgrp)<END>",
        # chmod's -r is a mode (remove read), so only -R means recursive.
        r"(?=<REST>\s(?:-[A-Za-z]*R[A-Za-z]*|--recursive)<END>)",
        r"(?=<REST>\s<Q><SYSTEM><Q><END>)",
    ),
    _p(
        "kill_all",
        "killing every process",
        # At least one option first: in `kill -1 1234`, -1 is the signal.
        r"<CMD>kill(?:\s+(?:-s\s+\w+|-\S+))+\s+-1<END>",
    ),
    _p(
        "git_force_push_main",
        "force-pushing to main/master",
        r"<CMD>git(?:\s+-\S+)*\s+push<END>",
        r"(?=<REST>(?:\s--force<END>|\s-[A-Za-z]*f[A-Za-z]*<END>|\s\+(?:main|master)\b))",
        r"(?=<REST>[\s:/+](?:main|master)<END>)",
    ),
)


def find_danger(command: str) -> DangerPattern | None:
    """The first dangerous pattern ``command`` matches, or None."""
    for pattern in DANGEROUS_PATTERNS:
        if pattern.regex.search(command):
            return pattern
    return None


async def check_approval(tool_name: str, command: str, ctx: ToolContext) -> str | None:
    """None if ``command`` may run, else a refusal the model can read.

    Cancellation while waiting for the user propagates: the turn is over, and
    the command must not run.
    """
    if ctx.yolo:
        return None
    danger = find_danger(command)
    if danger is None or danger.key in ctx.approved_patterns:
        return None
    if ctx.approve is None:
        return (
            f"refused: this command needs the user's approval ({danger.description}) "
            "but there is no approval channel; run with --yolo to allow it. "
            "The command was not run. Do not retry it; choose a safer command."
        )
    request = ApprovalRequest(tool_name=tool_name, command=command, reason=danger.description)
    try:
        decision = await ctx.approve(request)
    except Exception as exc:  # trio.Cancelled is a BaseException and propagates
        return (
            f"refused: asking the user to approve this command ({danger.description}) "
            f"failed ({type(exc).__name__}: {exc}); the command was not run."
        )
    if decision is ApprovalDecision.ALWAYS:
        ctx.approved_patterns.add(danger.key)
        return None
    if decision is ApprovalDecision.ONCE:
        return None
    return (
        f"refused: this command needs the user's approval ({danger.description}) "
        "and it was denied. The command was not run. Do not retry it; "
        "ask the user or choose a safer command."
    )


def yolo_from_env(env: Mapping[str, str]) -> bool:
    """Whether ``HERMES_YOLO_MODE`` asks to skip approvals."""
    return env.get("HERMES_YOLO_MODE", "").strip().lower() in TRUE_WORDS
