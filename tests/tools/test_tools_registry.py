"""ToolRegistry: lookup, schemas, argument checking and error containment."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from hermes_trio.tools import (
    BUILTIN_TOOLS,
    ToolContext,
    ToolRegistry,
    ToolResult,
    default_registry,
)


class EchoTool:
    name = "echo"
    description = "Echo text."
    parameters: dict[str, Any] = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "times": {"type": "integer"},
            "scale": {"type": "number"},
            "mode": {"type": "string", "enum": ["plain", "loud"]},
        },
        "required": ["text"],
    }

    def preview(self, args: dict[str, Any]) -> str:
        return f"echo {args.get('text', '')}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await trio.lowlevel.checkpoint()
        return ToolResult(True, args["text"] * args.get("times", 1))


class BoomTool:
    name = "boom"
    description = "Always fails."
    parameters: dict[str, Any] = {"type": "object", "properties": {}}  # noqa: RUF012

    def preview(self, args: dict[str, Any]) -> str:
        raise KeyError("preview is broken too")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise ValueError("bad things")


class GroupBoomTool(BoomTool):
    name = "group_boom"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        async def fail() -> None:
            raise ValueError("inside a nursery")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fail)
        raise AssertionError("unreachable")


class HangTool(BoomTool):
    """Blocks until cancelled, in a nursery so Cancelled arrives in a group."""

    name = "hang"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            nursery.start_soon(trio.sleep_forever)
        return ToolResult(True, "not reached")


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry([EchoTool(), BoomTool(), GroupBoomTool(), HangTool()])


async def test_runs_a_tool(registry: ToolRegistry) -> None:
    result = await registry.execute("echo", '{"text": "ab", "times": 2}', ToolContext())
    assert result == ToolResult(True, "abab")


async def test_unknown_tool(registry: ToolRegistry) -> None:
    result = await registry.execute("nope", "{}", ToolContext())
    assert result == ToolResult(
        False, "error: unknown tool 'nope'; available tools: echo, boom, group_boom, hang"
    )


async def test_invalid_json(registry: ToolRegistry) -> None:
    raw = '{"text": "unterminated'
    result = await registry.execute("echo", raw, ToolContext())
    assert not result.ok
    assert result.content.startswith("error: arguments for tool 'echo' are not valid JSON: ")
    assert result.content.endswith(f"; got: {raw}")


async def test_invalid_json_echo_is_capped(registry: ToolRegistry) -> None:
    raw = "{" + "x" * 1000
    result = await registry.execute("echo", raw, ToolContext())
    assert result.content.endswith("; got: " + raw[:200])


@pytest.mark.parametrize("raw", ["[1, 2]", '"text"', "3", "null"])
async def test_non_object_arguments(registry: ToolRegistry, raw: str) -> None:
    result = await registry.execute("echo", raw, ToolContext())
    assert not result.ok
    assert "not valid JSON: expected a JSON object" in result.content


@pytest.mark.parametrize("raw", ["{}", "", "  "])
async def test_missing_required_parameter(registry: ToolRegistry, raw: str) -> None:
    result = await registry.execute("echo", raw, ToolContext())
    assert result == ToolResult(False, "error: tool 'echo' is missing required parameter(s) 'text'")


@pytest.mark.parametrize(
    ("raw", "param", "expected"),
    [
        ('{"text": 5}', "text", "string"),
        ('{"text": "a", "times": true}', "times", "integer"),
        ('{"text": "a", "times": 1.5}', "times", "integer"),
        ('{"text": "a", "times": "2"}', "times", "integer"),
        ('{"text": "a", "scale": false}', "scale", "number"),
        ('{"text": "a", "mode": "quiet"}', "mode", "one of"),
    ],
)
async def test_wrong_types_name_the_parameter(
    registry: ToolRegistry, raw: str, param: str, expected: str
) -> None:
    result = await registry.execute("echo", raw, ToolContext())
    assert not result.ok
    assert f"parameter '{param}' of tool 'echo' must be" in result.content
    assert expected in result.content


async def test_numbers_accept_integers_and_extra_params_are_tolerated(
    registry: ToolRegistry,
) -> None:
    raw = '{"text": "a", "scale": 2, "extra": [1]}'
    assert await registry.execute("echo", raw, ToolContext()) == ToolResult(True, "a")


async def test_tool_exception_becomes_error_result(registry: ToolRegistry) -> None:
    result = await registry.execute("boom", "{}", ToolContext())
    assert result == ToolResult(False, "error: boom failed: ValueError: bad things")


async def test_exception_group_becomes_error_result(registry: ToolRegistry) -> None:
    result = await registry.execute("group_boom", "{}", ToolContext())
    assert not result.ok
    assert result.content.startswith("error: group_boom failed: ExceptionGroup: ")


async def test_cancelled_propagates(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    returned: list[ToolResult] = []
    with trio.move_on_after(10) as scope:
        returned.append(await registry.execute("hang", "{}", ToolContext()))
    assert scope.cancelled_caught
    assert returned == []


def test_schemas_use_the_chat_completions_format(registry: ToolRegistry) -> None:
    schemas = registry.schemas()
    assert [s["function"]["name"] for s in schemas] == ["echo", "boom", "group_boom", "hang"]
    assert schemas[0] == {
        "type": "function",
        "function": {
            "name": "echo",
            "description": "Echo text.",
            "parameters": EchoTool.parameters,
        },
    }
    # Built once and shared between requests, but never the tool's own dict.
    assert schemas[0]["function"]["parameters"] is not EchoTool.parameters
    assert registry.schemas() == schemas


class _Renamed(EchoTool):
    name = "echo_again"


def test_schemas_follow_a_newly_registered_tool(registry: ToolRegistry) -> None:
    before = registry.schemas()
    registry.register(_Renamed())
    after = registry.schemas()
    assert [s["function"]["name"] for s in after] == [
        *(s["function"]["name"] for s in before),
        "echo_again",
    ]


def test_lookup(registry: ToolRegistry) -> None:
    assert registry.names() == ["echo", "boom", "group_boom", "hang"]
    echo = registry.get("echo")
    assert echo is not None
    assert echo.name == "echo"
    assert registry.get("missing") is None


def test_duplicate_names_are_rejected(registry: ToolRegistry) -> None:
    with pytest.raises(ValueError, match="'echo' is already registered"):
        registry.register(EchoTool())


def test_preview(registry: ToolRegistry) -> None:
    assert registry.preview("echo", '{"text": "hi"}') == ({"text": "hi"}, "echo hi")
    args, text = registry.preview("echo", '{"text": "' + "y" * 200 + '"}')
    assert len(text) == 80
    assert args == {"text": "y" * 200}


def test_preview_is_lenient(registry: ToolRegistry) -> None:
    raw = '{"text": "no end' + "z" * 100
    assert registry.preview("echo", raw) == ({}, raw[:79] + "…")
    assert registry.preview("echo", "") == ({}, "echo")
    assert registry.preview("unknown", '{"a": 1}') == ({"a": 1}, '{"a": 1}')
    # A preview hook that raises falls back to the raw arguments.
    assert registry.preview("boom", '{"b": 2}') == ({"b": 2}, '{"b": 2}')


def test_default_registry_has_the_builtins() -> None:
    registry = default_registry()
    assert tuple(registry.names()) == BUILTIN_TOOLS == ("terminal", "read_file", "write_file")
    for schema in registry.schemas():
        assert schema["function"]["parameters"]["type"] == "object"
        assert schema["function"]["description"]


def test_default_registry_subset() -> None:
    assert default_registry(["write_file", "terminal"]).names() == ["terminal", "write_file"]
    assert default_registry([]).names() == []
    assert default_registry("read_file").names() == ["read_file"]


def test_default_registry_unknown_name() -> None:
    with pytest.raises(ValueError, match=r"unknown tool\(s\) 'browser'.*available: terminal"):
        default_registry(["terminal", "browser"])
