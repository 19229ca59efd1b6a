"""Commands that run other commands, in every usual form: options before and
after operands where the tool accepts them (su, runuser, script), the
forms with a user or a lock file before the command, and wrappers that were
not unwrapped at all (pkexec, script, systemd-run, unshare, ...)."""

from __future__ import annotations

import pytest

from hermes_trio.tools import find_dangers

# Each runs `rm -rf` on a broad path (or worse); each must be flagged.
WRAPPED: list[str] = [
    # su and runuser permute their options like GNU tools: -c may follow the user.
    "su root -c 'rm -rf /'",
    "su - root -c 'rm -rf /'",
    "su - -c 'rm -rf /'",
    "su -l root -c 'rm -rf /'",
    "su -c 'rm -rf /'",
    "su root --command='rm -rf /'",
    "su root --session-command 'rm -rf /'",
    "sudo su -c 'rm -rf /'",
    "sudo su - root -c 'rm -rf ~'",
    "echo 'rm -rf ~' | su",
    "runuser -u bob -- rm -rf /",
    "runuser -u bob rm -- -rf /",
    "runuser -l bob -c 'rm -rf /'",
    "runuser bob -c 'rm -rf /'",
    "runuser -c 'rm -rf /' bob",
    # flock FILE -c CMD and flock FILE CMD
    "flock /tmp/l -c 'rm -rf ~'",
    "flock -x /tmp/l -c 'rm -rf ~'",
    "flock -n /tmp/l rm -rf ~",
    "flock /tmp/l --command 'rm -rf ~'",
    "flock -w 5 /tmp/l rm -rf ~",
    "flock -c 'rm -rf ~' /tmp/lock",
    # trap: -- ends its options
    "trap -- 'rm -rf ~' EXIT",
    "trap 'rm -rf ~' INT",
    # wrappers that were not unwrapped
    "pkexec rm -rf /",
    "pkexec --user root rm -rf /",
    "script -c 'rm -rf ~' /dev/null",
    "script -q /dev/null -c 'rm -rf ~'",
    "script --command 'rm -rf ~'",
    "systemd-run rm -rf /",
    "systemd-run --user --wait rm -rf ~",
    "systemd-run -p User=root --unit x rm -rf /",
    "unshare -r rm -rf ~",
    "unshare --mount --fork rm -rf /",
    "nsenter -t 1 -m -u -i -n -p rm -rf /",
    "nsenter --target 1 --all rm -rf /",
    "fakeroot rm -rf ~",
    "fakeroot -- rm -rf ~",
    "firejail --noprofile rm -rf ~",
    "ssh host rm -rf '~'",
    "ssh -p 22 host 'rm -rf ~'",
    "ssh host -p 22 'rm -rf ~'",
    "ssh -o ProxyCommand='rm -rf ~' host",
    "echo 'rm -rf ~' | at now",
    "echo 'rm -rf ~' | batch",
    "at now <<< 'rm -rf ~'",
    "sg wheel -c 'rm -rf ~'",
    # options with values, clustered, or after -- in the usual wrappers
    "timeout -k 5 10 rm -rf ~",
    "timeout 10s rm -rf ~",
    "nice -n5 rm -rf ~",
    "nice -5 rm -rf ~",
    "ionice -c 3 -n 7 rm -rf ~",
    "doas -u root rm -rf /",
    "nohup -- rm -rf ~",
    "strace -fe trace=file rm -rf ~",
    "strace -f -o /tmp/log rm -rf ~",
    "chroot / rm -rf /",
    "sudo -nu root rm -rf /",
    "sudo --user root rm -rf /",
    "sudo -E -H rm -rf /",
    "sudo -- rm -rf /",
    "sudo -i rm -rf /",
    "sudo VAR=1 rm -rf /",
    "sudo -D / rm -rf usr",
    "sudo --chdir=/ rm -rf usr",
    "env -C / rm -rf usr",
    "env --chdir / rm -rf usr",
    "xargs -r rm -rf",
    "xargs -L1 rm -rf",
    "xargs -l rm -rf",
    "xargs --null rm -rf",
    "xargs -0 -I {} rm -rf {}",
    "xargs -n 1 sh -c 'rm -rf \"$0\"'",
    "parallel -j4 rm -rf {} ::: ~",
    "parallel --jobs 4 'rm -rf {}' ::: ~",
    "watch -x rm -rf ~",
    "watch --exec rm -rf ~",
    "watch -n 5 'rm -rf ~'",
    "taskset -c 0 rm -rf ~",
    "taskset 0x1 rm -rf ~",
    "chrt -f 10 rm -rf ~",
    "chrt 10 rm -rf ~",
    "time -v rm -rf ~",
    "stdbuf -o0 rm -rf ~",
    "coproc rm -rf ~",
    "command -- rm -rf ~",
    "exec -- rm -rf ~",
    "exec -cl -a x rm -rf ~",
    "builtin eval 'rm -rf ~'",
    "busybox rm -rf ~",
    "busybox --install -s; rm -rf ~",
    "python3 -c 'import os' && rm -rf ~",
    "bash -c 'rm -rf \"$1\"' _ ~",
    "sh -c 'rm -rf \"$0\"' ~",
    "f(){ command f|f& };f",
    "f(){ $FUNCNAME|$FUNCNAME& };f",
    # shells and their options
    "bash -c -- 'rm -rf ~'",
    "bash -xc 'rm -rf ~'",
    "bash -o errexit -c 'rm -rf ~'",
    "bash --norc -c 'rm -rf ~'",
    "bash --rcfile x -c 'rm -rf ~'",
    "bash -O extglob -c 'rm -rf ~'",
    "bash +O extglob -c 'rm -rf ~'",
    "zsh -fc 'rm -rf ~'",
    "fish -c 'rm -rf ~'",
    "fish --command='rm -rf ~'",
    "csh -c 'rm -rf ~'",
    "nice xargs rm -rf",
    # find's forms
    "sudo find / -delete",
    "sudo -u root find ~ -exec rm -rf {} +",
    "find . -maxdepth 1 -name x -o -exec rm -rf {} +",
    "find / -name x -delete",
    "find / -path '*' -delete",
    "find . ! -name keep -delete",
    "find . -not -name keep -delete",
    "find . -name '*' -delete",
    "find . -name '*' -exec rm -rf {} +",
    "find . -iname '*' -delete",
    "find . -regex '.*' -delete",
    "find . -newer x -o -delete",
    "find . -size +0 -delete",
    "find . -mindepth 1 -delete",
    "find . -type f -delete",
    "find ~/ -type f -delete",
    "find -- ~ -delete",
    'find "$HOME" -delete',
    "find $(pwd) -delete",
    "find .. -delete",
    "find ../.. -name x -delete",
    "find /tmp -delete",
    "find /tmp -name '*' -delete",
]


@pytest.mark.parametrize("command", WRAPPED)
def test_wrapped_commands_are_flagged(command: str) -> None:
    assert find_dangers(command), command


# Wrappers that run nothing, or only something harmless.
HARMLESS: list[str] = [
    "su -l bob -c 'ls ~'",
    "runuser -u bob -- ls",
    "flock /tmp/lock -c 'make'",
    "flock -n /tmp/lock make build",
    "pkexec apt-get update",
    "script -q -c 'make test' /dev/null",
    "systemd-run --user --scope make",
    "unshare -r id",
    "ssh host 'ls -la'",
    "ssh -T git@github.com",
    "ssh host < local-script.sh",
    "echo 'make' | at now + 1 hour",
    "at -l",
    "trap - EXIT",
    "trap -- - INT",
    "sudo -v",
    "sudo -l",
    "command -v rm",
]


@pytest.mark.parametrize("command", HARMLESS)
def test_harmless_wrapped_commands_are_not_flagged(command: str) -> None:
    assert find_dangers(command) == (), command
