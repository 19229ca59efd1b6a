"""``read_file`` and ``write_file``.

The file work itself is plain blocking I/O done in one worker thread per call
(``trio.to_thread.run_sync``), which is simpler and faster than one thread
hop per line through ``trio.Path``.  The threads are not abandoned on
cancellation: each call does a bounded amount of work, and a write must not
be left half-done behind our back.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from typing import IO, Any

import trio

from hermes_trio.tools.base import ToolContext, ToolResult, one_line
from hermes_trio.tools.file_access import FileAccess, file_access, refusal

__all__ = ["DEFAULT_LINE_LIMIT", "ReadFileTool", "WriteFileTool"]

DEFAULT_LINE_LIMIT = 2000
# Caps on what one read_file call returns, in characters.
MAX_OUTPUT_CHARS = 50_000
MAX_LINE_CHARS = 2000
# Bytes of one line kept for display; the rest of a huge line is skipped unread.
_LINE_READ_BYTES = 4 * MAX_LINE_CHARS
_SNIFF_BYTES = 8192


def _os_error(verb: str, path: str, exc: OSError) -> ToolResult:
    if isinstance(exc, FileNotFoundError):
        return ToolResult(False, f"error: {path} does not exist")
    if isinstance(exc, IsADirectoryError):
        return ToolResult(False, f"error: {path} is a directory, not a file")
    if isinstance(exc, PermissionError):
        return ToolResult(False, f"error: permission denied {verb} {path}")
    return ToolResult(False, f"error: could not {verb.removesuffix('ing')} {path}: {exc}")


def _lines(f: IO[bytes]) -> Iterator[tuple[bytes, int]]:
    """(kept prefix, full length in bytes) for each line, without loading huge lines."""
    while chunk := f.readline(_LINE_READ_BYTES):
        length = len(chunk)
        if not chunk.endswith(b"\n"):
            while more := f.readline(65536):
                length += len(more)
                if more.endswith(b"\n"):
                    break
        yield chunk, length


def _read_numbered(path: str, offset: int, limit: int, access: FileAccess) -> ToolResult:
    problem = refusal(path, access)
    if problem is not None:
        return ToolResult(False, problem)
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            return ToolResult(False, f"error: {path} is a directory, not a file")
        # A FIFO or device would block this (uncancellable) thread forever.
        if not stat.S_ISREG(info.st_mode):
            return ToolResult(False, f"error: {path} is not a regular file")
        with open(path, "rb") as f:
            head = f.read(_SNIFF_BYTES)
            if b"\0" in head:
                return ToolResult(
                    False,
                    f"error: {path} looks like a binary file ({info.st_size} bytes); "
                    "read_file only shows text",
                )
            f.seek(0)
            return _format_window(path, _lines(f), offset, limit)
    except OSError as exc:
        return _os_error("reading", path, exc)


def _decode(body: bytes, *, complete: bool) -> tuple[str, bool]:
    """Text of one line and whether it had undecodable bytes."""
    # final=False for a cut line: a multi-byte character split by our cut is
    # not the file's fault, so the decoder just holds it back.
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(body, final=complete), False
    except UnicodeDecodeError:
        return body.decode("utf-8", "replace"), True


def _format_window(
    path: str, lines: Iterator[tuple[bytes, int]], offset: int, limit: int
) -> ToolResult:
    out: list[str] = []
    size = 0
    replaced = False
    number = 0
    next_offset: int | None = None
    for number, (raw, length) in enumerate(lines, start=1):
        if number < offset:
            continue
        if number >= offset + limit:
            next_offset = number
            break
        text, bad = _decode(raw.rstrip(b"\n").rstrip(b"\r"), complete=length == len(raw))
        replaced = replaced or bad
        if len(text) > MAX_LINE_CHARS or length > len(raw):
            text = f"{text[:MAX_LINE_CHARS]}… [line truncated; {length} bytes in total]"
        entry = f"{number:>4}\t{text}"
        if out and size + len(entry) + 1 > MAX_OUTPUT_CHARS:
            next_offset = number
            break
        out.append(entry)
        size += len(entry) + 1
    if number == 0:
        return ToolResult(True, f"({path} is empty)")
    if not out:
        return ToolResult(
            False, f"error: offset {offset} is past the end of {path} ({number} lines)"
        )
    if next_offset is not None:
        out.append(
            f"[showing lines {offset}-{next_offset - 1} of {path}; more lines follow, "
            f"continue with offset={next_offset}]"
        )
    if replaced:
        out.append(f"[note: {path} is not valid UTF-8; undecodable bytes are shown as �]")
    return ToolResult(True, "\n".join(out))


def _write_atomic(path: str, data: bytes, access: FileAccess) -> ToolResult:
    problem = refusal(path, access)
    if problem is not None:
        return ToolResult(False, problem)
    # Write through a symlink to its target rather than replacing the link.
    target = os.path.realpath(path)
    parent = os.path.dirname(target)
    tmp = os.path.join(parent, f".{os.path.basename(target)}.{secrets.token_hex(4)}.tmp")
    try:
        if os.path.isdir(target):
            return ToolResult(False, f"error: {path} is a directory, not a file")
        os.makedirs(parent, exist_ok=True)
        try:
            mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = None
        # 0o666 lets the umask decide a new file's mode, as a shell redirect would.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            if mode is not None:
                # Overwriting keeps the old permissions (an executable stays executable).
                os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        return _os_error("writing", path, exc)
    return ToolResult(True, f"wrote {len(data)} bytes to {path}")


class ReadFileTool:
    name = "read_file"
    description = (
        "Read a text file and return its lines numbered like `   1\\tline`. "
        f"Returns at most `limit` lines (default {DEFAULT_LINE_LIMIT}) starting at "
        "line `offset` (1-based); very long lines and very large outputs are cut, "
        "with a note saying which offset to continue from."
    )
    parameters: dict[str, Any] = {  # noqa: RUF012 - read-only schema, part of the Tool protocol
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": (
                    "File to read; relative to the session's working directory, "
                    "which it must be inside unless configured otherwise."
                ),
            },
            "offset": {"type": "integer", "description": "First line to show (1-based)."},
            "limit": {
                "type": "integer",
                "description": f"Number of lines to show (default {DEFAULT_LINE_LIMIT}).",
            },
        },
        "required": ["path"],
    }

    def preview(self, args: dict[str, Any]) -> str:
        path = str(args.get("path", ""))
        offset = args.get("offset")
        return one_line(f"{path}:{offset}" if offset else path)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        offset = args.get("offset") or 1
        limit = args.get("limit") or DEFAULT_LINE_LIMIT
        if offset < 1 or limit < 1:
            return ToolResult(False, "error: 'offset' and 'limit' must be at least 1")
        path = ctx.resolve_path(args["path"])
        return await trio.to_thread.run_sync(_read_numbered, path, offset, limit, file_access(ctx))


class WriteFileTool:
    name = "write_file"
    description = (
        "Write `content` to a file, replacing it if it exists and creating parent "
        "directories as needed. The write is atomic: readers see the old or the "
        "new file, never a partial one."
    )
    parameters: dict[str, Any] = {  # noqa: RUF012 - read-only schema, part of the Tool protocol
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": (
                    "File to write; relative to the session's working directory, "
                    "which it must be inside unless configured otherwise."
                ),
            },
            "content": {"type": "string", "description": "The complete new file content."},
        },
        "required": ["path", "content"],
    }

    def preview(self, args: dict[str, Any]) -> str:
        path = str(args.get("path", ""))
        content = args.get("content")
        size = f" ({len(content)} chars)" if isinstance(content, str) else ""
        return one_line(path, 80 - len(size)) + size

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = ctx.resolve_path(args["path"])
        data = args["content"].encode("utf-8")
        return await trio.to_thread.run_sync(_write_atomic, path, data, file_access(ctx))
