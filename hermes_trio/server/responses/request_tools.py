"""A Responses turn's own tool registry, and which MCP servers a
conversation has listed already: what every request needs, without the MCP
SDK (:mod:`.mcp_run` connects a request's servers, for a request that has
an ``mcp`` tool)."""

from __future__ import annotations

from collections.abc import Sequence, Set

from ...tools.registry import ToolRegistry
from ...wire.responses_types import OutputItem

__all__ = ["listed_labels", "turn_registry"]


def turn_registry(base: ToolRegistry) -> ToolRegistry:
    """A registry of one turn's own: ``base``'s tools, to which the
    request's servers' tools are added."""
    registry = ToolRegistry()
    registry.set_group("agent", [t for n in base.names() if (t := base.get(n)) is not None])
    registry.add_resolver(base.get)
    return registry


def listed_labels(outputs: Sequence[Sequence[OutputItem]]) -> Set[str]:
    """The server labels an ``mcp_list_tools`` item of these outputs names."""
    return {
        item["server_label"]
        for output in outputs
        for item in output
        if isinstance(item, dict) and item["type"] == "mcp_list_tools" and not item.get("error")
    }
