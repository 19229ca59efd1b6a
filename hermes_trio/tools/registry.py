"""Name → tool lookup, argument checking and error containment.

The model produces tool calls as a name plus a JSON string; everything that
can go wrong with that (unknown name, broken JSON, missing or mistyped
parameters, a tool that raises) comes back as an ``ok=False`` result the model
can read and correct, so one bad call never ends the turn.  Cancellation is
the exception: ``trio.Cancelled`` always propagates.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable
from typing import Any

from hermes_trio.tools.base import Tool, ToolContext, ToolResult, one_line
from hermes_trio.tools.files import ReadFileTool, WriteFileTool
from hermes_trio.tools.terminal import TerminalTool
from hermes_trio.wire.messages import ChatTool

__all__ = ["BUILTIN_TOOLS", "ToolRegistry", "default_registry", "validate_args"]

BUILTIN_TOOLS: tuple[str, ...] = ("terminal", "read_file", "write_file")

_ECHO_MAX = 200

# JSON-schema "type" → check.  bool is an int subclass in Python, and JSON
# true must not pass as a number.
_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def validate_args(tool_name: str, schema: dict[str, Any], args: dict[str, Any]) -> str | None:
    """An error message naming the offending parameter, or None if ``args`` fit.

    Only the top level is checked (required names, basic types, enums): that is
    what models get wrong in practice, and tools check their own semantics.
    Unknown extra parameters are tolerated because models sometimes add them.
    """
    properties: dict[str, Any] = schema.get("properties", {})
    missing = [name for name in schema.get("required", ()) if name not in args]
    if missing:
        names = ", ".join(repr(name) for name in missing)
        return f"error: tool '{tool_name}' is missing required parameter(s) {names}"
    for name, value in args.items():
        prop = properties.get(name)
        if not isinstance(prop, dict):
            continue
        expected = prop.get("type")
        if expected is not None:
            types = [expected] if isinstance(expected, str) else list(expected)
            checks = [_TYPE_CHECKS[t] for t in types if t in _TYPE_CHECKS]
            if checks and not any(check(value) for check in checks):
                return (
                    f"error: parameter '{name}' of tool '{tool_name}' must be "
                    f"{' or '.join(types)}, got {_json_type(value)}"
                )
        if "enum" in prop and value not in prop["enum"]:
            allowed = ", ".join(json.dumps(v) for v in prop["enum"])
            return (
                f"error: parameter '{name}' of tool '{tool_name}' must be one of "
                f"{allowed}, got {json.dumps(value)[:_ECHO_MAX]}"
            )
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _parse_args(raw_args: str) -> dict[str, Any]:
    """Parse a tool call's argument string; raises ValueError with a readable detail."""
    # Models send "" (not "{}") for calls without arguments.
    if not raw_args.strip():
        return {}
    try:
        value = json.loads(raw_args)
    except json.JSONDecodeError as exc:
        raise ValueError(str(exc)) from None
    except RecursionError:
        # A model can nest arrays deeper than the parser recurses.
        raise ValueError("nested too deep") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {_json_type(value)}")
    return value


class ToolRegistry:
    """The tools one agent may call, in registration order."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._own: dict[str, Tool] = {}
        # Tools that come and go together (an MCP server's), by group name.
        self._groups: dict[str, dict[str, Tool]] = {}
        self._tools: dict[str, Tool] = {}
        self._resolvers: list[Callable[[str], Tool | None]] = []
        self._schemas: list[ChatTool] | None = None
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._own[tool.name] = tool
        self._rebuild()

    def set_group(self, group: str, tools: Iterable[Tool]) -> None:
        """Make ``tools`` the whole of ``group`` (empty: remove it). A name
        another tool already has is skipped: the first one keeps it."""
        taken = set(self._own).union(
            *(names for other, names in self._groups.items() if other != group)
        )
        self._groups[group] = {t.name: t for t in tools if t.name not in taken}
        self._rebuild()

    def add_resolver(self, resolve: Callable[[str], Tool | None]) -> None:
        """Asked for a name no tool has, before the call is an unknown-tool
        error: it may answer with a tool (one that explains, say, that its
        server is down)."""
        self._resolvers.append(resolve)

    def _rebuild(self) -> None:
        tools = dict(self._own)
        for group in self._groups.values():
            tools.update(group)
        self._tools = tools
        self._schemas = None

    def get(self, name: str) -> Tool | None:
        tool = self._tools.get(name)
        if tool is None:
            for resolve in self._resolvers:
                tool = resolve(name)
                if tool is not None:
                    break
        return tool

    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def schemas(self) -> list[ChatTool]:
        """Tool definitions in the OpenAI Chat Completions ``tools`` format.

        Built once (every model request sends them) and shared: read them,
        do not change them in place.
        """
        if self._schemas is None:
            self._schemas = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": copy.deepcopy(tool.parameters),
                    },
                }
                for tool in self._tools.values()
            ]
        return list(self._schemas)

    def preview(self, name: str, raw_args: str) -> tuple[dict[str, Any], str]:
        """Arguments and a one-line preview for display; never raises."""
        try:
            args = _parse_args(raw_args)
        except ValueError:
            return {}, one_line(raw_args)
        tool = self.get(name)
        if tool is None:
            return args, one_line(raw_args)
        try:
            text = tool.preview(args)
        except Exception:
            # Display must not fail because a preview hook choked on odd args.
            text = raw_args
        return args, one_line(text)

    async def execute(self, name: str, raw_args: str, ctx: ToolContext) -> ToolResult:
        tool = self.get(name)
        if tool is None:
            available = ", ".join(self._tools) or "(none)"
            return ToolResult(False, f"error: unknown tool {name!r}; available tools: {available}")
        try:
            args = _parse_args(raw_args)
        except ValueError as exc:
            return ToolResult(
                False,
                f"error: arguments for tool {name!r} are not valid JSON: {exc}; "
                f"got: {raw_args[:_ECHO_MAX]}",
            )
        problem = validate_args(name, tool.parameters, args)
        if problem is not None:
            return ToolResult(False, problem)
        try:
            return await tool.run(args, ctx)
        except Exception as exc:
            # Only Exception: trio.Cancelled, KeyboardInterrupt and exception
            # groups containing them are BaseExceptions and propagate.
            return ToolResult(False, f"error: {name} failed: {type(exc).__name__}: {exc}")


_BUILTIN_FACTORIES: dict[str, Callable[[], Tool]] = {
    "terminal": TerminalTool,
    "read_file": ReadFileTool,
    "write_file": WriteFileTool,
}


def default_registry(enabled: Iterable[str] | None = None) -> ToolRegistry:
    """A registry with the built-in tools; ``enabled`` picks a subset by name."""
    if isinstance(enabled, str):
        # A bare string would otherwise be taken as a set of one-letter names.
        enabled = [enabled]
    if enabled is None:
        wanted = set(BUILTIN_TOOLS)
    else:
        wanted = set(enabled)
        unknown = sorted(wanted - set(BUILTIN_TOOLS))
        if unknown:
            raise ValueError(
                f"unknown tool(s) {', '.join(map(repr, unknown))}; "
                f"available: {', '.join(BUILTIN_TOOLS)}"
            )
    return ToolRegistry(_BUILTIN_FACTORIES[name]() for name in BUILTIN_TOOLS if name in wanted)
