"""A streamable-HTTP MCP server built with the ``mcp`` SDK's ``MCPServer``,
served on loopback by hypercorn's trio worker, for the tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations


@dataclass
class Calls:
    """What the server saw: finished and cancelled calls to ``slow``."""

    finished: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    headers: list[str] = field(default_factory=list)
    # Set when a call to ``slow`` was cancelled.
    saw_cancel: trio.Event = field(default_factory=trio.Event)


def build(calls: Calls) -> MCPServer:
    server = MCPServer("hermes-test")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int, ctx: Context) -> str:
        """Add two integers."""
        calls.headers.append((ctx.headers or {}).get("authorization", ""))
        return f"{a} + {b} = {a + b}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def grow(ctx: Context) -> str:
        """Offer one more tool, ``extra``, and tell the client the list changed."""
        server.add_tool(lambda: "extra!", name="extra", description="Added later.")
        await ctx.session.send_tool_list_changed()
        return "grown"

    @server.tool()
    def shout(text: str) -> str:
        """Say it louder (not read-only: asks first under auto)."""
        return text.upper() + "!"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def slow(steps: int, ctx: Context) -> str:
        """Report progress once per step, a step every 0.2 s."""
        try:
            for i in range(steps):
                await ctx.report_progress(i + 1, steps, f"step {i + 1}")
                await trio.sleep(0.2)
        except BaseException:
            calls.cancelled.append(steps)
            calls.saw_cancel.set()
            raise
        calls.finished.append(steps)
        return f"did {steps} steps"

    return server


@asynccontextmanager
async def open_http_mcp_server() -> AsyncIterator[tuple[str, Calls]]:
    """``(url, calls)`` of a server that runs for the life of the block."""
    calls = Calls()
    app = build(calls).streamable_http_app()
    config = HypercornConfig()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(serve, app, config)
        yield f"{binds[0]}/mcp", calls
        nursery.cancel_scope.cancel()
