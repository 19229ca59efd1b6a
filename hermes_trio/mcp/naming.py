"""What the model sees of an MCP server's tools, and which of them ask first.

Pure decisions, no I/O: the name rule (``<label>__<tool>``), the allow and
exclude lists, the approval policy, the schema a tool reaches the model
with, and the text a tool's result reads as (or why it does not).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

__all__ = [
    "SEPARATOR",
    "TOO_LARGE",
    "input_schema",
    "model_name",
    "needs_approval",
    "result_text",
    "split_name",
    "too_large",
    "wanted",
]

SEPARATOR = "__"
# OpenAI's function names: ^[a-zA-Z0-9_-]{1,64}$.
_NAME_MAX = 64
_BAD = re.compile(r"[^A-Za-z0-9_-]")


def model_name(label: str, tool: str) -> str:
    """The name the model calls ``tool`` of server ``label`` by: characters a
    function name cannot hold become ``_``, and it is cut to 64."""
    return (label + SEPARATOR + _BAD.sub("_", tool))[:_NAME_MAX]


def split_name(name: str) -> tuple[str, str] | None:
    """``(label, rest)`` of a name made by :func:`model_name`; None if it is not one."""
    label, sep, rest = name.partition(SEPARATOR)
    if not sep or not label or not rest:
        return None
    return label, rest


def wanted(tool: str, allow: Sequence[str] | None, exclude: Iterable[str]) -> bool:
    """Whether the tool named ``tool`` (the server's name) is offered."""
    if allow is not None and tool not in allow:
        return False
    return tool not in set(exclude)


def needs_approval(policy: Literal["always", "never", "auto"], read_only: bool | None) -> bool:
    """Whether a call asks first: ``auto`` trusts only a ``readOnlyHint: true``."""
    if policy == "always":
        return True
    if policy == "never":
        return False
    return read_only is not True


def input_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """A tool's ``inputSchema`` as a function's parameters: always an object."""
    out = dict(schema or {})
    if out.get("type") != "object":
        out = {"type": "object", "properties": {}}
    out.setdefault("properties", {})
    return out


TOO_LARGE = "the tool's result was "
"""How :func:`too_large` begins, to find it inside the SDK's error text."""


def too_large(size: int | None, limit: int) -> str:
    """What a call answers when its result passed ``max_result_bytes``
    (``size`` None: it was not read to its end, so nobody knows it)."""
    said = f"{size} bytes" if size is not None else f"more than {limit} bytes"
    return (
        f"{TOO_LARGE}{said}, over the limit of {limit} bytes "
        "(max_result_bytes of the MCP server); it was not passed on"
    )


def result_text(blocks: Sequence[Mapping[str, Any]], structured: Any = None) -> str:
    """The text of a tool result's content blocks, one per line; blocks
    that are not text are described, and structured content stands in
    when there is no text at all."""
    parts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "resource":
            resource = block.get("resource") or {}
            parts.append(str(resource.get("text") or f"[resource {resource.get('uri', '')}]"))
        elif kind == "resource_link":
            parts.append(f"[resource link {block.get('uri', '')}]")
        else:
            parts.append(f"[{kind} content, {block.get('mimeType', 'unknown type')}]")
    if not parts and structured is not None:
        return json.dumps(structured, ensure_ascii=False)
    return "\n".join(parts)
