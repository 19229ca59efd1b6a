"""Where ``read_file`` and ``write_file`` may go.

With ``file_access: workdir`` (the default) a path must lie inside the
session's working directory or one of ``file_roots`` once it is resolved the
way the operating system will resolve it: ``..`` and every symlink followed,
including a symlink inside the working directory that points out, and a
dangling one that a write would create a file through.  ``anywhere`` turns
the check off.

This keeps the file tools where the user put the agent; it is not a sandbox.
The terminal tool can still reach every file, and a path swapped for a
symlink between the check and the open (by a command running at the same
time) is not caught.

A hard link is not refused: it is the file itself, with no target to
resolve, and refusing every file with more than one name would refuse
whole virtual environments (uv and pnpm install packages as hard links to
their caches).  Only the user or a shell command can make one, to a file
the user can already read; and a write replaces the name inside the
working directory, leaving the file's other names as they were.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hermes_trio.tools.base import ToolContext

__all__ = ["FileAccess", "file_access", "refusal"]


@dataclass(frozen=True)
class FileAccess:
    # Absolute, not yet resolved; the working directory first.  None: anywhere.
    roots: tuple[str, ...] | None


def file_access(ctx: ToolContext) -> FileAccess:
    """The roots ``ctx`` allows (no I/O beyond ``os.getcwd``)."""
    if ctx.file_access == "anywhere":
        return FileAccess(None)
    return FileAccess((ctx.resolve_path("."), *(ctx.resolve_path(r) for r in ctx.file_roots)))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def refusal(path: str, access: FileAccess) -> str | None:
    """None if ``path`` (absolute) is allowed, else a message the model can
    read.  Resolves symlinks, so call it from a worker thread."""
    if access.roots is None:
        return None
    real = os.path.realpath(path)
    if any(_inside(real, os.path.realpath(root)) for root in access.roots):
        return None
    workdir, *extra = access.roots
    where = f"the working directory {workdir}"
    if extra:
        where += f" and agent.file_roots ({', '.join(extra)})"
    through = f" (which resolves to {real})" if real != os.path.abspath(path) else ""
    return (
        f"refused: {path}{through} is outside {where}; read_file and write_file only "
        "use files there. Use a path inside it, or ask the user to set "
        "agent.file_access: anywhere (HERMES_FILE_ACCESS=anywhere) or to add the "
        "directory to agent.file_roots."
    )
