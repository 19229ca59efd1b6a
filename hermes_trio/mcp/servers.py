"""The configured MCP servers as the agent's tools.

:func:`open_mcp_servers` starts every enabled server of ``mcp_servers`` as
a child of its own nursery (the process's, for the life of the block),
and keeps the registry's ``mcp:<label>`` group equal to what each server
offers. A call asks first where the server's ``require_approval`` says so
(the same approval flow as dangerous terminal commands), relays the
server's progress notifications into the turn as ``ToolProgress``, and is
cancelled with the turn.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import trio

from ..config import McpServerConfig
from ..events import ToolProgress
from ..tools.approval import request_approval
from ..tools.base import Tool, ToolContext, ToolResult, one_line
from ..tools.registry import ToolRegistry
from .connection import McpServer, ServerTool, start_servers
from .naming import input_schema, needs_approval, split_name

__all__ = ["McpServers", "McpTool", "open_mcp_servers"]

log = logging.getLogger("hermes_trio.mcp")

# Seconds start-up waits for the servers' first answers before going on.
STARTUP_WAIT = 10.0
# Progress notifications a slow consumer may fall behind by; older ones
# are dropped (the next says more anyway).
_PROGRESS_BUFFER = 16


class McpTool:
    """One tool of one server, in the :class:`~hermes_trio.tools.base.Tool` shape."""

    def __init__(self, server: McpServer, spec: ServerTool) -> None:
        self.server = server
        self.spec = spec
        self.name = spec.name
        self.description = spec.description
        self.parameters = input_schema(spec.parameters)

    def preview(self, args: dict[str, Any]) -> str:
        return one_line(self._shown(args))

    def _shown(self, args: dict[str, Any]) -> str:
        """The call as the user sees it: the server's tool name and its arguments."""
        return f"{self.spec.tool} {json.dumps(args, ensure_ascii=False)}"

    def asks(self) -> bool:
        """Whether a call asks the user first (the server's ``require_approval``)."""
        return needs_approval(self.server.config.require_approval, self.spec.read_only)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if self.asks() and not ctx.yolo:
            refusal = await self._ask(args, ctx)
            if refusal is not None:
                return ToolResult(False, refusal)
        return await call_with_progress(self.server, self.spec.tool, self.name, args, ctx)

    async def _ask(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        reason = f"tool {self.spec.tool!r} of the MCP server {self.server.label!r}"
        answer = await request_approval(
            ctx, tool_name=self.name, command=self._shown(args), reason=reason
        )
        if answer is None:
            return (
                f"refused: calling {reason} needs the user's approval but there is no "
                "approval channel; it was not called."
            )
        return answer.refusal(reason, subject="this call")


async def call_with_progress(
    server: McpServer, tool: str, shown_name: str, args: dict[str, Any], ctx: ToolContext
) -> ToolResult:
    """Call ``tool``; its progress notifications become the turn's
    ``ToolProgress`` events. Everything runs in the caller's task tree."""
    call = ctx.call
    if call is None or call.publish is None:
        ok, text = await server.call(tool, args)
        return ToolResult(ok, text)
    publish = call.publish
    # Plain reports, not events: the events go only into the turn's channel.
    send, receive = trio.open_memory_channel[tuple[float, float | None, str]](_PROGRESS_BUFFER)
    index, call_id = call.index, call.call_id

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        # Runs in the SDK's reader: never wait there.
        try:
            send.send_nowait((progress, total, message or ""))
        except (trio.WouldBlock, trio.ClosedResourceError):
            pass

    async def forward() -> None:
        async for progress, total, message in receive:
            await publish(ToolProgress(shown_name, index, progress, total, message, call_id))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(forward)
        ok, text = await server.call(tool, args, on_progress)
        send.close()
    return ToolResult(ok, text)


class _DownTool:
    """Stands for a tool of a server that never came up, so a call to it
    is an error that says why rather than "unknown tool"."""

    def __init__(self, server: McpServer, name: str) -> None:
        self.server = server
        self.name = name
        self.description = ""
        self.parameters: dict[str, Any] = {"type": "object", "properties": {}}

    def preview(self, args: dict[str, Any]) -> str:
        return one_line(json.dumps(args, ensure_ascii=False))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ok, text = await self.server.call(self.name, args)
        return ToolResult(ok, text)


class McpServers:
    """The running servers of one process, by label."""

    def __init__(self, configs: Mapping[str, McpServerConfig], registry: ToolRegistry) -> None:
        self.registry = registry
        self.servers: dict[str, McpServer] = {}
        for label, config in configs.items():
            if config.enabled:
                self.servers[label] = McpServer(label, config, partial(self._sync, label))
        registry.add_resolver(self._resolve)

    def _sync(self, label: str) -> None:
        server = self.servers[label]
        self.registry.set_group(
            f"mcp:{label}", [McpTool(server, spec) for spec in server.tools.values()]
        )

    def _resolve(self, name: str) -> Tool | None:
        parts = split_name(name)
        if parts is None or parts[0] not in self.servers:
            return None
        server = self.servers[parts[0]]
        return None if server.up else _DownTool(server, name)

    async def start(self, nursery: trio.Nursery, wait: float = STARTUP_WAIT) -> None:
        """Start every server in ``nursery`` (see :func:`start_servers`)."""
        await start_servers(nursery, self.servers.values(), wait)


@asynccontextmanager
async def open_mcp_servers(
    configs: Mapping[str, McpServerConfig], registry: ToolRegistry
) -> AsyncIterator[McpServers]:
    """Run the enabled servers of ``configs`` for the life of the block;
    their tools join ``registry``. Leaving the block stops them."""
    servers = McpServers(configs, registry)
    if not servers.servers:
        yield servers
        return
    async with trio.open_nursery() as nursery:
        await servers.start(nursery)
        yield servers
        nursery.cancel_scope.cancel()
