"""A stdio MCP server (the SDK's ``MCPServer``) that can be made to crash:
``python stdio_server.py``. It says hello on stderr as it starts."""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("crashy")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> str:
    """This server's process id."""
    return str(os.getpid())


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def crash() -> str:
    """Exit at once, without answering."""
    os._exit(3)


if __name__ == "__main__":
    print("hello from stderr", file=sys.stderr, flush=True)
    server.run("stdio")
