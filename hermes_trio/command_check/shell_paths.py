"""How much of the file system a path argument can reach, judged where the
command runs.

A :class:`Place` holds the directories a command may be running in, as
segments (see :mod:`hermes_trio.command_check.shell_words`; ``start`` is the
directory the whole command started in, ``pwd`` in an argument is the
current one), and the absolute path of that start directory when it is
known.  A relative argument is rooted in each of them before it is judged,
so ``rm -rf usr`` is ``/usr`` when the command runs in ``/``.  Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hermes_trio.command_check.shell_words import UNKNOWN, Segment, Value, literal

__all__ = [
    "HERE",
    "NARROW",
    "START",
    "SYSTEM",
    "Place",
    "breadth",
    "is_temporary_root",
    "merge_dirs",
    "normalize_dir",
    "rooted",
]

# Breadth of a path argument.
NARROW = 0  # a specific file or directory
HERE = 1  # the working directory, its parent, or everything in it
SYSTEM = 2  # /, a top-level directory, a home directory, or unknown

START: tuple[Segment, ...] = (("start", ""),)
# Directories a command may be in, at most; more are "unknown".
MAX_DIRS = 6
# Components of a directory kept; a deeper one is "unknown".
MAX_DIR_DEPTH = 64

# Second-level directories as broad as top-level ones: whole homes and the
# system's own trees (not /var/www or /etc/nginx, which users manage).
_SYSTEM_PARENTS = frozenset({"home", "Users", "usr"})
_SYSTEM_SECOND_LEVEL = frozenset({("var", "lib")})
# Names that, under a directory the user's environment chooses ("$X/usr"),
# may still be a system tree: the top-level ones and those of /usr and /var.
_SYSTEM_NAMES = frozenset(
    "bin boot dev etc home lib lib32 lib64 libx32 lost+found media mnt opt proc root run "
    "sbin snap srv sys tmp usr var nix Applications Library System Users Volumes private "
    "cores".split()
)
_SYSTEM_SUBDIRS = frozenset("local share include libexec src games cache log spool mail".split())
_TEMPORARY_ROOTS = frozenset({"/tmp", "/var/tmp", "/private/tmp", "/dev/shm"})
_GLOB = re.compile(r"[*?]|\[[^\]]+\]")
_BRACKET = re.compile(r"\[[^\]]*\]")


@dataclass(frozen=True, slots=True)
class Place:
    # The directories the command may be in; START is where it started.
    cwds: tuple[tuple[Segment, ...], ...] = (START,)
    # Absolute path of the start directory, when known.
    start: str | None = None


def _first_text(segments: tuple[Segment, ...]) -> tuple[str, str]:
    """The kind and text the value begins with (empty literals skipped)."""
    for kind, text in segments:
        if kind in ("lit", "raw") and not text:
            continue
        return kind, text
    return "lit", ""


def rooted(segments: tuple[Segment, ...], cwd: tuple[Segment, ...]) -> tuple[Segment, ...]:
    """``segments`` as a path from ``cwd`` when it is relative."""
    kind, text = _first_text(segments)
    if kind == "pwd":
        i = next(k for k, s in enumerate(segments) if s[0] == "pwd")
        return cwd + segments[i + 1 :]
    if kind in ("lit", "raw") and not text.startswith("/"):
        return (*cwd, ("lit", "/"), *segments)
    return segments


def breadth(value: Value, place: Place | None = None) -> int:
    """NARROW, HERE or SYSTEM: how much a path argument can reach from any
    directory of ``place``.

    Expansions that may be empty cut the path there (``"$DIR"/*`` may be
    ``/*``), a glob that matches nearly everything stands for its directory,
    and ``..`` is followed lexically.
    """
    if not any(text or kind not in ("lit", "raw") for kind, text in value.segments):
        return NARROW  # an empty argument names no file
    place = place or Place()
    return max(_reach(rooted(value.segments, cwd), place.start) for cwd in place.cwds)


def is_temporary_root(value: Value, place: Place) -> bool:
    """Whether ``value`` is a temporary directory such as ``/tmp``, which
    holds many programs' unrelated files."""
    text = literal(value)
    if text is None:
        return False
    path = "/" + "/".join(p for p in text.split("/") if p and p != ".")
    return text.startswith("/") and path in _TEMPORARY_ROOTS


def _components(segments: tuple[Segment, ...]) -> list[list[Segment]]:
    components: list[list[Segment]] = [[]]
    for kind, text in segments:
        if kind in ("lit", "raw"):
            pieces = text.split("/")
            for i, piece in enumerate(pieces):
                if i:
                    components.append([])
                if piece:
                    components[-1].append((kind, piece))
        else:
            components[-1].append((kind, text))
    return components


def _is_glob(component: list[Segment]) -> bool:
    return any(kind == "raw" and (_GLOB.search(text) or "(" in text) for kind, text in component)


def _matches_nearly_everything(component: list[Segment]) -> bool:
    # `*`, `.*`, `*.*`, `[a-z]*`, extglobs: nothing specific is left after
    # removing the pattern syntax (`*.o` keeps the `o`).
    rest: list[str] = []
    for kind, text in component:
        if kind == "raw":
            if "(" in text:
                return True
            rest.append(_BRACKET.sub("", text).replace("*", "").replace("?", ""))
        elif kind == "lit":
            rest.append(text)
        else:
            return False
    return set("".join(rest)) <= {"."}


def _is_specific(component: list[Segment]) -> bool:
    """A component that names one entry (not ``.``, ``..``, ``*`` or an
    expansion)."""
    if not component or any(kind not in ("lit", "raw") for kind, _ in component):
        return False
    text = "".join(t for _, t in component)
    return text not in (".", "..") and not (
        _is_glob(component) and _matches_nearly_everything(component)
    )


def _base(components: list[list[Segment]], start: str | None) -> tuple[str, list[str], int]:
    """The kind of directory a path starts from, the names it starts with,
    and the index of its first component after that."""
    first = components[0]
    if len(components) > 1 and not first:
        return "abs", [], 1
    if len(first) == 1 and first[0][0] in ("start", "home", "top", "item", "env", "unknown"):
        kind = first[0][0]
        if kind == "start":
            if start is None:
                return "rel", [], 1
            return "abs", [p for p in start.split("/") if p], 1
        return kind, [], 1
    if first and all(kind == "unknown" for kind, _ in first):
        return "unknown", [], 1
    return "rel", [], 0


def _reach(segments: tuple[Segment, ...], start: str | None) -> int:
    components = _components(segments)
    base, names, index = _base(components, start)
    if base == "unknown":
        return SYSTEM
    up = 0
    rest = components[index:]
    for k, component in enumerate(rest):
        if not component:
            continue
        kinds = {kind for kind, _ in component}
        if kinds <= {"unknown", "env"}:
            break  # the path may end here (the expansion may be empty)
        if kinds <= {"lit", "raw"}:
            text = "".join(t for _, t in component)
            if text == ".":
                continue
            if text == "..":
                if names:
                    names.pop()
                elif base == "rel":
                    up += 1
                elif base == "home":
                    base, names = "abs", ["home"]
                elif base != "abs":
                    return SYSTEM  # above a directory nobody knows
                continue
            if (
                _is_glob(component)
                and _matches_nearly_everything(component)
                and not any(_is_specific(c) for c in rest[k + 1 :])
            ):
                break  # `dir/*` stands for dir (but `*/build` is a name)
        names.append("".join(t for _, t in component) or "?")
    return _level(base, names, up, start)


def _level(base: str, names: list[str], up: int, start: str | None) -> int:
    if base == "abs":
        level = _absolute_level(names)
        if start is not None and level < HERE:
            start_names = [p for p in start.split("/") if p]
            if start_names[: len(names)] == names:
                return HERE  # the start directory or one above it
        return level
    if base == "home":
        return NARROW if names else SYSTEM
    if base == "top":
        return NARROW if names else HERE
    if base == "item":
        return NARROW
    if base == "env":
        if not names or names[0] in _SYSTEM_NAMES:
            return SYSTEM
        if len(names) == 1 and names[0] in _SYSTEM_SUBDIRS:
            return SYSTEM
        return NARROW
    if names:
        return NARROW
    return HERE if up <= 1 else SYSTEM


def _absolute_level(names: list[str]) -> int:
    if len(names) <= 1:
        return SYSTEM
    if len(names) == 2 and (names[0] in _SYSTEM_PARENTS or tuple(names) in _SYSTEM_SECOND_LEVEL):
        return SYSTEM
    return NARROW


# --- the working directory -------------------------------------------------


def normalize_dir(segments: tuple[Segment, ...]) -> tuple[Segment, ...]:
    """A rooted directory in its shortest form (``.`` and ``..`` resolved
    where the names are known), or unknown when it cannot be kept."""
    components = _components(segments)
    first = components[0]
    if len(components) > 1 and not first:
        base: tuple[Segment, ...] = ()
        rest = components[1:]
    elif len(first) == 1 and first[0][0] not in ("lit", "raw"):
        base = (first[0],)
        rest = components[1:]
    else:
        return UNKNOWN
    if base == UNKNOWN:
        return UNKNOWN
    names: list[str] = []
    for component in rest:
        if not component:
            continue
        if any(kind not in ("lit", "raw") for kind, _ in component):
            return UNKNOWN
        text = "".join(t for _, t in component)
        if text == ".":
            continue
        if text == "..":
            if names and names[-1] != "..":
                names.pop()
            elif base:
                names.append("..")
            continue
        names.append(text)
    if len(names) > MAX_DIR_DEPTH:
        return UNKNOWN
    if not names:
        return base or (("lit", "/"),)
    return (*base, ("lit", "/" + "/".join(names)))


def merge_dirs(
    *alternatives: tuple[tuple[Segment, ...], ...],
) -> tuple[tuple[Segment, ...], ...]:
    """The directories of several alternatives, each once; unknown past
    :data:`MAX_DIRS`."""
    seen: dict[tuple[Segment, ...], None] = {}
    for dirs in alternatives:
        for d in dirs:
            seen[d] = None
    if len(seen) > MAX_DIRS:
        return (UNKNOWN,)
    return tuple(seen)
