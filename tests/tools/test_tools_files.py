"""read_file and write_file on a real temporary directory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hermes_trio.tools import ReadFileTool, ToolContext, ToolResult, WriteFileTool
from hermes_trio.tools.files import MAX_LINE_CHARS, MAX_OUTPUT_CHARS

reader = ReadFileTool()
writer = WriteFileTool()


def _around(path: str | Path) -> ToolContext:
    # A working directory that holds ``path`` (the file tools stay inside it).
    return ToolContext(cwd=str(Path(path).parent))


async def read(path: str | Path, ctx: ToolContext | None = None, **args: object) -> ToolResult:
    return await reader.run({"path": str(path), **args}, ctx or _around(path))


async def write(path: str | Path, content: str, ctx: ToolContext | None = None) -> ToolResult:
    return await writer.run({"path": str(path), "content": content}, ctx or _around(path))


async def test_round_trip(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    assert await write(target, "alpha\nbeta\n") == ToolResult(True, f"wrote 11 bytes to {target}")
    assert target.read_text() == "alpha\nbeta\n"
    assert await read(target) == ToolResult(True, "   1\talpha\n   2\tbeta")


async def test_write_counts_bytes_not_characters(tmp_path: Path) -> None:
    result = await write(tmp_path / "u.txt", "héllo ✓")
    assert result.content.startswith("wrote 10 bytes to ")  # 7 characters
    assert await read(tmp_path / "u.txt") == ToolResult(True, "   1\théllo ✓")


async def test_relative_paths_use_ctx_cwd(tmp_path: Path) -> None:
    ctx = ToolContext(cwd=str(tmp_path))
    result = await write("deep/er/file.py", "print(1)\n", ctx)
    target = tmp_path / "deep" / "er" / "file.py"
    assert result == ToolResult(True, f"wrote 9 bytes to {target}")
    assert target.read_text() == "print(1)\n"
    assert await read("deep/er/file.py", ctx) == ToolResult(True, "   1\tprint(1)")


async def test_overwrite_is_atomic_and_keeps_the_mode(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("old\n")
    script.chmod(0o755)
    assert (await write(script, "#!/bin/sh\necho new\n")).ok
    assert script.read_text() == "#!/bin/sh\necho new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    # No temporary files are left beside it.
    assert os.listdir(tmp_path) == ["run.sh"]


async def test_write_through_a_symlink_updates_the_target(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    assert (await write(link, "new")).ok
    assert link.is_symlink()
    assert real.read_text() == "new"


async def test_write_to_a_directory_fails(tmp_path: Path) -> None:
    result = await write(tmp_path, "x")
    assert result == ToolResult(False, f"error: {tmp_path} is a directory, not a file")


async def test_write_below_a_file_fails(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    result = await write(tmp_path / "file" / "child.txt", "x")
    assert not result.ok
    assert str(tmp_path / "file" / "child.txt") in result.content


async def test_read_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.txt"
    assert await read(missing) == ToolResult(False, f"error: {missing} does not exist")


async def test_read_directory(tmp_path: Path) -> None:
    expected = ToolResult(False, f"error: {tmp_path} is a directory, not a file")
    assert await read(tmp_path) == expected


async def test_read_fifo_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert await read(fifo) == ToolResult(False, f"error: {fifo} is not a regular file")


async def test_read_binary_file(tmp_path: Path) -> None:
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\x7fELF\x00\x01\x02")
    result = await read(blob)
    assert not result.ok
    assert f"{blob} looks like a binary file" in result.content


async def test_read_undecodable_text_is_replaced_and_noted(tmp_path: Path) -> None:
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("café\n".encode("latin-1"))
    result = await read(latin)
    assert result.ok
    assert result.content.startswith("   1\tcaf\ufffd\n")
    assert f"{latin} is not valid UTF-8" in result.content


async def test_read_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert await read(empty) == ToolResult(True, f"({empty} is empty)")


async def test_crlf_and_missing_final_newline(tmp_path: Path) -> None:
    f = tmp_path / "dos.txt"
    f.write_bytes(b"one\r\ntwo")
    assert await read(f) == ToolResult(True, "   1\tone\n   2\ttwo")


async def test_offset_and_limit(tmp_path: Path) -> None:
    f = tmp_path / "n.txt"
    f.write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = await read(f, offset=3, limit=2)
    assert result == ToolResult(
        True,
        "   3\tline 3\n   4\tline 4\n"
        f"[showing lines 3-4 of {f}; more lines follow, continue with offset=5]",
    )
    assert await read(f, offset=9) == ToolResult(True, "   9\tline 9\n  10\tline 10")


async def test_offset_past_the_end(tmp_path: Path) -> None:
    f = tmp_path / "short.txt"
    f.write_text("a\nb\n")
    assert await read(f, offset=5) == ToolResult(
        False, f"error: offset 5 is past the end of {f} (2 lines)"
    )


@pytest.mark.parametrize("args", [{"offset": -1}, {"limit": -5}])
async def test_bad_window(tmp_path: Path, args: dict[str, int]) -> None:
    f = tmp_path / "a.txt"
    f.write_text("a\n")
    result = await read(f, **args)
    assert result == ToolResult(False, "error: 'offset' and 'limit' must be at least 1")


async def test_long_lines_are_cut(tmp_path: Path) -> None:
    f = tmp_path / "min.js"
    f.write_text("é" * 100_000 + "\nnext\n")
    result = await read(f)
    first, second = result.content.split("\n")
    assert first == f"   1\t{'é' * MAX_LINE_CHARS}… [line truncated; 200001 bytes in total]"
    assert second == "   2\tnext"
    # A multi-byte character split by the cut is not reported as bad UTF-8.
    assert "not valid UTF-8" not in result.content


async def test_output_is_capped_with_a_continuation_offset(tmp_path: Path) -> None:
    f = tmp_path / "big.txt"
    f.write_text("".join(f"{'x' * 99}\n" for _ in range(2000)))
    result = await read(f)
    assert result.ok
    assert len(result.content) <= MAX_OUTPUT_CHARS + 200
    last = result.content.rsplit("\n", 1)[1]
    shown = result.content.count("\txxx")
    assert last == (
        f"[showing lines 1-{shown} of {f}; more lines follow, continue with offset={shown + 1}]"
    )
    assert (await read(f, offset=shown + 1)).content.startswith(f"{shown + 1:>4}\tx")


def test_previews() -> None:
    assert reader.preview({"path": "src/app.py"}) == "src/app.py"
    assert reader.preview({"path": "src/app.py", "offset": 40}) == "src/app.py:40"
    assert writer.preview({"path": "out.txt", "content": "hello"}) == "out.txt (5 chars)"
    assert len(writer.preview({"path": "p" * 200, "content": "x"})) == 80
