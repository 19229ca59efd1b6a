"""The OpenAI Responses API objects this project writes and reads, as
TypedDicts written after OpenAI's OpenAPI spec (``components.schemas``;
the subset the tests check against is tests/spec/openai_schemas.json).

Each class names the spec schema it follows. A field is ``NotRequired``
where this project leaves it out (the spec makes many optional); nullable
fields are ``X | None``. What the spec leaves open stays open: a tool's
``input_schema``, a structured-output ``format`` object. TypedDicts are
plain dicts at run time, so nothing here costs a thing per token.

The server builds them (``responses_out.py``, ``mcp_items.py``,
``server/responses/``) and the scripted model server fakes an upstream
with the same ones (``testing/scripted_model/responses_render.py``).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "CompactionItem",
    "ContentPartEvent",
    "EchoedTool",
    "ErrorEvent",
    "FunctionCallArgumentsDeltaEvent",
    "FunctionCallArgumentsDoneEvent",
    "FunctionCallOutputItem",
    "FunctionCallOutputParam",
    "FunctionCallParam",
    "FunctionToolCall",
    "FunctionToolEcho",
    "FunctionToolParam",
    "IncompleteDetails",
    "InputContent",
    "InputFileContent",
    "InputImageContent",
    "InputImageParam",
    "InputItem",
    "InputItemParam",
    "InputMessageItem",
    "InputTextContent",
    "ItemEvent",
    "ItemStatus",
    "McpApprovalRequest",
    "McpApprovalResponse",
    "McpCallArgumentsDoneEvent",
    "McpListTools",
    "McpListToolsTool",
    "McpToolAnnotations",
    "McpToolCall",
    "McpToolCallStatus",
    "McpToolEcho",
    "McpToolExecutionError",
    "McpToolFilter",
    "McpToolNames",
    "MessageParam",
    "OutputItem",
    "OutputItemEvent",
    "OutputMessage",
    "OutputMessageContent",
    "OutputText",
    "ReasoningItem",
    "ReasoningSettings",
    "ReasoningTextContent",
    "ReasoningTextDeltaEvent",
    "ReasoningTextDoneEvent",
    "RefusalContent",
    "ResponseEcho",
    "ResponseError",
    "ResponseLifecycleEvent",
    "ResponseObject",
    "ResponseStatus",
    "ResponseStreamEvent",
    "ResponseUsage",
    "SummaryTextContent",
    "TextDeltaEvent",
    "TextDoneEvent",
    "TextSettings",
    "ToolChoiceFunction",
]

ItemStatus = Literal["in_progress", "completed", "incomplete"]
"""An output item's ``status`` (``FunctionCallStatus`` and the like)."""

McpToolCallStatus = Literal["in_progress", "completed", "incomplete", "calling", "failed"]
"""``MCPToolCallStatus``."""

ResponseStatus = Literal["completed", "failed", "in_progress", "cancelled", "queued", "incomplete"]
"""``Response.status``."""


# -- content parts -------------------------------------------------------------


class OutputText(TypedDict):
    """``OutputTextContent``: the text part of an assistant message."""

    type: Literal["output_text"]
    text: str
    annotations: list[Any]
    """Always empty here (the project writes no annotations)."""
    logprobs: list[Any]
    """Always empty here (the project asks for no logprobs)."""


class RefusalContent(TypedDict):
    """``RefusalContent``."""

    type: Literal["refusal"]
    refusal: str


class ReasoningTextContent(TypedDict):
    """``ReasoningTextContent``."""

    type: Literal["reasoning_text"]
    text: str


class SummaryTextContent(TypedDict):
    """``SummaryTextContent``."""

    type: Literal["summary_text"]
    text: str


class InputTextContent(TypedDict):
    """``InputTextContent``."""

    type: Literal["input_text"]
    text: str


class InputImageContent(TypedDict):
    """``InputImageContent`` (by URL or data URL: file ids are refused)."""

    type: Literal["input_image"]
    image_url: str
    detail: str
    file_id: None


class InputFileContent(TypedDict):
    """``InputFileContent`` (inline ``file_data``: file ids are refused)."""

    type: Literal["input_file"]
    file_data: str
    filename: str | None
    file_id: None


OutputMessageContent = OutputText | RefusalContent
"""``OutputMessageContent``."""

InputContent = InputTextContent | InputImageContent | InputFileContent | OutputText | RefusalContent
"""A content part of a stored input message (an assistant message given
back holds output parts)."""


# -- output items ----------------------------------------------------------------


class OutputMessage(TypedDict):
    """``OutputMessage``."""

    id: str
    type: Literal["message"]
    status: ItemStatus
    role: Literal["assistant"]
    content: list[OutputMessageContent]
    phase: NotRequired[Literal["commentary", "final_answer"]]
    """``MessagePhase``: set once the message ended."""


class FunctionToolCall(TypedDict):
    """``FunctionToolCall``: a call the client runs."""

    id: str
    type: Literal["function_call"]
    status: ItemStatus
    call_id: str
    name: str
    arguments: str


class ReasoningItem(TypedDict):
    """``ReasoningItem``."""

    id: str
    type: Literal["reasoning"]
    status: NotRequired[ItemStatus]
    summary: list[SummaryTextContent]
    content: NotRequired[list[ReasoningTextContent]]


class McpToolAnnotations(TypedDict):
    """The ``annotations`` of an MCP tool, as far as this project reads them."""

    read_only: bool


class McpListToolsTool(TypedDict):
    """``MCPListToolsTool``."""

    name: str
    description: str | None
    input_schema: dict[str, Any]
    """The tool's JSON Schema, as its server gave it."""
    annotations: McpToolAnnotations | None


class McpListTools(TypedDict):
    """``MCPListTools``."""

    type: Literal["mcp_list_tools"]
    id: str
    server_label: str
    tools: list[McpListToolsTool]
    error: str | None


class McpErrorText(TypedDict):
    type: Literal["text"]
    text: str


class McpToolExecutionError(TypedDict):
    """``MCPToolExecutionError``."""

    type: Literal["mcp_tool_execution_error"]
    content: list[McpErrorText]


class McpToolCall(TypedDict):
    """``MCPToolCall``."""

    type: Literal["mcp_call"]
    id: str
    server_label: str
    name: str
    arguments: str
    output: str | None
    error: McpToolExecutionError | None
    status: McpToolCallStatus
    approval_request_id: str | None


class McpApprovalRequest(TypedDict):
    """``MCPApprovalRequest``."""

    type: Literal["mcp_approval_request"]
    id: str
    server_label: str
    name: str
    arguments: str


class CompactionItem(TypedDict):
    """``CompactionBody``: a summary of the conversation before it, sealed
    (:mod:`.sealed`)."""

    type: Literal["compaction"]
    id: str
    encrypted_content: str


OutputItem = (
    OutputMessage
    | FunctionToolCall
    | ReasoningItem
    | McpListTools
    | McpToolCall
    | McpApprovalRequest
    | CompactionItem
)
"""``OutputItem``: the kinds this project writes."""


# -- input items (after the server checked them) ------------------------------


class InputMessageItem(TypedDict):
    """``InputMessage`` (or an assistant ``OutputMessage`` given back), as stored."""

    id: str
    type: Literal["message"]
    role: Literal["user", "assistant", "system", "developer"]
    status: ItemStatus
    content: list[InputContent]


class FunctionCallOutputItem(TypedDict):
    """``FunctionToolCallOutput``: the client's result of a call."""

    id: str
    type: Literal["function_call_output"]
    call_id: str
    output: str
    status: ItemStatus


class McpApprovalResponse(TypedDict):
    """``MCPApprovalResponseResource``."""

    type: Literal["mcp_approval_response"]
    id: str
    approval_request_id: str
    approve: bool
    reason: str | None
    request_id: str
    """Required by the spec's schema, which never defines it (a slip in it):
    the same id as ``approval_request_id``."""


InputItem = (
    InputMessageItem
    | FunctionToolCall
    | FunctionCallOutputItem
    | McpApprovalResponse
    | McpApprovalRequest
    | McpToolCall
    | ReasoningItem
    | CompactionItem
)
"""A stored input item (``GET /v1/responses/{id}/input_items``). Items given
back from an earlier output (``mcp_call``, ``reasoning``) are kept as sent,
their checked fields as typed here."""


# -- a request's input, as this project sends it to a Responses server -------------


class InputImageParam(TypedDict):
    """``InputImageContent`` converted from a chat image part."""

    type: Literal["input_image"]
    image_url: str | None
    detail: str


class MessageParam(TypedDict):
    """``EasyInputMessage``: text, or content parts (those converted from
    chat parts, and any other as the caller gave it)."""

    type: Literal["message"]
    role: str
    content: str | list[Any]


class FunctionCallParam(TypedDict):
    """``FunctionToolCall`` given back to the model."""

    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str


class FunctionCallOutputParam(TypedDict):
    """``FunctionCallOutputItemParam``."""

    type: Literal["function_call_output"]
    call_id: str
    output: str


InputItemParam = MessageParam | FunctionCallParam | FunctionCallOutputParam
"""An item of a request's ``input``."""


class FunctionToolParam(TypedDict):
    """``FunctionToolParam``: a tool the model may call."""

    type: Literal["function"]
    name: str
    description: NotRequired[str]
    parameters: NotRequired[dict[str, Any]]
    """The tool's JSON Schema."""
    strict: NotRequired[bool]


# -- the response object ------------------------------------------------------------


class ResponseUsage(TypedDict):
    """``ResponseUsage``."""

    input_tokens: int
    input_tokens_details: dict[Literal["cached_tokens", "cache_write_tokens"], int]
    output_tokens: int
    output_tokens_details: dict[Literal["reasoning_tokens"], int]
    total_tokens: int


class ResponseError(TypedDict):
    """``ResponseError`` (when not null)."""

    code: str
    message: str


class IncompleteDetails(TypedDict):
    reason: Literal["max_output_tokens", "content_filter"] | None


class ReasoningSettings(TypedDict):
    """``Reasoning`` as the response object repeats it."""

    effort: str | None
    summary: str | None


class TextSettings(TypedDict):
    """``ResponseTextParam`` as the response object repeats it."""

    format: dict[str, Any]
    """``TextResponseFormatConfiguration``: a JSON schema format carries the
    caller's schema, repeated as given."""
    verbosity: NotRequired[str | None]


class ToolChoiceFunction(TypedDict):
    """``ToolChoiceFunction``."""

    type: Literal["function"]
    name: str


class FunctionToolEcho(TypedDict):
    """``FunctionTool``, as the response object repeats a request's."""

    type: Literal["function"]
    name: str
    description: str | None
    parameters: dict[str, Any] | None
    """The tool's JSON Schema, as the caller gave it."""
    strict: bool | None


class McpToolEcho(TypedDict):
    """``MCPTool``, as the response object repeats a request's (never its
    headers)."""

    type: Literal["mcp"]
    server_label: str
    server_url: str
    allowed_tools: list[str] | McpToolFilter | None
    require_approval: Literal["always", "never"] | dict[str, McpToolNames]


class McpToolNames(TypedDict):
    """``MCPToolFilter`` by name."""

    tool_names: list[str]


class McpToolFilter(TypedDict):
    """``MCPToolFilter``: read-only tools, and maybe only those named."""

    read_only: bool
    tool_names: NotRequired[list[str]]


EchoedTool = FunctionToolEcho | McpToolEcho


class ResponseEcho(TypedDict, total=False):
    """The request's settings that the response object repeats, as the
    server checked them; a key left out takes OpenAI's default."""

    instructions: str | None
    previous_response_id: str | None
    store: bool
    background: bool
    temperature: float
    top_p: float
    max_output_tokens: int
    parallel_tool_calls: bool
    truncation: str | None
    metadata: dict[str, str]
    user: str | None
    safety_identifier: str | None
    prompt_cache_key: str | None
    service_tier: str | None
    text: TextSettings
    reasoning: ReasoningSettings
    tools: list[EchoedTool]
    tool_choice: str | ToolChoiceFunction


class ResponseObject(TypedDict):
    """``Response``: the fields this project writes. The server's builder
    writes every one; the scripted model server leaves out the ones marked
    ``NotRequired``, as older servers do."""

    id: str
    object: Literal["response"]
    created_at: int
    status: ResponseStatus
    background: NotRequired[bool]
    completed_at: NotRequired[int | None]
    error: ResponseError | None
    incomplete_details: IncompleteDetails | None
    instructions: str | None
    max_output_tokens: int | None
    max_tool_calls: NotRequired[int | None]
    metadata: dict[str, str]
    model: str
    output: list[OutputItem]
    output_text: NotRequired[str]
    parallel_tool_calls: bool
    previous_response_id: str | None
    reasoning: ReasoningSettings
    service_tier: NotRequired[str]
    store: bool
    temperature: float | None
    text: TextSettings
    tool_choice: str | ToolChoiceFunction
    tools: list[EchoedTool]
    """``ToolsArray``: the request's tools as the response repeats them."""
    top_logprobs: NotRequired[int]
    top_p: float | None
    truncation: str | None
    usage: NotRequired[ResponseUsage | None]
    user: NotRequired[str | None]
    prompt_cache_key: NotRequired[str]
    safety_identifier: NotRequired[str]


# -- stream events -------------------------------------------------------------------


class ResponseLifecycleEvent(TypedDict):
    """``ResponseCreatedEvent``, ``ResponseInProgressEvent``,
    ``ResponseCompletedEvent``, ``ResponseFailedEvent`` and
    ``ResponseIncompleteEvent``: the response object as it stands."""

    type: Literal[
        "response.created",
        "response.in_progress",
        "response.completed",
        "response.failed",
        "response.incomplete",
    ]
    response: ResponseObject
    sequence_number: int


class OutputItemEvent(TypedDict):
    """``ResponseOutputItemAddedEvent`` and ``ResponseOutputItemDoneEvent``."""

    type: Literal["response.output_item.added", "response.output_item.done"]
    output_index: int
    item: OutputItem
    sequence_number: int


class ContentPartEvent(TypedDict):
    """``ResponseContentPartAddedEvent`` and ``ResponseContentPartDoneEvent``."""

    type: Literal["response.content_part.added", "response.content_part.done"]
    item_id: str
    output_index: int
    content_index: int
    part: OutputText
    sequence_number: int


class TextDeltaEvent(TypedDict):
    """``ResponseTextDeltaEvent``."""

    type: Literal["response.output_text.delta"]
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[Any]
    sequence_number: int


class TextDoneEvent(TypedDict):
    """``ResponseTextDoneEvent``."""

    type: Literal["response.output_text.done"]
    item_id: str
    output_index: int
    content_index: int
    text: str
    logprobs: list[Any]
    sequence_number: int


class ReasoningTextDeltaEvent(TypedDict):
    """``ResponseReasoningTextDeltaEvent``."""

    type: Literal["response.reasoning_text.delta"]
    item_id: str
    output_index: int
    content_index: int
    delta: str
    sequence_number: int


class ReasoningTextDoneEvent(TypedDict):
    """``ResponseReasoningTextDoneEvent``."""

    type: Literal["response.reasoning_text.done"]
    item_id: str
    output_index: int
    content_index: int
    text: str
    sequence_number: int


class FunctionCallArgumentsDeltaEvent(TypedDict):
    """``ResponseFunctionCallArgumentsDeltaEvent`` and
    ``ResponseMCPCallArgumentsDeltaEvent``."""

    type: Literal["response.function_call_arguments.delta", "response.mcp_call_arguments.delta"]
    item_id: str
    output_index: int
    delta: str
    sequence_number: int


class FunctionCallArgumentsDoneEvent(TypedDict):
    """``ResponseFunctionCallArgumentsDoneEvent``."""

    type: Literal["response.function_call_arguments.done"]
    item_id: str
    output_index: int
    name: str
    arguments: str
    sequence_number: int


class McpCallArgumentsDoneEvent(TypedDict):
    """``ResponseMCPCallArgumentsDoneEvent``."""

    type: Literal["response.mcp_call_arguments.done"]
    item_id: str
    output_index: int
    arguments: str
    sequence_number: int


class ItemEvent(TypedDict):
    """An event that only names its item: ``ResponseMCPCallInProgressEvent``,
    ``…CompletedEvent``, ``…FailedEvent`` and the ``mcp_list_tools`` ones."""

    type: Literal[
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.mcp_call.failed",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.mcp_list_tools.failed",
    ]
    item_id: str
    output_index: int
    sequence_number: int


class ErrorEvent(TypedDict):
    """``ResponseErrorEvent``."""

    type: Literal["error"]
    code: str | None
    message: str
    param: str | None
    sequence_number: int


ResponseStreamEvent = (
    ResponseLifecycleEvent
    | OutputItemEvent
    | ContentPartEvent
    | TextDeltaEvent
    | TextDoneEvent
    | ReasoningTextDeltaEvent
    | ReasoningTextDoneEvent
    | FunctionCallArgumentsDeltaEvent
    | FunctionCallArgumentsDoneEvent
    | McpCallArgumentsDoneEvent
    | ItemEvent
    | ErrorEvent
)
"""``ResponseStreamEvent``: the events this project writes (besides its own
``hermes.*`` extensions)."""
