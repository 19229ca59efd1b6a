"""The capped stdio transport's reliance on the ``mcp`` SDK's internals.

``mcp/capped_stdio.py`` is the SDK's ``stdio_client`` with another stdout
reader, and calls the SDK's private helpers for the rest. An SDK release
that renames one, or changes ``stdio_client`` itself (a fix we would not
have), must be noticed: pyproject.toml caps ``mcp`` below 3, and this test
says what to re-check before then.
"""

from __future__ import annotations

import hashlib
import inspect
import re
from importlib.metadata import version
from pathlib import Path

import mcp_types
from mcp.client import stdio
from mcp.shared.message import SessionMessage

from hermes_trio.mcp.capped_stdio import SDK_INTERNALS

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"

# inspect.getsource(mcp.client.stdio.stdio_client) of mcp 2.3.0, which
# capped_stdio_client follows.
FOLLOWED = "ee669cfe97d99a4623058992b0a40a7a5ad5de8e04c778eb75c7542af1f0af9b"

PARAMETERS = {
    "_get_executable_command": ["command"],
    "_create_platform_compatible_process": ["command", "args", "env", "errlog", "cwd"],
    "_parse_line": ["line"],
    "_drain_stdout": ["process"],
    "_stop_server_process": ["process"],
    "_aclose_all": ["streams"],
}


def test_every_private_name_the_transport_relies_on_is_there() -> None:
    missing = [name for name in SDK_INTERNALS if not hasattr(stdio, name)]
    assert not missing, (
        f"mcp {version('mcp')}: mcp.client.stdio has no {', '.join(missing)}; "
        "hermes_trio/mcp/capped_stdio.py relies on it (see SDK_INTERNALS)"
    )
    for name, parameters in PARAMETERS.items():
        assert name in SDK_INTERNALS
        found = list(inspect.signature(getattr(stdio, name)).parameters)
        assert found == parameters, f"mcp.client.stdio.{name} now takes {found}"
    assert isinstance(stdio._WRITER_FLUSH_TIMEOUT, float)


def test_the_sdk_stdio_client_is_the_one_the_transport_follows() -> None:
    source = inspect.getsource(stdio.stdio_client)
    assert hashlib.sha256(source.encode()).hexdigest() == FOLLOWED, (
        f"mcp {version('mcp')} changed mcp.client.stdio.stdio_client: compare it with "
        "hermes_trio/mcp/capped_stdio.py capped_stdio_client, bring that up to date, "
        "and record the new hash here"
    )


def test_a_parsed_line_is_a_message_or_an_error_value() -> None:
    parsed = stdio._parse_line('{"jsonrpc":"2.0","id":1,"result":{}}')
    assert isinstance(parsed, SessionMessage)
    assert isinstance(parsed.message, mcp_types.JSONRPCResponse)
    assert isinstance(stdio._parse_line("not json"), ValueError)


def test_mcp_is_capped_below_its_next_major_version() -> None:
    cap = re.search(r'"mcp>=[^"]*<(\d+)"', PYPROJECT.read_text())
    assert cap, "pyproject.toml must cap mcp (mcp/capped_stdio.py relies on its internals)"
    assert int(version("mcp").split(".")[0]) < int(cap[1])
