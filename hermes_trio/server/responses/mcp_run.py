"""A Responses request's ``mcp`` servers, connected for the life of its turn.

Each server of the request's ``mcp`` tools gets a streamable-HTTP session
(the same :class:`~hermes_trio.mcp.McpServer` as a configured one) in the
turn's own task tree: opened before the model is asked, closed when the
turn ends. Its tools join a registry of the turn's own (the agent's tools
plus these), named ``<server_label>__<tool>``; a call asks first where the
request's ``require_approval`` says so.

Only a request with an ``mcp`` tool imports this module (and with it the
MCP SDK); :mod:`.request_tools` holds what every Responses request needs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio

from ...config import McpServerConfig
from ...mcp import McpServer, McpTool, ServerTool, start_servers
from ...redaction import redact, register_request_secret, register_request_url
from ...tools.base import ToolContext, ToolResult
from ...tools.registry import ToolRegistry
from ...wire.responses_types import McpListToolsTool
from .mcp_request import McpRequestTool

__all__ = ["Listing", "RequestMcpTool", "open_request_servers"]

# Seconds a request's server may take to answer, per call and to start.
MCP_TIMEOUT = 60.0


class RequestMcpTool(McpTool):
    """A tool of a request's server: it asks per the request's ``require_approval``."""

    def __init__(self, server: McpServer, spec: ServerTool, request: McpRequestTool) -> None:
        super().__init__(server, spec)
        self.request = request

    def asks(self) -> bool:
        return self.request.needs_approval(self.spec.tool)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        result = await super().run(args, ctx)
        if result.ok:
            return result
        # An error may quote what the request sent (its headers, its URL).
        return ToolResult(False, redact(result.content))


@dataclass(frozen=True)
class RequestServerConfig(McpServerConfig):
    """A request's server: its URL's credentials and its headers are the
    request's secrets, not the process's (a configured server's join the
    process-wide registry)."""

    def __post_init__(self) -> None:
        register_request_url(self.url)
        for value in self.headers.values():
            register_request_secret(value)


@dataclass
class Listing:
    """What one server offered (``tools``), or why it could not (``error``)."""

    label: str
    tools: list[McpListToolsTool] = field(default_factory=list)
    error: str | None = None


@asynccontextmanager
async def open_request_servers(
    requested: Sequence[McpRequestTool], registry: ToolRegistry, *, wait: float = MCP_TIMEOUT
) -> AsyncIterator[tuple[list[Listing], dict[str, tuple[str, str]]]]:
    """Connect to ``requested`` for the life of the block; their tools join
    ``registry``. Yields each server's listing and the model's tool names
    -> (server label, the server's tool name)."""
    servers = [(request, McpServer(request.label, _config(request, wait))) for request in requested]
    async with trio.open_nursery() as nursery:
        await start_servers(nursery, (server for _, server in servers), wait)
        listings: list[Listing] = []
        names: dict[str, tuple[str, str]] = {}
        for request, server in servers:
            if not server.up:
                why = server.error or f"no answer within {wait:g} s"
                # The error may quote what the request sent (a key in its URL).
                error = redact(f"could not list tools: {why}")
                listings.append(Listing(request.label, error=error))
                continue
            specs = [s for s in server.tools.values() if s.read_only or not request.read_only_only]
            registry.set_group(
                f"mcp-request:{request.label}",
                [RequestMcpTool(server, spec, request) for spec in specs],
            )
            listings.append(Listing(request.label, [_listed(spec) for spec in specs]))
            names.update({spec.name: (request.label, spec.tool) for spec in specs})
        yield listings, names
        nursery.cancel_scope.cancel()


def _config(request: McpRequestTool, timeout: float) -> McpServerConfig:
    return RequestServerConfig(
        url=request.url,
        headers=dict(request.headers),
        tools=list(request.allowed) if request.allowed is not None else None,
        timeout=timeout,
    )


def _listed(spec: ServerTool) -> McpListToolsTool:
    return {
        "name": spec.tool,
        "description": spec.description,
        "input_schema": spec.parameters or {"type": "object", "properties": {}},
        "annotations": {"read_only": spec.read_only} if spec.read_only is not None else None,
    }
