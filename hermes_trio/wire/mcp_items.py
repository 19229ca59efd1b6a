"""The Responses API's MCP items, as OpenAI's spec shapes them (pure).

OpenAI asks a person about a tool call with an ``mcp_approval_request``
output item; the client answers with an ``mcp_approval_response`` input
item, and the call that then ran is an ``mcp_call`` item. Built-in tools use
the same items with ``server_label`` :data:`HERMES_LABEL`; an MCP server's
tools pass their own label.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .responses_types import (
    McpApprovalRequest,
    McpApprovalResponse,
    McpListTools,
    McpListToolsTool,
    McpToolCall,
    McpToolCallStatus,
)

__all__ = [
    "HERMES_LABEL",
    "approval_request_item",
    "approval_response_item",
    "arguments_json",
    "list_tools_item",
    "mcp_call_item",
]

HERMES_LABEL = "hermes"
"""``server_label`` of the agent's own tools."""


def list_tools_item(
    item_id: str, label: str, tools: list[McpListToolsTool], error: str | None = None
) -> McpListTools:
    """``mcp_list_tools``: the tools server ``label`` offers (each ``name``,
    ``description``, ``input_schema``, ``annotations``), or its ``error``."""
    return {
        "type": "mcp_list_tools",
        "id": item_id,
        "server_label": label,
        "tools": tools,
        "error": error,
    }


def arguments_json(arguments: Mapping[str, Any] | str) -> str:
    """A call's arguments as the JSON text the items carry."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(dict(arguments), ensure_ascii=False, separators=(",", ":"))


def approval_request_item(
    approval_id: str, name: str, arguments: Mapping[str, Any] | str, *, server_label: str
) -> McpApprovalRequest:
    """``mcp_approval_request``: ``name`` waits for a person's yes; its
    ``id`` is what the answer names."""
    return {
        "type": "mcp_approval_request",
        "id": approval_id,
        "server_label": server_label,
        "name": name,
        "arguments": arguments_json(arguments),
    }


def approval_response_item(
    item_id: str, approval_request_id: str, approve: bool, reason: str | None
) -> McpApprovalResponse:
    """``mcp_approval_response`` as an input item lists it."""
    return {
        "type": "mcp_approval_response",
        "id": item_id,
        "approval_request_id": approval_request_id,
        "approve": approve,
        "reason": reason,
        # The spec's schema requires a `request_id` it never defines (a slip
        # in it); the same id satisfies it, and the SDK ignores it.
        "request_id": approval_request_id,
    }


def mcp_call_item(
    item_id: str,
    name: str,
    arguments: Mapping[str, Any] | str,
    *,
    server_label: str,
    status: McpToolCallStatus,
    output: str | None = None,
    failed: bool = False,
    approval_request_id: str | None = None,
) -> McpToolCall:
    """``mcp_call``: a tool call that ran (``status`` ``in_progress`` while
    it runs); a ``failed`` one carries its output as the error too."""
    return {
        "type": "mcp_call",
        "id": item_id,
        "server_label": server_label,
        "name": name,
        "arguments": arguments_json(arguments),
        "output": output,
        "error": (
            {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": output}]}
            if failed and output is not None
            else None
        ),
        "status": status,
        "approval_request_id": approval_request_id,
    }
