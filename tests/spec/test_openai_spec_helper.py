"""The spec checker itself: it accepts the spec's own example shapes and refuses broken ones."""

from __future__ import annotations

import pytest
from openai_spec import assert_valid, spec_errors


def test_an_approval_request_item_in_the_specs_shape_is_valid() -> None:
    item = {
        "type": "mcp_approval_request",
        "id": "mcpr_1",
        "server_label": "hermes",
        "name": "terminal",
        "arguments": '{"command": "rm -rf build"}',
    }
    assert_valid(item, "MCPApprovalRequest")
    broken = {**item}
    del broken["server_label"]
    assert any("server_label" in e for e in spec_errors(broken, "MCPApprovalRequest"))


def test_a_nullable_field_accepts_null_and_its_type_only() -> None:
    error = {
        "error": {"message": "x", "type": "invalid_request_error", "param": None, "code": None}
    }
    assert_valid(error, "ErrorResponse")
    assert spec_errors(
        {"error": {"message": 5, "type": "t", "param": None, "code": None}}, "ErrorResponse"
    )


def test_an_unknown_schema_name_is_named() -> None:
    with pytest.raises(KeyError, match="NoSuchThing"):
        spec_errors({}, "NoSuchThing")
