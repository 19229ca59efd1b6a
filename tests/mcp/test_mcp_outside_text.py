"""What an MCP server says reaches the log and the terminal escaped.

A real ``hermes-trio doctor`` with two stdio servers this test writes: one
whose stderr, tool name and tool description carry a newline, a carriage
return, an ANSI escape sequence, a C1 control, U+202E and a forged
access-log line, and one that refuses to start with that text as its
error. Neither doctor's report (stdout) nor its log (stderr) may hold a
raw control character or a line that starts with the forgery."""

from __future__ import annotations

import sys
from pathlib import Path

from support import clean_env, run_cli

FORGED = "12:00:00 INFO hermes_trio.access: GET /v1/forged 200 1.0ms"
ATTACK = f"x\n{FORGED}\r{FORGED}\x1b[31mred\u202eevil\u2066\x9b2J\u2028{FORGED}"

SERVER = """
import json, sys
ATTACK = {attack!r}
REFUSE = {refuse!r}
sys.stderr.write("starting " + ATTACK + "\\n")
sys.stderr.flush()
for line in sys.stdin:
    message = json.loads(line)
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        continue
    reply = {{"jsonrpc": "2.0", "id": ident}}
    if method == "initialize" and REFUSE:
        reply["error"] = {{"code": -32000, "message": ATTACK}}
    elif method == "initialize":
        reply["result"] = {{
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {{"tools": {{}}}},
            "serverInfo": {{"name": "evil", "version": "1"}},
        }}
    elif method == "tools/list":
        reply["result"] = {{"tools": [{{
            "name": "peek" + ATTACK,
            "description": ATTACK,
            "inputSchema": {{"type": "object", "properties": {{}}}},
        }}]}}
    else:
        reply["result"] = {{}}
    sys.stdout.write(json.dumps(reply) + "\\n")
    sys.stdout.flush()
"""


def _raw_controls(text: str) -> list[str]:
    return sorted({repr(c) for c in text if not c.isprintable() and c != "\n"})


async def test_doctor_escapes_what_mcp_servers_say(tmp_path: Path) -> None:
    for name, refuse in (("evil.py", False), ("refusing.py", True)):
        (tmp_path / name).write_text(SERVER.format(attack=ATTACK, refuse=refuse))
    (tmp_path / "config.yaml").write_text(
        "mcp_servers:\n"
        + "".join(
            f"  {label}:\n    command: {sys.executable}\n    args: [{script}]\n    timeout: 10\n"
            for label, script in (
                ("evil", tmp_path / "evil.py"),
                ("refusing", tmp_path / "refusing.py"),
            )
        )
    )
    env = clean_env(HERMES_DATA_DIR=str(tmp_path / "data"))
    result = await run_cli(["-v", "doctor"], env, tmp_path, within=60)
    out, err = result.stdout.decode(), result.stderr.decode()
    for shown in (out, err):
        assert _raw_controls(shown) == [], shown
        assert not [line for line in shown.split("\n") if line.startswith(FORGED)], shown
    # What the servers said is still there, visibly escaped.
    assert "ok    mcp server evil: answered; tools: peekx\\x0a12:00:00" in out, out
    assert "\\x1b[31mred\\u202eevil\\u2066\\x9b2J\\u2028" in out
    assert "FAIL  mcp server refusing: " in out and "\\x0d12:00:00" in out
    assert "[evil] starting x\\x0a" not in err  # the stderr pipe splits on newlines
    assert "[evil] starting x" in err and "\\x1b[31mred\\u202eevil" in err, err
    assert "'refusing' is down" in err
