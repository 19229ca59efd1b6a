"""Start-up time and idle memory of the ``hermes-trio`` command (issue 36).

Prints the median wall and CPU time of five runs of ``hermes-trio
--version``, ``chat --help`` and ``hermes-trio replay
tests/recording/tool_call_turn.json`` beside the bare interpreter's
(``python -c pass``, the floor no import work can go under); then the
resident memory (VmRSS from /proc) of an idle ``serve`` worker, a second
after it printed where it listens, without MCP servers and with one stdio
MCP server configured (the SDK's own minimal server), and the difference.

    python bench/startup.py [--runs 5] [--no-serve]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = str(Path(sys.executable).parent / "hermes-trio")
RECORDING = ROOT / "tests" / "recording" / "tool_call_turn.json"
# As a user's runs: Python caches the bytecode it compiles (with
# PYTHONDONTWRITEBYTECODE set every run compiles hermes_trio again, a
# fixed cost that says nothing about what the command imports).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

# The smallest MCP server the SDK makes: one tool, over stdio.
MCP_SERVER = """\
from mcp.server.mcpserver import MCPServer
server = MCPServer("bench")
@server.tool()
def echo(text: str) -> str:
    return text
server.run("stdio")
"""


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def median_times(argv: list[str], runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``runs`` runs (CPU: what a machine
    shared with other work changes least)."""
    walls, cpus = [], []
    # The first run writes the bytecode cache: not counted.
    subprocess.run(argv, cwd=ROOT, env=ENV, capture_output=True, check=True)
    for _ in range(runs):
        began, cpu = time.perf_counter(), children_cpu()
        subprocess.run(argv, cwd=ROOT, env=ENV, capture_output=True, check=True)
        walls.append(time.perf_counter() - began)
        cpus.append(children_cpu() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def wait_for_line(process: subprocess.Popen[str], text: str) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        if text in line:
            return line
    raise RuntimeError(f"{process.args!r} never printed {text!r}")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def idle_serve_rss(model_url: str, mcp: bool) -> float:
    """VmRSS of ``serve`` a second after it listens (its MCP server up, if any)."""
    with tempfile.TemporaryDirectory() as tmp:
        config = (
            f"model: {{base_url: '{model_url}', name: scripted-model, context_window: 32768}}\n"
            f"api_server: {{port: 0}}\nstore: {{data_dir: '{tmp}'}}\n"
        )
        if mcp:
            Path(tmp, "mcp_server.py").write_text(MCP_SERVER)
            config += (
                f"mcp_servers: {{bench: {{command: '{sys.executable}', "
                f"args: ['{tmp}/mcp_server.py']}}}}\n"
            )
        Path(tmp, "config.yaml").write_text(config)
        serve = subprocess.Popen(
            [COMMAND, "serve"], cwd=tmp, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            wait_for_line(serve, "listening on")
            time.sleep(1.0)
            return rss_mb(serve.pid)
        finally:
            serve.terminate()
            serve.wait(10)


def serve_memory() -> None:
    model = subprocess.Popen(
        [sys.executable, "-m", "hermes_trio.testing", "--port", "0"],
        env=ENV, stdout=subprocess.PIPE, text=True,
    )
    try:
        url = wait_for_line(model, "listening on").split("listening on ")[1].strip()
        plain = idle_serve_rss(url, mcp=False)
        with_mcp = idle_serve_rss(url, mcp=True)
    finally:
        model.terminate()
        model.wait(10)
    print(f"idle serve, no MCP servers:    VmRSS {plain:6.1f} MB")
    print(f"idle serve, one MCP server:    VmRSS {with_mcp:6.1f} MB "
          f"(+{with_mcp - plain:.1f} MB for MCP)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-serve", action="store_true", help="skip the idle-memory part")
    args = parser.parse_args()
    print(f"median of {args.runs} runs:                wall      CPU")
    for label, argv in (
        ("python -c pass (the floor)", [sys.executable, "-c", "pass"]),
        ("hermes-trio --version", [COMMAND, "--version"]),
        ("hermes-trio chat --help", [COMMAND, "chat", "--help"]),
        ("hermes-trio replay tool_call_turn", [COMMAND, "replay", str(RECORDING)]),
    ):
        wall, cpu = median_times(argv, args.runs)
        print(f"  {label:<36} {wall:6.3f} s  {cpu:6.3f} s")
    if not args.no_serve:
        serve_memory()


if __name__ == "__main__":
    main()
