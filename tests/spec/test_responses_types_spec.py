"""The Responses API TypedDicts (``wire/responses_types.py``) agree with
OpenAI's OpenAPI schemas they are written after: every field they declare
is one the schema has, every field the schema requires is declared, and the
``type`` they name is the schema's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

import pytest

from hermes_trio.wire import responses_types as t

_SCHEMAS: dict[str, Any] = json.loads((Path(__file__).parent / "openai_schemas.json").read_text())[
    "schemas"
]

# TypedDict -> the spec schemas it stands for (a class may stand for several
# events of one shape).
PAIRS: list[tuple[type, tuple[str, ...]]] = [
    (t.OutputText, ("OutputTextContent",)),
    (t.RefusalContent, ("RefusalContent",)),
    (t.ReasoningTextContent, ("ReasoningTextContent",)),
    (t.SummaryTextContent, ("SummaryTextContent",)),
    (t.InputTextContent, ("InputTextContent",)),
    (t.InputImageContent, ("InputImageContent",)),
    (t.InputFileContent, ("InputFileContent",)),
    (t.OutputMessage, ("OutputMessage",)),
    (t.FunctionToolCall, ("FunctionToolCall",)),
    (t.FunctionCallOutputItem, ("FunctionToolCallOutput",)),
    (t.ReasoningItem, ("ReasoningItem",)),
    (t.McpListToolsTool, ("MCPListToolsTool",)),
    (t.McpListTools, ("MCPListTools",)),
    (t.McpToolCall, ("MCPToolCall",)),
    (t.McpApprovalRequest, ("MCPApprovalRequest",)),
    (t.ResponseUsage, ("ResponseUsage",)),
    (t.FunctionToolParam, ("FunctionTool",)),
    (
        t.ResponseLifecycleEvent,
        (
            "ResponseCreatedEvent",
            "ResponseInProgressEvent",
            "ResponseCompletedEvent",
            "ResponseFailedEvent",
            "ResponseIncompleteEvent",
        ),
    ),
    (t.OutputItemEvent, ("ResponseOutputItemAddedEvent", "ResponseOutputItemDoneEvent")),
    (t.ContentPartEvent, ("ResponseContentPartAddedEvent", "ResponseContentPartDoneEvent")),
    (t.TextDeltaEvent, ("ResponseTextDeltaEvent",)),
    (t.TextDoneEvent, ("ResponseTextDoneEvent",)),
    (t.ReasoningTextDeltaEvent, ("ResponseReasoningTextDeltaEvent",)),
    (t.ReasoningTextDoneEvent, ("ResponseReasoningTextDoneEvent",)),
    (
        t.FunctionCallArgumentsDeltaEvent,
        ("ResponseFunctionCallArgumentsDeltaEvent", "ResponseMCPCallArgumentsDeltaEvent"),
    ),
    (t.FunctionCallArgumentsDoneEvent, ("ResponseFunctionCallArgumentsDoneEvent",)),
    (t.McpCallArgumentsDoneEvent, ("ResponseMCPCallArgumentsDoneEvent",)),
    (
        t.ItemEvent,
        (
            "ResponseMCPCallInProgressEvent",
            "ResponseMCPCallCompletedEvent",
            "ResponseMCPCallFailedEvent",
            "ResponseMCPListToolsInProgressEvent",
            "ResponseMCPListToolsCompletedEvent",
            "ResponseMCPListToolsFailedEvent",
        ),
    ),
    (t.ErrorEvent, ("ResponseErrorEvent",)),
]


def _literals(annotation: Any) -> set[str]:
    if get_origin(annotation) is Literal:
        return set(get_args(annotation))
    return set().union(*(_literals(arg) for arg in get_args(annotation)))


@pytest.mark.parametrize(("typed", "names"), PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_a_typed_dict_has_the_fields_and_type_of_its_spec_schemas(
    typed: type, names: tuple[str, ...]
) -> None:
    declared = set(get_type_hints(typed))
    kinds: set[str] = set()
    for name in names:
        schema = _SCHEMAS[name]
        properties = set(schema["properties"])
        assert declared <= properties, f"{typed.__name__}: not in {name}: {declared - properties}"
        missing = set(schema.get("required", ())) - declared
        assert not missing, f"{typed.__name__}: {name} requires {missing}"
        if "type" in schema["properties"]:
            kinds.update(schema["properties"]["type"]["enum"])
    if kinds:
        assert _literals(get_type_hints(typed)["type"]) == kinds


def test_the_approval_response_has_the_fields_of_its_spec_schema() -> None:
    """The schema requires a ``request_id`` it never defines (a slip in
    it): the one field declared beyond its properties."""
    schema = _SCHEMAS["MCPApprovalResponseResource"]
    declared = set(get_type_hints(t.McpApprovalResponse))
    assert declared - set(schema["properties"]) == {"request_id"}
    assert set(schema["required"]) <= declared


def test_the_response_object_declares_only_fields_of_the_spec() -> None:
    """Beside ``store``, which the server has always written and the spec's
    schema leaves out (it allows more properties)."""
    schema = _SCHEMAS["Response"]
    properties: set[str] = set()
    for part in schema["allOf"]:
        if "$ref" in part:
            part = _SCHEMAS[part["$ref"].rsplit("/", 1)[-1]]
        properties |= set(part.get("properties", {}))
    declared = set(get_type_hints(t.ResponseObject))
    assert declared - properties == {"store"}
