"""The builder's items for a request's MCP tools (the Responses ``mcp``
tool): ``mcp_list_tools`` (listed, or failed with its error) and
``mcp_call`` (completed, failed, or cut off by the turn's end), each
checked against the SDK's models, its stream accumulator and OpenAI's
schemas."""

from __future__ import annotations

from hermes_trio.events import MessageStop, ToolCallChunk, ToolCallFinished, TurnFinished, Usage
from tests.openai_spec import assert_valid
from tests.wire.test_wire_responses_out import builder, check_stream, sdk_replay, types

MCP = {"docs__search": ("docs", "search")}
# An mcp_call's events, in OpenAI's order.
MCP_CALL_EVENTS = [
    "response.output_item.added",
    "response.mcp_call.in_progress",
    "response.mcp_call_arguments.delta",
    "response.mcp_call_arguments.done",
    "response.mcp_call.completed",
    "response.output_item.done",
]
LISTED = [{"name": "search", "description": "Search.", "input_schema": {"type": "object"}}]


def call(ok: bool, result: str) -> list[object]:
    return [
        MessageStop(False),
        ToolCallChunk("docs__search", "search", {"q": "trio"}, 0, "call_1"),
        ToolCallFinished("docs__search", 0.1, ok, 0, "call_1", result),
    ]


def test_listing_then_a_call_in_openais_order() -> None:
    b = builder(mcp_tools=MCP)
    out = b.start() + b.mcp_list_tools("docs", LISTED)
    out += b.feed_all([*call(True, "found it"), TurnFinished("Done.", Usage(), "stop")])
    check_stream(b, out)
    assert types(out)[2:12] == [
        "response.output_item.added",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.output_item.done",
        *MCP_CALL_EVENTS,
    ]
    for event in out:
        assert_valid(event.payload(), "ResponseStreamEvent")
    listing, item, message = b.snapshot()["output"]
    assert_valid(listing, "MCPListTools")
    assert_valid(item, "MCPToolCall")
    assert item["name"] == "search" and item["server_label"] == "docs"
    assert item["arguments"] == '{"q":"trio"}' and item["output"] == "found it"
    assert message["type"] == "message"
    assert_valid(b.snapshot(), "Response")
    assert sdk_replay(out).output[1].type == "mcp_call"


def test_a_failed_listing_and_a_failed_call() -> None:
    b = builder(mcp_tools=MCP)
    out = b.start() + b.mcp_list_tools("docs", None, "could not list tools: refused")
    out += b.feed_all([*call(False, "error: boom"), TurnFinished("Sorry.", Usage(), "stop")])
    check_stream(b, out)
    assert "response.mcp_list_tools.failed" in types(out)
    assert "response.mcp_call.failed" in types(out)
    listing, item, _ = b.snapshot()["output"]
    assert listing["error"] == "could not list tools: refused"
    assert item["status"] == "failed" and item["error"]["type"] == "mcp_tool_execution_error"
    assert_valid(listing, "MCPListTools")
    assert_valid(item, "MCPToolCall")


def test_a_call_the_turn_stopped_in_ends_incomplete() -> None:
    b = builder(mcp_tools=MCP)
    out = b.start() + b.feed_all(call(True, "")[:2])
    out += b.interrupt()
    (item,) = b.snapshot()["output"]
    assert item["status"] == "incomplete"
    assert_valid(item, "MCPToolCall")
    assert types(out)[-2:] == ["response.output_item.done", "response.incomplete"]


def test_a_held_tool_has_no_call_item_until_it_runs() -> None:
    b = builder(mcp_tools=MCP)
    b.mcp_held.add("docs__search")
    b.start()
    b.feed_all(call(True, "x")[:2])
    assert b.snapshot()["output"] == []
