"""Model Context Protocol servers' tools as the agent's tools.

:mod:`.naming` holds the pure decisions (names, filters, approval policy,
result text); :mod:`.connection` keeps one server's connection up;
:mod:`.servers` turns the configured servers into registry tools.
"""

from __future__ import annotations

from .connection import McpServer, ServerTool, start_servers
from .servers import McpServers, McpTool, open_mcp_servers

__all__ = ["McpServer", "McpServers", "McpTool", "ServerTool", "open_mcp_servers", "start_servers"]
