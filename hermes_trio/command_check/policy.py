"""Which shell commands need the user's approval before the terminal tool runs
them: the rule table and the judge that applies it to a parsed command.

The command is parsed (:mod:`hermes_trio.command_check.shell_syntax`), not matched as
text, so quoting (``\\rm``, ``"rm"``, ``r''m``, ``$'\\x72m'``), line
continuations and brace expansion cannot hide a command name, and ``echo
"rm -rf /"`` or ``grep reboot log.txt`` are not mistaken for one.  Every
simple command anywhere in the text is judged — after ``;``, ``&&``, ``|``,
inside ``$(...)``, backquotes, ``<(...)`` and ``>(...)``, loops, functions
(again where they are called), aliases and here-documents fed to a shell,
and inside scripts the shell parses again (``sh -c``, ``bash -lc``,
``eval``, ``su -c``, ``flock -c``, ``script -c``, ``watch``, ``trap`` (also
at the end, wherever the script went), ``env -S``, ``parallel``, ``ssh host
CMD``, ``git -c alias.x=!CMD``, text piped into ``sh``, ``su``, ``ssh`` or
``at``, a file the same command wrote and then runs) — by its command name,
after unwrapping the commands that run other commands:

    sudo, doas, pkexec, su, runuser, sg, env, nice, ionice, nohup, timeout,
    time, command, builtin, exec, stdbuf, chroot, setsid, unbuffer,
    taskset, chrt, flock, strace, coproc, busybox, toybox, systemd-run,
    unshare, nsenter, fakeroot, firejail, ssh-agent, xargs (its command
    gets one more argument: whatever arrives on stdin), find
    -exec/-execdir/-ok/-okdir (``{}`` is one of the files found under the
    start points).

Options are read the way each tool reads them (GNU tools take them after
operands too: ``rm build -rf``, ``su root -c CMD``), with one option
scanner.  A command name given with a path counts as its last component
(``/usr/bin/rm`` is ``rm``; ``$(which rm)`` too).

Paths are judged where the command runs: relative ones from the terminal
tool's working directory, following ``cd``, ``pushd`` and ``popd``,
``env -C``, ``sudo -D``, a login shell's home (``su -``, ``sudo -i``,
``ssh``) and ``systemd-run``'s ``/``.  A ``cd`` that may fail leaves both
directories possible (``cd x; rm -rf *``); after ``cd`` to a directory an
expansion decides, relative paths are as unknown as that directory.  The
working directory itself and the directories above it are broad.

``~``, ``~user``, ``$HOME`` and ``${HOME}`` are a home directory, ``$PWD``
and ``$(pwd)`` the current directory, ``$(git rev-parse --show-toplevel)``
the checkout.  Variables hold what the script assigned them, in the order
it runs: a literal text (``D=/home``), a fresh ``mktemp`` directory, a
``for`` loop's words in turn; one assigned only in a subshell, after ``&&``
or later in the script may still be unset.  A capitalised variable the
script never sets (and cannot set: no ``eval``, ``source``) is the user's
environment: ``"$SCRIPT_DIR/build"`` is a directory named build, and
``$EDITOR file`` runs the user's program — unless the arguments would be
dangerous for some command (``$CMD -rf /``).  Any other expansion is unknown
and may be anything (empty, ``/``, several words, or an option such as
``-r``).  Control flow is not followed otherwise: ``true || rm -rf /`` is
judged as if ``rm`` ran.

=====================  ==========================================================
key                    what needs approval
=====================  ==========================================================
rm_broad               ``rm`` with ``-r``/``-R``/``--recursive`` (or a word the
                       script decides, which may be ``-r``) on a broad path:
                       ``/``, a top-level dir (``/usr``, ``/tmp/*``),
                       ``/home/X``, ``/Users/X``, ``/usr/X``, ``/var/lib``, a
                       home (``~``, ``$HOME``, ``~/*``, ``~/.*``), the working
                       directory or one above it (``.``, ``..``, ``*``,
                       ``./*``, its own absolute path), or a path an unknown
                       expansion decides (``"$dir"``, ``"$x"/*``,
                       ``/tmp/$x``, ``xargs rm -rf``); or any ``rm
                       --no-preserve-root``.  Not ``rm -rf ./build``,
                       ``rm -rf /tmp/foo/bar``, ``rm -rf "$HOME/.cache"``,
                       ``rm -rf build/$x``, ``rm -rf ./*.o``,
                       ``rm -rf "$SCRIPT_DIR/build"``.
find_delete_broad      ``find -delete`` under ``/``, a top-level dir, a home or
                       an unknown path; under ``.`` (or ``/tmp``) only without
                       a test that selects files (``-name`` with a pattern
                       that is not ``*``, ``-path``, ``-mtime``, ``-size``, …;
                       not ``-type`` or ``-user``, and not under ``!`` or
                       beside ``-o``).  ``find … -exec CMD {}`` judges CMD with
                       ``{}`` standing for the start point by the same measure.
mkfs                   ``mkfs``, ``mkfs.*``, ``mke2fs``, ``mkswap``, ``wipefs``,
                       ``mkdosfs``, ``mkntfs``
dd_device              ``dd … of=/dev/X``, except ``/dev/null`` and friends
write_device           a redirection (``>``, ``>>``, ``&>``, ``<>``) or ``tee``
                       onto a raw disk (``/dev/sda``, ``/dev/nvme0n1``, …)
fork_bomb              a function that starts itself in a pipe or in the
                       background (``:(){ :|:& };:``, also quoted: ``\\:``)
pipe_to_shell          downloaded code run by a shell or an interpreter (sh, bash,
                       zsh, dash, ksh, python, perl, ruby, node, php, lua, …):
                       ``curl … | sh``, ``wget -O- … | sudo python3``,
                       ``bash <(curl …)``, ``source <(curl …)``, ``sh -c
                       "$(curl …)"``, ``python3 -c "$(curl …)"``, ``eval
                       "$(curl …)"``, ``bash <<< "$(curl …)"``, ``curl … | tee
                       >(sh)``, and a file a download wrote (or a copy of
                       it) run in the same command (``curl -o i.sh …; sh
                       i.sh``, ``./i.sh``, ``. i.sh``, ``cat i.sh | sh``).
                       Downloaders: curl, wget, fetch, httpie, xh, aria2c,
                       nc.  Not ``curl … | jq``,
                       ``curl … | python -m json.tool``, ``curl … | python3 -c
                       'code'``.
power                  ``shutdown``, ``reboot``, ``halt``, ``poweroff``,
                       ``init 0``/``6``, ``systemctl``/``loginctl``
                       ``reboot|poweroff|halt|kexec``
chmod_chown_broad      ``chmod``/``chown``/``chgrp`` ``-R`` (or a word the
                       script decides) on ``/``, a top-level dir, a home or an
                       unknown path (not on ``.``)
kill_all               ``kill`` with ``-1`` as the process (every process)
git_force_push_main    ``git push`` with ``--force``/``-f``/``--force-with-lease``
                       or a ``+ref`` (or ``--delete``/``:ref``) naming main,
                       master, ``HEAD`` or a branch an expansion decides;
                       a force push with no branch named (the current one may
                       be main) or with ``--all``/``--mirror``
unreadable             what the check cannot read or follow: unbalanced quotes,
                       unterminated constructs, nesting deeper than 24, a
                       command name that the script computes (``$cmd -rf /``,
                       ``$(…) args``, ``"$@"``), ``eval`` or ``sh -c`` of text
                       that is only expansions (``eval "$cmd"``), a shell
                       reading its script from another command's output (``cat
                       x | sh`` is fine for a file ``x``; ``make-script | sh``
                       and ``make-script > x; sh x`` are not), an alias whose
                       text an expansion decides, more than 65,536
                       characters, or more work than the check spends on a
                       command of its length (``eval eval …``)
=====================  ==========================================================

The output of a few setup tools is trusted as shell code (``eval
"$(ssh-agent -s)"``, ``eval "$(pyenv init -)"``, ``eval "$(direnv hook
bash)"``, ``source <(kubectl completion bash)``, …): the user installed them.

It is a guard rail against an over-eager model, not a sandbox: a script file,
``make``, ``npm run``, ``python -c`` code or a program that deletes files
itself runs without question.  The function is pure, and its work is bounded
by a budget linear in the length of the command.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hermes_trio.command_check.judge import CommandJudge, OverBudget
from hermes_trio.command_check.rules import DANGEROUS_PATTERNS, DangerPattern

__all__ = [
    "MAX_COMMAND_LENGTH",
    "Verdict",
    "assess",
    "find_danger",
    "find_dangers",
    "work_budget",
]

# Longer commands are not read (the kernel refuses a single argument over
# 128 KiB to `sh -c` anyway).
MAX_COMMAND_LENGTH = 65_536
# The work the check may spend on a command, in units of about one character
# parsed: a base for short commands, and a multiple of the length for the
# re-parsing (eval, sh -c), loops and function calls of long ones.
WORK_BASE = 4_000
WORK_PER_CHAR = 16
_ORDER = {pattern.key: i for i, pattern in enumerate(DANGEROUS_PATTERNS)}
_BY_KEY = {pattern.key: pattern for pattern in DANGEROUS_PATTERNS}


def work_budget(length: int) -> int:
    """The work units the check may spend on a command of ``length`` characters."""
    return WORK_BASE + WORK_PER_CHAR * length


@dataclass(frozen=True)
class Verdict:
    dangers: tuple[DangerPattern, ...]
    # Work units spent, and the budget they were counted against.
    work: int
    budget: int


def assess(command: str, workdir: str | None = None) -> Verdict:
    """Every rule ``command`` breaks when run in ``workdir`` (an absolute
    path; None if unknown), with the work spent judging it."""
    budget = work_budget(len(command))
    start = os.path.normpath(workdir) if workdir and workdir.startswith("/") else None
    judge = CommandJudge(start, budget)
    if len(command) > MAX_COMMAND_LENGTH:
        judge.flag(
            "unreadable",
            f"the command is {len(command)} characters long; the check reads at most "
            f"{MAX_COMMAND_LENGTH}",
        )
    else:
        try:
            judge.top(command)
        except OverBudget:
            judge.flag(
                "unreadable",
                f"too much to check for its length (work budget of {budget} units spent)",
            )
        except RecursionError:
            judge.flag("unreadable", "nested too deeply")
    found = sorted(judge.found.items(), key=lambda item: _ORDER[item[0]])
    dangers = tuple(_BY_KEY[key]._replace(detail=detail) for key, detail in found)
    return Verdict(dangers, judge.work, budget)


def find_dangers(command: str, workdir: str | None = None) -> tuple[DangerPattern, ...]:
    """Every rule ``command`` breaks, in table order, each with a detail."""
    return assess(command, workdir).dangers


def find_danger(command: str, workdir: str | None = None) -> DangerPattern | None:
    """The first rule ``command`` breaks, or None."""
    dangers = find_dangers(command, workdir)
    return dangers[0] if dangers else None
