"""The dangerous-command check knows where the command runs: the terminal
tool's ``workdir`` (resolved against the agent's working directory), and
the literal ``cd``/``pushd``/``popd`` inside the script.  Relative paths are
rooted there before their breadth is judged."""

from __future__ import annotations

from pathlib import Path

import pytest

import hermes_trio.tools.terminal as terminal_module
from hermes_trio.tools import TerminalTool, ToolContext, find_dangers
from hermes_trio.tools.terminal import ShellOutcome

# (command, directory it starts in): each deletes something broad.
BROAD: list[tuple[str, str]] = [
    ("rm -rf usr", "/"),
    ("rm -rf alice", "/home"),
    ("rm -rf ..", "/home/x"),
    ("rm -rf ../..", "/srv/a/b"),
    ("rm -rf *", "/"),
    ("rm -rf .", "/srv/project"),
    ("rm -rf /srv/project", "/srv/project"),
    ("rm -rf ./", "/srv/project"),
    ("rm -rf ../project", "/srv/project"),
    ("chmod -R 777 etc", "/"),
    ("find usr -delete", "/"),
    ("find . -name '*.tmp' -delete", "/"),
    ("cd / && rm -rf usr", "/srv/project"),
    ("cd /; rm -rf usr", "/srv/project"),
    ("cd / || exit 1\nrm -rf usr", "/srv/project"),
    ("cd /home && rm -rf alice", "/srv/project"),
    ("cd && rm -rf *", "/srv/project"),
    ("cd ~ && rm -rf .", "/srv/project"),
    ("cd .. && rm -rf project", "/srv/project"),
    ("cd ../.. && rm -rf *", "/srv/a/b"),
    ("pushd / && rm -rf usr", "/srv/project"),
    ("pushd / >/dev/null; pushd /tmp; popd; rm -rf usr", "/srv/project"),
    ("cd /tmp; cd -; cd /; rm -rf usr", "/srv/project"),
    ("builtin cd / && rm -rf usr", "/srv/project"),
    ('cd "$x" && rm -rf *', "/srv/project"),
    ("cd $(mystery) && rm -rf build", "/srv/project"),
    ("cd /; (rm -rf usr)", "/srv/project"),
    ("cd / && sh -c 'rm -rf usr'", "/srv/project"),
    ("cd / && find usr -delete", "/srv/project"),
    ("cd / && nice rm -rf usr", "/srv/project"),
    ("cd /; rm -rf $PWD/usr", "/srv/project"),
    ('cd /; rm -rf "$(pwd)/usr"', "/srv/project"),
    ("f() { rm -rf usr; }; cd /; f", "/srv/project"),
    ("trap 'rm -rf usr' EXIT; cd /", "/srv/project"),
    ("for d in a b; do rm -rf usr; cd /; done", "/srv/project"),
    ("if true; then cd /; fi; rm -rf usr", "/srv/project"),
    ("env -C / rm -rf usr", "/srv/project"),
    ("sudo -D / rm -rf usr", "/srv/project"),
    ("systemd-run rm -rf usr", "/srv/project"),
    ("su - -c 'rm -rf *'", "/srv/project"),
    ("ssh host 'rm -rf *'", "/srv/project"),
]


@pytest.mark.parametrize(("command", "start"), BROAD)
def test_relative_paths_are_judged_where_the_command_runs(command: str, start: str) -> None:
    assert find_dangers(command, workdir=start), (command, start)


# (command, directory it starts in): narrow there.
NARROW: list[tuple[str, str]] = [
    ("rm -rf build", "/tmp"),
    ("rm -rf usr/local/lib/foo", "/"),
    ("rm -rf build dist", "/srv/project"),
    ("rm -rf ./*.o", "/srv/project"),
    ("rm -rf ../other-checkout", "/srv/project"),
    ("cd build && rm -rf *", "/srv/project"),
    ("cd /tmp/work && rm -rf out", "/srv/project"),
    ("cd src && rm -rf build && cd ..", "/srv/project"),
    ("(cd / && ls); rm -rf usr", "/srv/project"),
    ("cd / | true; rm -rf usr", "/srv/project"),
    ('cd "$(mktemp -d)" && rm -rf *', "/srv/project"),
    ('tmp=$(mktemp -d); cd "$tmp" && rm -rf ./*', "/srv/project"),
    ("chmod -R u+w .", "/srv/project"),
    ("find . -name '*.pyc' -delete", "/srv/project"),
]


@pytest.mark.parametrize(("command", "start"), NARROW)
def test_narrow_paths_stay_unflagged(command: str, start: str) -> None:
    assert find_dangers(command, workdir=start) == (), (command, start)


@pytest.fixture
def fake_shell(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Records what the terminal tool would run instead of running it (some
    of these commands would delete system directories)."""
    ran: list[tuple[str, str]] = []

    async def run_shell(command: str, *, cwd: str, time_limit: float) -> ShellOutcome:
        ran.append((command, cwd))
        return ShellOutcome("", 0)

    monkeypatch.setattr(terminal_module, "run_shell", run_shell)
    return ran


@pytest.mark.parametrize(
    ("args", "agent_dir"),
    [
        ({"command": "rm -rf usr", "workdir": "/"}, None),
        ({"command": "rm -rf alice", "workdir": "/home"}, None),
        ({"command": "rm -rf lib", "workdir": ".."}, "/usr/share"),
        ({"command": "cd / && rm -rf usr"}, None),
        ({"command": "rm -rf *"}, "/"),
    ],
)
async def test_the_terminal_tool_judges_in_its_working_directory(
    args: dict[str, str],
    agent_dir: str | None,
    fake_shell: list[tuple[str, str]],
    tmp_path: Path,
) -> None:
    cwd = agent_dir or str(tmp_path)
    result = await TerminalTool().run(args, ToolContext(cwd=cwd))
    assert fake_shell == []
    assert not result.ok
    assert result.content.startswith("refused:"), result.content


async def test_a_narrow_command_in_a_workdir_runs(
    fake_shell: list[tuple[str, str]], tmp_path: Path
) -> None:
    (tmp_path / "sub").mkdir()
    result = await TerminalTool().run(
        {"command": "rm -rf build", "workdir": "sub"}, ToolContext(cwd=str(tmp_path))
    )
    assert result.ok, result.content
    assert fake_shell == [("rm -rf build", str(tmp_path / "sub"))]
