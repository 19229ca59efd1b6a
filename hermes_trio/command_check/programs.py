"""What commands read and print, as far as the policy follows it: where a
command's stdin comes from (:class:`Feed`), what a piece of script outputs
(:class:`Output`: echo's and printf's text, the file cat prints, a
download, the setup code of a known tool), the files downloaders write, and
where an interpreter's program comes from (inline, a file, or stdin).  Pure
functions.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hermes_trio.command_check.shell_options import NO_OPTIONS, OptionSpec, names, scan
from hermes_trio.command_check.shell_syntax import decode_escapes
from hermes_trio.command_check.shell_words import Value, literal, placeholder_text

__all__ = [
    "DOWNLOADERS",
    "NOTHING",
    "NO_FEED",
    "STDIN_PATHS",
    "Feed",
    "Interpreter",
    "Output",
    "downloaded_files",
    "feed_of",
    "interpreter",
    "is_setup_command",
    "output_of",
    "program_source",
]

# --- what a piece of script produces and reads -----------------------------


@dataclass(frozen=True, slots=True)
class Output:
    # A download runs somewhere in it, so its output may be downloaded code.
    downloads: bool = False
    # Its output when that is known text (echo, printf, cat of known text).
    text: str | None = None
    # The name of the file whose contents it prints (cat FILE).
    file: str | None = None
    # Shell setup code printed by a known tool (ssh-agent -s, pyenv init -).
    setup: bool = False


@dataclass(frozen=True, slots=True)
class Feed:
    """Where a command's stdin comes from."""

    # "none" (nothing to judge), "download", "text", "file", "setup", "computed"
    kind: str
    # The text, or the file's name.
    text: str = ""


NO_FEED = Feed("none")
NOTHING = Output()


def feed_of(out: object) -> Feed:
    assert isinstance(out, Output)
    if out.downloads:
        return Feed("download")
    if out.setup:
        return Feed("setup")
    if out.text is not None:
        return Feed("text", out.text)
    if out.file is not None:
        return Feed("file", out.file)
    return Feed("computed")


# --- output of echo, printf and cat -------------------------------------

_ECHO_OPTION = re.compile(r"-[neE]+$")
_ECHO_OCTAL = re.compile(r"0[0-7]{0,3}|[1-7][0-7]{0,2}")
_FORMAT = re.compile(r"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d*))?([a-zA-Z%])")


def echo_escapes(text: str) -> str:
    """Escapes as echo decodes them (dash always, bash with -e): ``\\0NNN``
    and ``\\NNN`` octal, ``\\c`` ends the output, then as ``$'...'``."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        j = text.find("\\", i)
        if j < 0 or j + 1 >= len(text):
            out.append(text[i:])
            break
        out.append(text[i:j])
        nxt = text[j + 1]
        if nxt == "c":
            break
        m = _ECHO_OCTAL.match(text, j + 1)
        if m:
            out.append(chr(int(m.group(), 8) & 0xFF))
            i = m.end()
            continue
        k = j + 2
        while k < len(text) and text[k] != "\\":
            k += 1
        out.append(decode_escapes(text[j:k]))
        i = k
    return "".join(out)


def printf_text(fmt: str, args: Sequence[str]) -> str:
    """What ``printf FMT ARGS...`` prints; the format is reused while
    arguments remain (unknown arguments are placeholders already)."""
    fmt = decode_escapes(fmt)
    out: list[str] = []
    queue = iter(args)
    left = len(args)
    while True:
        used = False
        pos = 0
        for m in _FORMAT.finditer(fmt):
            out.append(fmt[pos : m.start()])
            pos = m.end()
            conversion = m.group(4)
            if conversion == "%":
                out.append("%")
                continue
            if m.group(2) == "*" and left:
                next(queue)
                left -= 1
            precision: int | None = None
            if m.group(3) == "*":
                precision = _number(next(queue)) if left else None
                left = max(left - 1, 0)
            elif m.group(3) is not None:
                precision = int(m.group(3) or 0)
            arg = ""
            if left:
                arg = next(queue)
                left -= 1
                used = True
            if conversion == "b":
                arg = echo_escapes(arg)
            elif conversion == "c":
                arg = arg[:1]
            if precision is not None and conversion in "bsq":
                arg = arg[:precision]
            out.append(arg)
        out.append(fmt[pos:])
        if not left or not used:
            return "".join(out)


def _number(text: str) -> int | None:
    try:
        return abs(int(text))
    except ValueError:
        return None


def output_of(name: str, args: Sequence[Value], feed: Feed) -> Output:
    """What ``name args`` prints, when it is known (echo, printf, cat)."""
    if name == "echo":
        i = 0
        while i < len(args) and _ECHO_OPTION.match(literal(args[i]) or ""):
            i += 1
        # dash's echo decodes escapes without -e; decoding shows the most.
        text = echo_escapes(" ".join(placeholder_text(v) for v in args[i:]))
        return Output(text=text + "\n")
    if name == "printf" and args:
        fmt, *rest = (placeholder_text(v) for v in args)
        if literal(args[0]) == "--" and rest:
            fmt, *rest = rest
        return Output(text=printf_text(fmt, rest))
    if name == "cat":
        if all(literal(v) in STDIN_PATHS for v in args):
            if feed.kind == "text":
                return Output(text=feed.text)
            if feed.kind == "file":
                return Output(file=feed.text)
            return Output(downloads=feed.kind == "download")
        files = [literal(v) for v in args if not (literal(v) or "").startswith("-")]
        if len(files) == 1 and files[0]:
            return Output(file=files[0])
    return NOTHING


# --- downloads -------------------------------------------------------------

DOWNLOADERS = names(
    "curl wget wget2 fetch http https xh xhs curlie aria2c lwp-request GET nc ncat netcat"
)
# Stands for a file a downloader wrote under a name the check cannot see.
ANY_FILE = "*"

_CURL = OptionSpec(
    with_value=names(
        "-o --output -d --data --data-raw --data-binary --data-urlencode -H --header -u --user "
        "-A --user-agent -e --referer -X --request -x --proxy -b --cookie -c --cookie-jar "
        "-F --form -T --upload-file -m --max-time -r --range -w --write-out -K --config "
        "--output-dir --connect-timeout --retry --cacert --cert --key -E -U --proxy-user "
        "-C --continue-at -z --time-cond -Q --quote -Y -y --limit-rate --resolve"
    ),
    permute=True,
)
_WGET = OptionSpec(
    with_value=names(
        "-O --output-document -P --directory-prefix -o --output-file -a --append-output "
        "-e --execute -t --tries -T --timeout -U --user-agent --header -i --input-file "
        "-w --wait -Q --quota -l --level -A --accept -R --reject --user --password"
    ),
    permute=True,
)
_ARIA2 = OptionSpec(with_value=names("-o --out -d --dir -i --input-file -x -s -j"), permute=True)


def _url_name(value: Value) -> str:
    text = literal(value)
    if text is None:
        return ANY_FILE
    path = text.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    name = path.rsplit("/", 1)[-1] if "/" in path else ""
    return name or ANY_FILE


def _basename(value: Value | None) -> str:
    text = literal(value) if value is not None else None
    if text is None:
        return ANY_FILE
    return text.rstrip("/").rsplit("/", 1)[-1] or ANY_FILE


def downloaded_files(name: str, args: Sequence[Value]) -> list[str]:
    """The names of the files ``name args`` downloads into, ``*`` for one
    whose name the check cannot see."""
    if name in ("curl", "curlie"):
        found = scan(args, _CURL)
        files = [_basename(o.value) for o in found.options if o.name in ("-o", "--output")]
        if found.has("-O", "--remote-name", "--remote-name-all", "-J"):
            files.extend(_url_name(args[i]) for i in found.operands)
        return files
    if name in ("wget", "wget2"):
        found = scan(args, _WGET)
        value = found.value("-O", "--output-document")
        if value is not None:
            return [] if literal(value) == "-" else [_basename(value)]
        return [_url_name(args[i]) for i in found.operands]
    if name == "aria2c":
        found = scan(args, _ARIA2)
        value = found.value("-o", "--out")
        return [_basename(value)] if value is not None else [ANY_FILE]
    return []


# --- shell setup code printed by known tools -------------------------------

# The documented way to set these up is `eval "$(TOOL …)"`: their output is
# shell code written by a program the user installed, not by the model.
_SETUP_SUBCOMMANDS: dict[str, frozenset[str]] = {
    "pyenv": names("init virtualenv-init"),
    "rbenv": names("init"),
    "nodenv": names("init"),
    "goenv": names("init"),
    "jenv": names("init"),
    "plenv": names("init"),
    "direnv": names("hook export"),
    "brew": names("shellenv"),
    "zoxide": names("init"),
    "starship": names("init"),
    "atuin": names("init"),
    "mise": names("activate env"),
    "rtx": names("activate env"),
    "fnm": names("env"),
    "opam": names("env"),
    "luarocks": names("path"),
    "minikube": names("docker-env podman-env completion"),
    "docker-machine": names("env"),
    "thefuck": names("--alias"),
}
_COMPLETION_TOOLS = names(
    "kubectl helm gh rustup poetry pip pip3 npm docker kind k3d flux argocd minikube "
    "kubeadm oc istioctl hugo cobra-cli deno bun uv uvx pnpm yarn"
)
_CONDA = names("conda mamba micromamba")


def is_setup_command(name: str, args: Sequence[Value]) -> bool:
    """Whether ``name args`` prints shell setup code of a known tool."""
    words = [literal(v) for v in args]
    if any(w is None for w in words):
        return False
    operands = [w for w in words if w and not w.startswith("-")]
    if name in ("dircolors", "register-python-argcomplete"):
        return True
    if name == "keychain":
        return "--eval" in words
    if name in _CONDA:
        return bool(operands) and operands[0].startswith("shell") and "hook" in operands
    if name in _COMPLETION_TOOLS and operands[:1] == ["completion"]:
        return True
    if name in ("uv", "uvx") and operands[:1] == ["generate-shell-completion"]:
        return True
    subcommands = _SETUP_SUBCOMMANDS.get(name)
    first = operands[0] if operands else next((w for w in words if w), None)
    return subcommands is not None and first in subcommands


# --- interpreters ----------------------------------------------------------

STDIN_PATHS = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})


@dataclass(frozen=True, slots=True)
class Interpreter:
    shell: bool = False
    options: OptionSpec = NO_OPTIONS
    # Options whose value is the program text (-c, -e, --eval).
    inline: frozenset[str] = frozenset()
    # Options that run something other than stdin or a script (-m module).
    elsewhere: frozenset[str] = frozenset()
    # Options whose value is the script file (php -f).
    file: frozenset[str] = frozenset()
    # An option (without a value) that makes the first operand the program
    # text (sh -c).
    inline_flag: str | None = None


_POSIX_SHELL = Interpreter(
    shell=True,
    options=OptionSpec(with_value=names("-o +o -O +O --rcfile --init-file"), plus=True),
    inline_flag="-c",
)
_FISH = Interpreter(
    shell=True,
    options=OptionSpec(
        with_value=names("-c --command -C --init-command -d --debug -o --debug-output --features")
    ),
    inline=names("-c --command -C --init-command"),
)
_SHELLS = names("sh bash rbash zsh dash ksh mksh pdksh oksh ash yash posh csh tcsh")


def _inline_interpreter(
    inline: str, with_value: str = "", elsewhere: str = "", file: str = ""
) -> Interpreter:
    takes = names(inline) | names(with_value) | names(elsewhere) | names(file)
    return Interpreter(
        options=OptionSpec(with_value=takes, last=names(inline) | names(elsewhere)),
        inline=names(inline),
        elsewhere=names(elsewhere),
        file=names(file),
    )


_INTERPRETERS: tuple[tuple[re.Pattern[str], Interpreter], ...] = (
    (
        re.compile(r"(?:python|pypy)[\d.]*$"),
        _inline_interpreter("-c", "-W -X --check-hash-based-pycs", "-m"),
    ),
    (re.compile(r"perl[\d.]*$"), _inline_interpreter("-e -E", "-I -M -m")),
    (
        re.compile(r"j?ruby[\d.]*$"),
        _inline_interpreter("-e", "-r -I -C -E -F --encoding"),
    ),
    (
        re.compile(r"(?:node|nodejs|bun|deno)$"),
        _inline_interpreter(
            "-e --eval -p --print",
            "-r --require --import --loader --input-type -C --conditions --env-file",
        ),
    ),
    (re.compile(r"php[\d.]*$"), _inline_interpreter("-r -B -R -E", "-d -c -z -t", file="-f")),
    (re.compile(r"lua(?:jit|[\d.]*)$"), _inline_interpreter("-e", "-l")),
    (re.compile(r"(?:tclsh[\d.]*|wish|Rscript|julia|groovy|osascript)$"), Interpreter()),
)


@functools.lru_cache(maxsize=512)
def interpreter(name: str) -> Interpreter | None:
    if name == "fish":
        return _FISH
    if name in _SHELLS:
        return _POSIX_SHELL
    for pattern, spec in _INTERPRETERS:
        if pattern.match(name):
            return spec
    return None


Source = tuple[str, Value | None]


def program_source(
    spec: Interpreter, args: Sequence[Value], spend: Callable[[int], None]
) -> Source:
    """Where an interpreter's program comes from: ``("inline", text)``,
    ``("file", path)``, ``("stdin", None)`` or ``("none", None)``."""
    found = scan(args, spec.options)
    spend(found.examined)
    for option in found.options:
        if option.name in spec.inline:
            return ("inline", option.value) if option.value is not None else ("none", None)
        if option.name in spec.file:
            return ("file", option.value) if option.value is not None else ("none", None)
        if option.name in spec.elsewhere:
            return ("none", None)
    operands = found.operands
    if spec.shell and operands and found.dashdash is None and literal(args[operands[0]]) == "-":
        operands = operands[1:]  # a lone "-" ends a shell's options
    if spec.inline_flag is not None and found.has(spec.inline_flag):
        return ("inline", args[operands[0]]) if operands else ("none", None)
    if spec.shell and found.has("-s"):
        return ("stdin", None)
    if not operands:
        return ("stdin", None)
    first = args[operands[0]]
    if not spec.shell and literal(first) == "-":
        return ("stdin", None)
    return ("file", first)
