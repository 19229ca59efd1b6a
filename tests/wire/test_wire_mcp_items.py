"""The Responses API's approval items (``wire/mcp_items.py``) and how the
builder streams them: a call held for approval, and an approved call that
runs. Every object is checked against the SDK's models, its stream
accumulator and OpenAI's published OpenAPI schemas."""

from __future__ import annotations

import json

from openai.types.responses import Response

from hermes_trio.events import (
    ApprovalRequested,
    MessageChunk,
    MessageStop,
    ToolCallChunk,
    ToolCallFinished,
    TurnFinished,
    Usage,
)
from hermes_trio.wire.mcp_items import (
    approval_request_item,
    approval_response_item,
    mcp_call_item,
)
from tests.openai_spec import assert_valid
from tests.wire.test_wire_responses_out import check_stream, run, sdk_replay, types

ASKED = ApprovalRequested(
    id="mcpr_1",
    tool_name="terminal",
    arguments={"command": "rm -rf build"},
    command="rm -rf build",
    reason="recursive delete",
    deadline=10.0,
    timeout=300.0,
    index=0,
    call_id="call_1",
)


def check_spec(b_snapshot: dict[str, object], payloads: list[dict[str, object]]) -> None:
    assert_valid(b_snapshot, "Response")
    for payload in payloads:
        assert_valid(payload, "ResponseStreamEvent")


def test_items_match_the_spec() -> None:
    request = approval_request_item("mcpr_1", "terminal", {"command": "ls"}, server_label="x")
    assert request == {
        "type": "mcp_approval_request",
        "id": "mcpr_1",
        "server_label": "x",
        "name": "terminal",
        "arguments": '{"command":"ls"}',
    }
    assert_valid(request, "MCPApprovalRequest")
    answer = approval_response_item("mcpa_1", "mcpr_1", False, "not now")
    assert_valid(answer, "MCPApprovalResponseResource")
    for status, failed in (("in_progress", False), ("completed", False), ("failed", True)):
        call = mcp_call_item(
            "mcp_1",
            "terminal",
            "{}",
            server_label="hermes",
            status=status,
            output=None if status == "in_progress" else "out",
            failed=failed,
            approval_request_id="mcpr_1",
        )
        assert_valid(call, "MCPToolCall")


def test_a_held_call_ends_the_response_with_one_approval_request_item() -> None:
    b, out = run(
        [
            ToolCallChunk("terminal", "rm -rf build", {"command": "rm -rf build"}, 0, "call_1"),
            ASKED,
            TurnFinished("", Usage(), "approval"),
        ]
    )
    data = check_stream(b, out)
    check_spec(b.snapshot(), data)
    assert types(out)[2:] == [
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    snapshot = b.snapshot()
    assert snapshot["status"] == "completed"
    assert snapshot["output"] == [
        {
            "type": "mcp_approval_request",
            "id": "mcpr_1",
            "server_label": "hermes",
            "name": "terminal",
            "arguments": json.dumps({"command": "rm -rf build"}, separators=(",", ":")),
        }
    ]
    assert b.approval_requests == [ASKED]
    final = sdk_replay(out)
    assert final.output[0].type == "mcp_approval_request"
    assert final.output[0].id == "mcpr_1"


def test_an_approved_call_is_an_mcp_call_item_with_its_output() -> None:
    b, out = run(
        [
            ToolCallChunk("terminal", "rm -rf build", {"command": "rm -rf build"}, 0, "call_1"),
            ToolCallFinished("terminal", 0.1, True, 0, "call_1", "removed"),
            ToolCallChunk("terminal", "false", {"command": "false"}, 1, "call_2"),
            ToolCallFinished("terminal", 0.1, False, 1, "call_2", "exit 1"),
            MessageChunk("Done."),
            MessageStop(final=True),
            TurnFinished("Done.", Usage(), "stop"),
        ],
        approved_calls={"call_1": "mcpr_1", "call_2": "mcpr_2"},
    )
    data = check_stream(b, out)
    check_spec(b.snapshot(), data)
    assert types(out)[2:6] == [
        "response.output_item.added",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.output_item.done",
    ]
    assert "response.mcp_call.failed" in types(out)
    first, second, message = b.snapshot()["output"]
    assert first["type"] == "mcp_call"
    assert first["status"] == "completed"
    assert first["output"] == "removed"
    assert first["error"] is None
    assert first["approval_request_id"] == "mcpr_1"
    assert second["status"] == "failed"
    assert second["error"]["type"] == "mcp_tool_execution_error"
    assert message["type"] == "message"
    Response.model_validate(b.snapshot())
    final = sdk_replay(out)
    assert [item.type for item in final.output] == ["mcp_call", "mcp_call", "message"]


def test_a_turn_stopped_while_an_approved_call_runs_ends_it_incomplete() -> None:
    b, out = run(
        [ToolCallChunk("terminal", "sleep 9", {"command": "sleep 9"}, 0, "call_1")],
        approved_calls={"call_1": "mcpr_1"},
    )
    out += b.interrupt()
    check_stream(b, out)
    # (An interrupted response's null incomplete reason is the builder's
    # documented choice; the item is what this test is about.)
    item = b.snapshot()["output"][0]
    assert item["status"] == "incomplete"
    assert_valid(item, "MCPToolCall")


def test_a_tool_of_an_mcp_server_carries_its_label() -> None:
    asked = ApprovalRequested("mcpr_2", "search", {"q": "x"}, "search x", "", 1.0, 60.0, 0, "c")
    b, _ = run([asked, TurnFinished("", Usage(), "approval")], server_labels={"search": "docs"})
    (item,) = b.snapshot()["output"]
    assert item["server_label"] == "docs"
