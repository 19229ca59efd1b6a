"""An MCP tool's result is capped: ``max_result_bytes`` (1 MiB unless set).

A real ``hermes-trio serve`` whose configured streamable-HTTP server (the
SDK's ``MCPServer`` in this test, answering in JSON) has a tool that returns
50 MB. The model's call ends at once with an error result that says the
limit, and serve stops reading the answer at the cap: its peak memory grows
by a small part of the 50 MB, where reading it whole held several times it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve
from mcp.server.mcpserver import MCPServer
from support import serve_before

from hermes_trio.config import McpServerConfig
from hermes_trio.mcp import open_mcp_servers
from hermes_trio.mcp.capped_http import CappedTransport, ResultTooLarge
from hermes_trio.testing import TextReply, ToolCallReply, open_scripted_server
from hermes_trio.tools import ToolContext, ToolRegistry

HUGE = 50_000_000


@asynccontextmanager
async def open_huge_server() -> AsyncIterator[str]:
    server = MCPServer("huge")

    @server.tool()
    def huge() -> str:
        """50 MB of text."""
        return "x" * HUGE

    @server.tool()
    def small() -> str:
        """A few bytes."""
        return "small result"

    app = server.streamable_http_app(json_response=True)
    config = HypercornConfig()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(serve, app, config)
        yield f"{binds[0]}/mcp"
        nursery.cancel_scope.cancel()


def peak_rss(pid: int) -> int:
    """The process's peak resident memory so far, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def tool_messages(request: object) -> list[str]:
    messages = request.json["messages"]  # type: ignore[attr-defined]
    return [m["content"] for m in messages if m["role"] == "tool"]


async def test_a_huge_tool_result_is_an_error_and_is_not_read_whole(tmp_path: Path) -> None:
    script = [
        ToolCallReply([("big__small", {})]),
        TextReply("small done"),
        ToolCallReply([("big__huge", {})]),
        TextReply("huge done"),
    ]
    async with open_huge_server() as url, open_scripted_server(script) as model:
        config = (
            f"mcp_servers:\n  big:\n    url: {url}\n    require_approval: never\n    timeout: 120\n"
        )
        async with serve_before(model.base_url, tmp_path, config) as (served, http):
            body = {"model": "m", "messages": [{"role": "user", "content": "go"}]}
            warm = await http.post("/chat/completions", json=body)
            assert warm.status_code == 200, warm.text
            assert tool_messages(model.model_requests[-1]) == ["small result"]
            before = peak_rss(served.process.pid)
            with trio.fail_after(30):
                reply = await http.post("/chat/completions", json=body, timeout=60)
            after = peak_rss(served.process.pid)
    assert reply.status_code == 200, reply.text[:300]
    assert reply.json()["choices"][0]["message"]["content"] == "huge done"
    assert after - before < 25_000_000, (before, after)
    (said,) = tool_messages(model.model_requests[-1])
    assert len(said) < 1000, len(said)
    assert "over the limit of 1048576 bytes" in said and "max_result_bytes" in said, said


STDIO_SERVER = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("big")


@server.tool()
def big() -> str:
    return "y" * 1500


server.run("stdio")
"""


async def test_a_stdio_result_over_the_cap_within_the_margin_is_an_error(tmp_path: Path) -> None:
    """A line may pass the cap by the envelope's margin and be read; the
    result's text is still held to the cap."""
    script = tmp_path / "big.py"
    script.write_text(STDIO_SERVER)
    config = McpServerConfig(
        command=sys.executable,
        args=[str(script)],
        max_result_bytes=1024,
        timeout=20,
        require_approval="never",
    )
    registry = ToolRegistry()
    async with open_mcp_servers({"s": config}, registry):
        result = await registry.execute("s__big", "{}", ToolContext())
    assert not result.ok
    assert result.content == (
        "error: s: the tool's result was 1500 bytes, over the limit of 1024 bytes "
        "(max_result_bytes of the MCP server); it was not passed on"
    )


async def test_the_http_transport_stops_at_the_cap() -> None:
    """Past the cap the body is read no further; a declared length over it
    is refused before any of it is read."""
    pieces: list[int] = []

    class Endless(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for _ in range(1000):
                pieces.append(1)
                yield b"z" * 1000

    def answer(request: httpx2.Request) -> httpx2.Response:
        headers = {"content-length": "9999999"} if request.url.path == "/declared" else {}
        return httpx2.Response(200, headers=headers, stream=Endless())

    transport = CappedTransport(httpx2.MockTransport(answer), 4096)
    async with httpx2.AsyncClient(transport=transport, base_url="http://mcp.test") as client:
        with pytest.raises(ResultTooLarge, match="more than 4096 bytes, over the limit of 4096"):
            await client.post("/streamed")
        assert len(pieces) == 5
        with pytest.raises(ResultTooLarge, match="was 9999999 bytes"):
            await client.post("/declared")
        assert len(pieces) == 5
        small = await client.get("/streamed")  # the notification stream: not one answer
        assert len(small.content) == 1_000_000


HUGE_STDIO_SERVER = f"""
from mcp.server.mcpserver import MCPServer

server = MCPServer("huge")


@server.tool()
def huge() -> str:
    return "x" * {HUGE}


@server.tool()
def small() -> str:
    return "small result"


server.run("stdio")
"""


async def test_a_huge_stdio_result_is_an_error_and_is_not_held_whole(tmp_path: Path) -> None:
    """The stdio path of the first test: serve reads the 50 MB line on to
    its end (or the server would block writing it) but keeps no more than
    the cap of it, and the call ends with the error as soon as it is over."""
    script = tmp_path / "huge.py"
    script.write_text(HUGE_STDIO_SERVER)
    reply_script = [
        ToolCallReply([("big__small", {})]),
        TextReply("small done"),
        ToolCallReply([("big__huge", {})]),
        TextReply("huge done"),
        ToolCallReply([("big__small", {})]),
        TextReply("small again"),
    ]
    async with open_scripted_server(reply_script) as model:
        config = (
            f"mcp_servers:\n  big:\n    command: {sys.executable}\n    args: [{script}]\n"
            "    require_approval: never\n    timeout: 120\n"
        )
        async with serve_before(model.base_url, tmp_path, config) as (served, http):
            body = {"model": "m", "messages": [{"role": "user", "content": "go"}]}
            warm = await http.post("/chat/completions", json=body, timeout=60)
            assert warm.status_code == 200, warm.text
            assert tool_messages(model.model_requests[-1]) == ["small result"]
            before = peak_rss(served.process.pid)
            with trio.fail_after(30):
                reply = await http.post("/chat/completions", json=body, timeout=60)
            after = peak_rss(served.process.pid)
            (said,) = tool_messages(model.model_requests[-1])
            # The line was read to its end: the next answer is the next call's.
            again = await http.post("/chat/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text[:300]
    assert reply.json()["choices"][0]["message"]["content"] == "huge done"
    assert after - before < 25_000_000, (before, after)
    assert said == (
        "error: big: the tool's result was more than 1048576 bytes, over the limit of "
        "1048576 bytes (max_result_bytes of the MCP server); it was not passed on"
    )
    assert again.json()["choices"][0]["message"]["content"] == "small again"
    assert tool_messages(model.model_requests[-1]) == ["small result"]


# A server that answers as the TypeScript SDK serialises (``{result,
# jsonrpc, id}``: the id last) and announces, before an answer, a message
# too long to keep that answers nothing.
TS_ORDER_SERVER = r"""
import json, sys

def send(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()

for line in sys.stdin:
    message = json.loads(line)
    ident, method = message.get("id"), message.get("method")
    if ident is None:
        continue
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "ts", "version": "1"},
        }
    elif method == "tools/list":
        tool = {"inputSchema": {"type": "object"}}
        result = {"tools": [dict(tool, name="huge"), dict(tool, name="small")]}
    elif method == "tools/call" and message["params"]["name"] == "huge":
        send({"method": "notifications/message",
              "params": {"level": "info", "data": "n" * 3_000_000}, "jsonrpc": "2.0"})
        # Escaped quotes and backslashes up to the id, as a reader from
        # the end must skip them.
        text = "z" * 3_000_000 + '\\"}' * 300
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    else:
        result = {"content": [{"type": "text", "text": "small result"}], "isError": False}
    sys.stdout.write(json.dumps({"result": result, "jsonrpc": "2.0"})[:-1]
                     + ',"id":' + json.dumps(ident) + "}\n")
    sys.stdout.flush()
"""


async def test_an_answer_with_its_id_last_over_the_cap_is_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The id is found at the end of the line; a line over the cap that
    answers nothing (a notification) is dropped with one warning; the next
    call is answered as usual."""
    script = tmp_path / "ts.py"
    script.write_text(TS_ORDER_SERVER)
    config = McpServerConfig(
        command=sys.executable, args=[str(script)], timeout=20, require_approval="never"
    )
    registry = ToolRegistry()
    async with open_mcp_servers({"ts": config}, registry):
        with trio.fail_after(15):
            result = await registry.execute("ts__huge", "{}", ToolContext())
            small = await registry.execute("ts__small", "{}", ToolContext())
    assert not result.ok
    assert result.content == (
        "error: ts: the tool's result was more than 1048576 bytes, over the limit of "
        "1048576 bytes (max_result_bytes of the MCP server); it was not passed on"
    )
    assert (small.ok, small.content) == (True, "small result")
    dropped = [r.getMessage() for r in caplog.records if "answers no request" in r.getMessage()]
    assert len(dropped) == 1, dropped
    assert "3000" in dropped[0] and "over the limit of 1048576 bytes" in dropped[0], dropped
