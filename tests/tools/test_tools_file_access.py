"""read_file and write_file stay inside the working directory (plus
``agent.file_roots``) unless ``agent.file_access`` is ``anywhere``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import make_config, open_agent

from hermes_trio.config import ConfigError, load_config
from hermes_trio.tools import ToolContext, ToolResult, default_registry

registry = default_registry()


async def call(tool: str, ctx: ToolContext, **args: object) -> ToolResult:
    return await registry.execute(tool, json.dumps(args), ctx)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    (work / "inside.txt").write_text("inside\n")
    (tmp_path / "secret.txt").write_text("secret\n")
    return work


async def test_read_outside_the_workdir_is_refused(work: Path) -> None:
    result = await call("read_file", ToolContext(cwd=str(work)), path="/etc/passwd")
    assert not result.ok
    assert result.content.startswith("refused:")
    assert "/etc/passwd" in result.content
    assert "agent.file_access" in result.content
    assert "root:" not in result.content


async def test_write_outside_the_workdir_is_refused(work: Path, tmp_path: Path) -> None:
    result = await call("write_file", ToolContext(cwd=str(work)), path="../../outside", content="x")
    assert not result.ok
    assert result.content.startswith("refused:")
    assert str(tmp_path / "outside") in result.content
    assert not (tmp_path / "outside").exists()


@pytest.mark.parametrize("path", ["../../secret.txt", "~/secret.txt", "sub/../../../secret.txt"])
async def test_relative_escapes_are_refused(work: Path, path: str, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(work.parent.parent))
    result = await call("read_file", ToolContext(cwd=str(work)), path=path)
    assert result.content.startswith("refused:")


async def test_inside_the_workdir_is_allowed(work: Path) -> None:
    ctx = ToolContext(cwd=str(work))
    assert await call("read_file", ctx, path="inside.txt") == ToolResult(True, "   1\tinside")
    assert await call("read_file", ctx, path=str(work / "inside.txt")) == ToolResult(
        True, "   1\tinside"
    )
    assert (await call("write_file", ctx, path="new/dir/f.txt", content="x")).ok
    assert (work / "new" / "dir" / "f.txt").read_text() == "x"
    assert (await call("write_file", ctx, path="./x/../y.txt", content="y")).ok


async def test_a_symlink_inside_pointing_out_is_refused(work: Path, tmp_path: Path) -> None:
    (work / "link.txt").symlink_to(tmp_path / "secret.txt")
    (work / "dirlink").symlink_to(tmp_path)
    ctx = ToolContext(cwd=str(work))
    for path in ("link.txt", "dirlink/secret.txt"):
        result = await call("read_file", ctx, path=path)
        assert result.content.startswith("refused:"), result
        assert str(tmp_path / "secret.txt") in result.content
        assert "secret" not in result.content.split(str(tmp_path))[0]
    # Writing through them would change or create files outside.
    for path, target in (
        ("link.txt", tmp_path / "secret.txt"),
        ("dirlink/created.txt", tmp_path / "created.txt"),
    ):
        result = await call("write_file", ctx, path=path, content="changed")
        assert result.content.startswith("refused:"), result
        assert not target.exists() or target.read_text() == "secret\n"


async def test_a_dangling_symlink_pointing_out_is_refused(work: Path, tmp_path: Path) -> None:
    (work / "dangling").symlink_to(tmp_path / "not-yet")
    result = await call("write_file", ToolContext(cwd=str(work)), path="dangling", content="x")
    assert result.content.startswith("refused:")
    assert not (tmp_path / "not-yet").exists()


async def test_a_symlink_inside_pointing_inside_is_fine(work: Path) -> None:
    (work / "alias.txt").symlink_to(work / "inside.txt")
    ctx = ToolContext(cwd=str(work))
    assert (await call("read_file", ctx, path="alias.txt")).ok
    assert (await call("write_file", ctx, path="alias.txt", content="new\n")).ok
    assert (work / "inside.txt").read_text() == "new\n"


async def test_a_hard_link_is_the_file_and_a_write_leaves_its_other_names_alone(
    work: Path, tmp_path: Path
) -> None:
    # The manual says so (docs/security.md): a hard link in the working directory reads like any
    # file there (only the user or a shell command can make one), and a write
    # replaces the name inside with a new file, so the outside name keeps its
    # contents.
    os.link(tmp_path / "secret.txt", work / "hard.txt")
    ctx = ToolContext(cwd=str(work))
    assert await call("read_file", ctx, path="hard.txt") == ToolResult(True, "   1\tsecret")
    assert (await call("write_file", ctx, path="hard.txt", content="changed\n")).ok
    assert (work / "hard.txt").read_text() == "changed\n"
    assert (tmp_path / "secret.txt").read_text() == "secret\n"
    assert os.stat(tmp_path / "secret.txt").st_nlink == 1


async def test_anywhere_allows_it(work: Path, tmp_path: Path) -> None:
    ctx = ToolContext(cwd=str(work), file_access="anywhere")
    assert (await call("read_file", ctx, path="/etc/passwd")).ok
    assert (await call("write_file", ctx, path="../../outside", content="x")).ok
    assert (tmp_path / "outside").read_text() == "x"


async def test_extra_roots_allow_those_trees_only(work: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    ctx = ToolContext(cwd=str(work), file_roots=(str(shared),))
    assert (await call("write_file", ctx, path=str(shared / "f.txt"), content="x")).ok
    assert (await call("read_file", ctx, path=str(shared / "f.txt"))).ok
    refused = await call("read_file", ctx, path="../../secret.txt")
    assert refused.content.startswith("refused:")
    assert "agent.file_roots" in refused.content


async def test_a_root_named_by_prefix_does_not_admit_its_siblings(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work-other").mkdir()
    (tmp_path / "work-other" / "f").write_text("x")
    ctx = ToolContext(cwd=str(tmp_path / "work"))
    result = await call("read_file", ctx, path="../work-other/f")
    assert result.content.startswith("refused:")


def test_config_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "c.yaml"
    path.write_text("agent: {file_access: anywhere, file_roots: [/srv/data, ~/notes]}\n")
    agent = load_config(path, env={}).agent
    assert agent.file_access == "anywhere"
    assert agent.file_roots == ["/srv/data", "~/notes"]
    path.write_text("agent: {file_access: everywhere}\n")
    with pytest.raises(ConfigError, match=r"agent\.file_access: expected 'workdir' or 'anywhere'"):
        load_config(path, env={})
    env = {"HERMES_FILE_ACCESS": "anywhere", "HERMES_FILE_ROOTS": "/a, /b"}
    agent = load_config(None, env=env).agent
    assert agent.file_access == "anywhere"
    assert agent.file_roots == ["/a", "/b"]


async def test_the_agent_passes_the_settings_to_its_tools(tmp_path: Path) -> None:
    config = make_config(
        "http://127.0.0.1:9/v1",
        agent={"workdir": str(tmp_path), "file_access": "anywhere", "file_roots": ["x"]},
    )
    async with open_agent(config) as agent:
        ctx = agent.new_tool_context()
    assert ctx.cwd == str(tmp_path)
    assert ctx.file_access == "anywhere"
    assert ctx.file_roots == ("x",)
