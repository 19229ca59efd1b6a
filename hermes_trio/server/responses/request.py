"""Validation of Responses API requests (pure): the ``POST /v1/responses``
body into a :class:`ResponsesRequest`, and the query strings of
``GET /v1/responses/{id}`` and ``GET /v1/responses/{id}/input_items``.

What the server reads is checked and what it cannot honour is refused, with
a 400 naming the field; settings that describe the caller are echoed in the
response object; fields the server does not use follow the
``api_server.extra_params`` policy, as on the chat endpoint.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...wire.context import ContextPolicy
from ...wire.messages import ChatTool, ChatToolFunction, Message
from ...wire.responses_types import EchoedTool, InputItem, ResponseEcho
from ..parsing.forwarded import FORWARDED
from ..parsing.validation import (
    DOCUMENTED_EXTRAS,
    ExtraParams,
    a_bool,
    a_string,
    bad,
    extra_params,
    join_system,
    number,
    optional_bool,
    optional_str,
    positive_int,
    refuse_unsupported,
    request_object,
    stream_options,
)
from ..parsing.validation import metadata as check_metadata
from .input import SealedInput, parse_input_items
from .mcp_request import McpRequestTool, parse_mcp_tool

if TYPE_CHECKING:
    from werkzeug.datastructures import MultiDict

__all__ = [
    "ItemsQuery",
    "ResponsesRequest",
    "RetrieveQuery",
    "context_policy",
    "parse_items_query",
    "parse_responses_request",
    "parse_retrieve_query",
]

MAX_SEQUENCE = 2**63 - 1
"""The largest sequence number a query may name."""

# Features this server does not have: refused when set to anything but null.
_UNSUPPORTED = {
    "prompt": "reusable prompts are not supported; send 'input' and 'instructions'",
    "conversation": "conversations are not supported; chain turns with 'previous_response_id'",
    "max_tool_calls": "'max_tool_calls' is not supported; the agent's own step limit applies",
    "background_options": "'background_options' is not supported",
    "moderation": "'moderation' is not supported",
    "image": "'image' is not supported",
    "access_programs": "'access_programs' is not supported",
}
# The settings the response object repeats among them (``user``,
# ``safety_identifier``, ``prompt_cache_key``, ``service_tier``) are checked
# like the documented extra parameters they also are.
# Extra parameters reach the model as Chat Completions fields: those OpenAI
# documents there must have its types.
_EXTRA_CHECKS = {**DOCUMENTED_EXTRAS, **FORWARDED}
# What the server reads itself; everything else is an extra parameter.
_USED = set(_UNSUPPORTED) | {
    "model",
    "input",
    "instructions",
    "previous_response_id",
    "store",
    "stream",
    "background",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "temperature",
    "top_p",
    "max_output_tokens",
    "text",
    "reasoning",
    "truncation",
    "context_management",
    "include",
    "stream_options",
    "metadata",
}


@dataclass
class ResponsesRequest:
    model: str | None
    messages: list[Message]
    """Chat messages this request adds to the conversation."""
    input_items: list[InputItem]
    """The input as Responses items with ids, for ``input_items``."""
    system: str | None
    previous_response_id: str | None
    store: bool
    stream: bool
    background: bool
    tools: list[ChatTool] = field(default_factory=list)
    mcp: list[McpRequestTool] = field(default_factory=list)
    """The request's ``mcp`` tools: servers its turn may call."""
    params: dict[str, Any] = field(default_factory=dict)
    """Settings for the model's request (Chat Completions fields, extra
    parameters passed on as the client sent them)."""
    echo: ResponseEcho = field(default_factory=lambda: ResponseEcho())
    """Settings the response object repeats."""
    context: ContextPolicy = field(default_factory=lambda: ContextPolicy("refuse"))
    """What the turn does with a conversation too long for the model's
    window: ``truncation`` and ``context_management``."""
    sealed: list[SealedInput] = field(default_factory=list)
    """``compaction`` items of the input, to be opened before the turn."""


def parse_responses_request(
    body: Any, extra: ExtraParams = "pass", mcp_allowed_urls: Sequence[str] = ()
) -> ResponsesRequest:
    """Validate a ``POST /v1/responses`` body; 400 naming the field otherwise.
    ``extra`` is the ``api_server.extra_params`` policy for fields the server
    does not use; an ``mcp`` tool's ``server_url`` must start with one of
    ``mcp_allowed_urls``."""
    body = request_object(body)
    for key, why in _UNSUPPORTED.items():
        if body.get(key) is not None:
            raise bad(why, key)
    refuse_unsupported(body)

    model = optional_str(body, "model")
    stream = optional_bool(body, "stream", False)
    store = optional_bool(body, "store", True)
    background = optional_bool(body, "background", False)
    if background and not store:
        raise bad("'background' responses must be stored: 'store' cannot be false", "background")
    instructions = optional_str(body, "instructions")
    previous = optional_str(body, "previous_response_id")
    if previous is not None and not previous:
        raise bad("'previous_response_id' must not be empty", "previous_response_id")

    params: dict[str, Any] = {}
    echo: ResponseEcho = {
        "instructions": instructions,
        "previous_response_id": previous,
        "store": store,
        "background": background,
    }
    temperature = number(body, "temperature", 0, 2)
    if temperature is not None:
        params["temperature"] = temperature
        echo["temperature"] = temperature
    top_p = number(body, "top_p", 0, 1)
    if top_p is not None:
        params["top_p"] = top_p
        echo["top_p"] = top_p
    max_output = positive_int(body, "max_output_tokens")
    if max_output is not None:
        params["max_tokens"] = max_output
        echo["max_output_tokens"] = max_output
    parallel = body.get("parallel_tool_calls")
    if parallel is not None:
        if not isinstance(parallel, bool):
            raise bad("'parallel_tool_calls' must be true or false", "parallel_tool_calls")
        params["parallel_tool_calls"] = parallel
        echo["parallel_tool_calls"] = parallel
    echo["truncation"] = truncation = body.get("truncation")
    context = context_policy(truncation, body.get("context_management"))
    check_include(body.get("include"), "include")
    options = stream_options(body, stream)
    if options is not None:
        _refuse_unknown(options, {"include_obfuscation"}, "stream_options")
        if options.get("include_obfuscation") not in (None, False):
            raise bad(
                "stream obfuscation is not supported: set 'include_obfuscation' to false",
                "stream_options.include_obfuscation",
            )
    metadata = body.get("metadata")
    if metadata is not None:
        check_metadata(metadata, "metadata")
        echo["metadata"] = dict(metadata)
    params.update(extra_params(body, _USED, extra, _EXTRA_CHECKS))
    # The extra parameters' checks made these strings (or null).
    echo["user"] = body.get("user")
    echo["safety_identifier"] = body.get("safety_identifier")
    echo["prompt_cache_key"] = body.get("prompt_cache_key")
    echo["service_tier"] = body.get("service_tier")
    _text_settings(body.get("text"), params, echo)
    _reasoning_settings(body.get("reasoning"), params, echo)
    tools, echoed_tools, mcp = _tools(body.get("tools"), mcp_allowed_urls)
    echo["tools"] = echoed_tools
    choice = body.get("tool_choice")
    if choice is not None:
        params["tool_choice"] = _tool_choice(choice)
        echo["tool_choice"] = choice

    messages, items, system_parts, sealed = parse_input_items(body.get("input"))
    if instructions:
        system_parts.insert(0, instructions)
    return ResponsesRequest(
        model=model,
        messages=messages,
        input_items=items,
        system=join_system(system_parts),
        previous_response_id=previous,
        store=store,
        stream=stream,
        background=background,
        tools=tools,
        mcp=mcp,
        params=params,
        echo=echo,
        context=context,
        sealed=sealed,
    )


def context_policy(truncation: Any, management: Any) -> ContextPolicy:
    """What a turn does when its conversation outgrows the window, as
    OpenAI documents it: ``context_management`` compaction entries compact
    (past their ``compact_threshold``); ``truncation: "auto"`` drops the
    oldest whole items; ``"disabled"`` (the default) refuses with
    ``context_length_exceeded`` rather than send what cannot fit."""
    if truncation not in (None, "disabled", "auto"):
        raise bad("'truncation' must be 'auto' or 'disabled'", "truncation")
    if management is not None:
        if not isinstance(management, list):
            raise bad("'context_management' must be a list", "context_management")
        threshold: int | None = None
        for i, entry in enumerate(management):
            where = f"context_management[{i}]"
            if not isinstance(entry, dict):
                raise bad(f"'{where}' must be an object", where)
            _refuse_unknown(entry, {"type", "compact_threshold"}, where)
            if entry.get("type") != "compaction":
                raise bad(f"'{where}.type' must be 'compaction'", f"{where}.type")
            value = entry.get("compact_threshold")
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or value < 1000:
                    raise bad(
                        f"'{where}.compact_threshold' must be an integer of at least 1000",
                        f"{where}.compact_threshold",
                    )
                threshold = value if threshold is None else min(threshold, value)
        if management:
            return ContextPolicy("compact", compact_at=threshold)
    return ContextPolicy("truncate" if truncation == "auto" else "refuse")


def _text_settings(text: Any, params: dict[str, Any], echo: ResponseEcho) -> None:
    if text is None:
        return
    if not isinstance(text, dict):
        raise bad("'text' must be an object", "text")
    _refuse_unknown(text, {"format", "verbosity"}, "text")
    fmt = text.get("format")
    if fmt is not None:
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if kind == "json_object":
            params["response_format"] = {"type": "json_object"}
        elif kind == "json_schema":
            if not isinstance(fmt.get("name"), str) or not isinstance(fmt.get("schema"), dict):
                raise bad(
                    "'text.format' of type json_schema needs 'name' and 'schema'", "text.format"
                )
            schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
            params["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif kind != "text":
            raise bad(
                "'text.format.type' must be 'text', 'json_object' or 'json_schema'",
                "text.format.type",
            )
    verbosity = text.get("verbosity")
    if verbosity is not None:
        if verbosity not in ("low", "medium", "high"):
            raise bad("'text.verbosity' must be 'low', 'medium' or 'high'", "text.verbosity")
        params["verbosity"] = verbosity
    echo["text"] = {"format": fmt or {"type": "text"}, "verbosity": verbosity}


def _reasoning_settings(reasoning: Any, params: dict[str, Any], echo: ResponseEcho) -> None:
    if reasoning is None:
        return
    if not isinstance(reasoning, dict):
        raise bad("'reasoning' must be an object", "reasoning")
    _refuse_unknown(reasoning, {"effort", "summary", "generate_summary"}, "reasoning")
    effort = reasoning.get("effort")
    if effort is not None:
        if effort not in ("none", "minimal", "low", "medium", "high", "xhigh"):
            raise bad(
                "'reasoning.effort' must be none, minimal, low, medium, high or xhigh",
                "reasoning.effort",
            )
        params["reasoning_effort"] = effort
    summary = reasoning.get("summary", reasoning.get("generate_summary"))
    if summary not in (None, "auto", "concise", "detailed"):
        raise bad("'reasoning.summary' must be auto, concise or detailed", "reasoning.summary")
    # The model's reasoning comes back as reasoning items whatever the
    # summary setting asks for.
    echo["reasoning"] = {"effort": effort, "summary": summary}


def _tools(
    tools: Any, mcp_allowed_urls: Sequence[str]
) -> tuple[list[ChatTool], list[EchoedTool], list[McpRequestTool]]:
    """Client tools in Chat Completions form (for the agent), all tools as
    echoed, and the ``mcp`` tools."""
    if tools is None:
        return [], [], []
    if not isinstance(tools, list):
        raise bad("'tools' must be a list", "tools")
    chat: list[ChatTool] = []
    echoed: list[EchoedTool] = []
    mcp: list[McpRequestTool] = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise bad(f"'{where}' must be an object", where)
        if tool.get("type") == "mcp":
            server = parse_mcp_tool(tool, where, mcp_allowed_urls)
            if any(other.label == server.label for other in mcp):
                raise bad(f"'{where}.server_label' repeats an earlier one", f"{where}.server_label")
            mcp.append(server)
            echoed.append(server.echo())
            continue
        if tool.get("type") != "function":
            raise bad(
                f"'{where}.type' {tool.get('type')!r} is not supported: only 'function' and "
                "'mcp' tools (the agent runs its own tools server-side)",
                f"{where}.type",
            )
        _refuse_unknown(tool, {"type", "name", "description", "parameters", "strict"}, where)
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise bad(f"'{where}.name' must be a non-empty string", f"{where}.name")
        description = tool.get("description")
        parameters = tool.get("parameters")
        strict = tool.get("strict")
        if parameters is not None and not isinstance(parameters, dict):
            raise bad(f"'{where}.parameters' must be a JSON schema object", f"{where}.parameters")
        if description is not None:
            a_string(description, f"{where}.description")
        if strict is not None:
            a_bool(strict, f"{where}.strict")
        fn: ChatToolFunction = {"name": name}
        if description is not None:
            fn["description"] = description
        fn["parameters"] = parameters or {"type": "object", "properties": {}}
        if strict is not None:
            fn["strict"] = strict
        chat.append({"type": "function", "function": fn})
        echoed.append(
            {
                "type": "function",
                "name": name,
                "description": description,
                "parameters": parameters,
                "strict": strict,
            }
        )
    return chat, echoed, mcp


def _tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = choice.get("name")
        if not isinstance(name, str) or not name:
            raise bad("'tool_choice.name' must be a tool name", "tool_choice.name")
        return {"type": "function", "function": {"name": name}}
    raise bad(
        "'tool_choice' must be 'auto', 'none', 'required' or "
        '{"type": "function", "name": ...}',
        "tool_choice",
    )


def _refuse_unknown(value: dict[str, Any], allowed: Set[str], where: str) -> None:
    extra = sorted(set(value) - allowed)
    if extra:
        raise bad(f"unknown field '{where}.{extra[0]}'", f"{where}.{extra[0]}")


# ---------------------------------------------------------------------------
# Query strings


@dataclass(frozen=True)
class RetrieveQuery:
    stream: bool
    after: int
    """Replay the events after this sequence number; -1 replays them all."""


@dataclass(frozen=True)
class ItemsQuery:
    limit: int
    order: str
    after: str | None
    """An item id; whether the response has it is the caller's to check."""


def parse_retrieve_query(args: MultiDict[str, str]) -> RetrieveQuery:
    _check_query(args, {"stream", "starting_after", "include", "include[]", "include_obfuscation"})
    stream = _query_bool(args.get("stream"), "stream")
    if _query_bool(args.get("include_obfuscation"), "include_obfuscation"):
        raise bad("stream obfuscation is not supported", "include_obfuscation")
    after_text = args.get("starting_after")
    after = -1
    if after_text is not None:
        if not stream:
            raise bad("'starting_after' is only allowed with 'stream=true'", "starting_after")
        refusal = bad(
            f"'starting_after' must be an integer from -1 to {MAX_SEQUENCE}", "starting_after"
        )
        try:
            after = int(after_text)
        except ValueError:
            raise refusal from None
        # Sequence numbers are stored as SQLite integers (64-bit).
        if not -1 <= after <= MAX_SEQUENCE:
            raise refusal
    return RetrieveQuery(stream=stream, after=after)


def parse_items_query(args: MultiDict[str, str]) -> ItemsQuery:
    _check_query(args, {"limit", "order", "after", "include", "include[]"})
    try:
        limit = int(args.get("limit", "20"))
    except ValueError:
        raise bad("'limit' must be an integer from 1 to 100", "limit") from None
    if not 1 <= limit <= 100:
        raise bad("'limit' must be an integer from 1 to 100", "limit")
    order = args.get("order", "desc")
    if order not in ("asc", "desc"):
        raise bad("'order' must be 'asc' or 'desc'", "order")
    return ItemsQuery(limit=limit, order=order, after=args.get("after"))


# What OpenAI lets a client ask to ``include``. Clients ask for some of them
# by default (``reasoning.encrypted_content`` for reasoning models); none of
# them is something this server produces, so they change nothing here, but a
# value outside the list is still a mistake worth naming.
INCLUDABLE = frozenset(
    {
        "code_interpreter_call.outputs",
        "computer_call_output.output.image_url",
        "file_search_call.results",
        "message.input_image.image_url",
        "message.output_text.logprobs",
        "reasoning.encrypted_content",
        "web_search_call.action.sources",
        "web_search_call.results",
    }
)


def check_include(include: Any, where: str) -> None:
    """``include`` is null or a list of the values OpenAI documents."""
    if include is None:
        return
    if not isinstance(include, list):
        raise bad(f"'{where}' must be a list of strings", where)
    for index, value in enumerate(include):
        if not isinstance(value, str) or value not in INCLUDABLE:
            raise bad(
                f"'{where}[{index}]' must be one of: {', '.join(sorted(INCLUDABLE))}",
                f"{where}[{index}]",
            )


def _check_query(args: MultiDict[str, str], allowed: Set[str]) -> None:
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise bad(f"unknown query parameter '{unknown[0]}'", unknown[0])
    for name in ("include", "include[]"):
        check_include(args.getlist(name) or None, name)


def _query_bool(value: str | None, name: str) -> bool:
    if value is None:
        return False
    lowered = value.lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0", ""):
        return False
    raise bad(f"'{name}' must be true or false", name)
