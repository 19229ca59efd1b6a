"""A Responses request's ``{"type": "mcp"}`` tools, validated (pure).

OpenAI's request-level MCP tool names a remote server by URL. The server
only ever reaches URLs under one of ``api_server.mcp_allowed_urls`` (none
by default) — the same scheme, host and port, a path under the entry's,
parsed and compared by :mod:`hermes_trio.url_allowlist` — so no request
can make it call an address the operator did not allow; the URL it
connects to is the text that check wrote. ``connector_id`` (OpenAI's
hosted connectors) is refused. The ``headers``, and credentials in the
URL's query, are that request's secrets: redacted in what the request
writes (not in anyone else's lines), never echoed or stored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ...redaction import Secrets, register_request_secret, register_request_url
from ...url_allowlist import UrlPrefix, UrlRefused, check_url, parse_prefix
from ...wire.responses_types import McpToolEcho, McpToolFilter, McpToolNames
from ..parsing.validation import a_bool, a_string, bad

__all__ = ["McpRequestTool", "parse_mcp_tool"]

_LABEL = re.compile(r"[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*")
_KEYS = {
    "type",
    "server_label",
    "server_url",
    "headers",
    "allowed_tools",
    "require_approval",
    "server_description",
    "connector_id",
    "authorization",
}


@dataclass(frozen=True)
class McpRequestTool:
    """One ``mcp`` tool of a request."""

    label: str
    url: str
    """The URL as checked against the allow-list: the one connected to."""
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    allowed: tuple[str, ...] | None = None
    read_only_only: bool = False
    """``allowed_tools: {"read_only": true}``: only tools annotated read-only."""
    approval: Literal["always", "never"] = "always"
    """The policy for tools not named below."""
    always: frozenset[str] = frozenset()
    never: frozenset[str] = frozenset()

    def needs_approval(self, tool: str) -> bool:
        if tool in self.never:
            return False
        if tool in self.always:
            return True
        return self.approval == "always"

    def echo(self) -> McpToolEcho:
        """The tool as the response object repeats it: never its headers."""
        names = list(self.allowed) if self.allowed is not None else None
        allowed: list[str] | McpToolFilter | None = names
        if self.read_only_only:
            allowed = {"read_only": True}
            if names:
                allowed["tool_names"] = names
        approval: Literal["always", "never"] | dict[str, McpToolNames] = self.approval
        if self.always or self.never:
            approval = {
                key: {"tool_names": sorted(names)}
                for key, names in (("always", self.always), ("never", self.never))
                if names
            }
        return {
            "type": "mcp",
            "server_label": self.label,
            "server_url": _echoed_url(self.url),
            "allowed_tools": allowed,
            "require_approval": approval,
        }


def parse_mcp_tool(tool: dict[str, Any], where: str, allowed_urls: Sequence[str]) -> McpRequestTool:
    """``tools[N]`` of type ``mcp``; a 400 naming the field otherwise."""
    unknown = sorted(set(tool) - _KEYS)
    if unknown:
        raise bad(f"'{where}.{unknown[0]}' is not supported", f"{where}.{unknown[0]}")
    for key in ("connector_id", "authorization"):
        if tool.get(key) is not None:
            raise bad(
                f"'{where}.{key}' is not supported: name the server by 'server_url' "
                "(OpenAI's hosted connectors are not available here)",
                f"{where}.{key}",
            )
    label = tool.get("server_label")
    if not isinstance(label, str) or not _LABEL.fullmatch(label) or len(label) > 32:
        raise bad(
            f"'{where}.server_label' must be letters, digits, '-' and single '_' (at most 32)",
            f"{where}.server_label",
        )
    url = _checked_url(tool.get("server_url"), f"{where}.server_url", allowed_urls)
    # Credentials in the URL (a key in its query) are masked like the headers.
    register_request_url(url)
    if tool.get("server_description") is not None:
        a_string(tool["server_description"], f"{where}.server_description")
    headers = _headers(tool.get("headers"), f"{where}.headers")
    allowed, read_only = _allowed(tool.get("allowed_tools"), f"{where}.allowed_tools")
    approval, always, never = _approval(tool.get("require_approval"), f"{where}.require_approval")
    return McpRequestTool(label, url, headers, allowed, read_only, approval, always, never)


def _headers(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise bad(f"'{where}' must be an object of strings", where)
    for secret in value.values():
        register_request_secret(secret)
    return dict(value)


def _checked_url(url: Any, where: str, allowed_urls: Sequence[str]) -> str:
    if not isinstance(url, str):
        raise bad(f"'{where}' must be an http:// or https:// URL", where)
    prefixes = _prefixes(allowed_urls)
    if not prefixes:
        raise bad(
            f"'{where}' is not allowed on this server: it must be under one of "
            "api_server.mcp_allowed_urls (none are configured)",
            where,
        )
    try:
        return check_url(url, prefixes).url
    except UrlRefused as why:
        raise bad(
            f"'{where}' is not allowed on this server: {why} (allowed: the scheme, host and "
            "port of an api_server.mcp_allowed_urls entry, and a path under its path)",
            where,
        ) from None


def _prefixes(allowed_urls: Sequence[str]) -> list[UrlPrefix]:
    """The entries as prefixes; one that does not parse admits nothing (the
    config check refuses those, so only a library user's own settings can
    have one)."""
    prefixes: list[UrlPrefix] = []
    for entry in allowed_urls:
        try:
            prefixes.append(parse_prefix(entry))
        except UrlRefused:
            continue
    return prefixes


def _echoed_url(url: str) -> str:
    """``url`` as the response repeats it: a credential in its query redacted."""
    mask = Secrets()
    mask.add_url(url)
    return mask.redact(url)


def _names(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise bad(f"'{where}' must be a list of tool names", where)
    return tuple(value)


def _filter(value: Any, where: str) -> tuple[tuple[str, ...] | None, bool]:
    if not isinstance(value, dict) or set(value) - {"tool_names", "read_only"}:
        raise bad(f"'{where}' must be an object with 'tool_names' and/or 'read_only'", where)
    names = _names(value["tool_names"], f"{where}.tool_names") if "tool_names" in value else None
    read_only = value.get("read_only", False)
    a_bool(read_only, f"{where}.read_only")
    return names, bool(read_only)


def _allowed(value: Any, where: str) -> tuple[tuple[str, ...] | None, bool]:
    if value is None:
        return None, False
    if isinstance(value, list):
        return _names(value, where), False
    return _filter(value, where)


def _approval(
    value: Any, where: str
) -> tuple[Literal["always", "never"], frozenset[str], frozenset[str]]:
    if value is None or value == "always":
        return "always", frozenset(), frozenset()
    if value == "never":
        return "never", frozenset(), frozenset()
    if not isinstance(value, dict) or set(value) - {"always", "never"}:
        raise bad(f"'{where}' must be 'always', 'never' or an object of tool filters", where)
    lists: dict[str, frozenset[str]] = {}
    for key in ("always", "never"):
        names, read_only = _filter(value[key], f"{where}.{key}") if key in value else (None, False)
        if read_only:
            raise bad(f"'{where}.{key}.read_only' is not supported; name the tools", where)
        lists[key] = frozenset(names or ())
    # Tools no filter names ask first, as OpenAI's default does.
    return "always", lists["always"], lists["never"]
