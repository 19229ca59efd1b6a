"""``/v1/responses``: the Responses API over the agent, with a durable store
and resumable streams (issue 4).

- ``POST /v1/responses`` runs one agent turn, streamed (``stream: true``) or
  not. ``previous_response_id`` continues the stored conversation, tool calls
  and tool results included; ``store: false`` keeps nothing.
- ``GET /v1/responses/{id}`` returns the response object, or with
  ``stream=true`` replays its events after ``starting_after`` and then
  follows the turn while it runs.
- ``DELETE /v1/responses/{id}``, ``GET /v1/responses/{id}/input_items`` and
  ``POST /v1/responses/{id}/cancel`` (background responses).

Each running response is a ``_Live`` entry: its turn writes events into an
:class:`EventLog` (and, in batches, into the store), and every HTTP stream is
a follower of that log, so a client that lost its connection resumes without
a gap or a repeat. A ``background`` turn keeps running without a client;
otherwise the stream that started the turn owns it and its disconnect
cancels the turn. Either way the response ends in the store as
``completed``, ``failed``, ``incomplete`` or ``cancelled`` — the last write
runs shielded, so a shutdown records the interruption too.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any

import trio
from quart import Response, request
from quart.wrappers.response import ResponseBody
from quart_trio import QuartTrio

from ..consumers.responses_sse import EventLog, LogFollower, write_response_events
from ..consumers.sse import error_status
from ..events import StreamEvent
from ..wire.responses_out import ResponseBuilder, new_item_id, new_response_id
from .errors import APIError
from .store import ResponseStore, StoredResponse, owner_scope, wall_clock
from .turns import RunningTurn

if TYPE_CHECKING:
    # app.py imports this module to register the routes.
    from .app import ServerState

__all__ = ["ResponsesRequest", "parse_responses_request", "register_responses_routes"]

log = logging.getLogger("hermes_trio.server.responses")

# How long the last store write of a response may take once its turn ended
# (also on shutdown, when everything else is cancelled).
FINALIZE_GRACE = 5.0
# How long /cancel and DELETE wait for a cancelled turn to record its end.
STOP_WAIT = 5.0

# ---------------------------------------------------------------------------
# Request validation (pure)

# Settings that only describe the caller, or hints with no effect on the
# answer: accepted and echoed.
_ACCEPTED = frozenset(
    {
        "user",
        "metadata",
        "safety_identifier",
        "prompt_cache_key",
        "prompt_cache_retention",
        "service_tier",
    }
)
# Features this server does not have: refused when set to anything but null.
_UNSUPPORTED = {
    "prompt": "reusable prompts are not supported; send 'input' and 'instructions'",
    "conversation": "conversations are not supported; chain turns with 'previous_response_id'",
    "max_tool_calls": "'max_tool_calls' is not supported; the agent's own step limit applies",
    "context_management": "'context_management' is not supported",
    "background_options": "'background_options' is not supported",
    "moderation": "'moderation' is not supported",
    "image": "'image' is not supported",
    "access_programs": "'access_programs' is not supported",
    "prompt_cache_options": "'prompt_cache_options' is not supported",
}
_KNOWN = (
    _ACCEPTED
    | set(_UNSUPPORTED)
    | {
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
        "include",
        "stream_options",
        "top_logprobs",
    }
)
_INPUT_ROLES = frozenset({"user", "assistant", "system", "developer"})


@dataclass
class ResponsesRequest:
    model: str | None
    messages: list[dict[str, Any]]
    """Chat messages this request adds to the conversation."""
    input_items: list[dict[str, Any]]
    """The input as Responses items with ids, for ``input_items``."""
    system: str | None
    previous_response_id: str | None
    store: bool
    stream: bool
    background: bool
    tools: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    echo: dict[str, Any] = field(default_factory=dict)


def _bad(message: str, param: str, code: str = "invalid_value") -> APIError:
    return APIError(400, message, param=param, code=code)


def _optional_bool(body: dict[str, Any], key: str, default: bool) -> bool:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _bad(f"'{key}' must be true or false", key)
    return value


def _optional_str(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise _bad(f"'{key}' must be a string", key)
    return value


def _number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(f"'{key}' must be a number", key)
    if not low <= value <= high:
        raise _bad(f"'{key}' must be between {low:g} and {high:g}, got {value}", key)
    return value


def parse_responses_request(body: Any) -> ResponsesRequest:
    """Validate a ``POST /v1/responses`` body; 400 naming the field otherwise."""
    if not isinstance(body, dict):
        raise APIError(400, "the request body must be a JSON object", code="invalid_json")
    unknown = sorted(set(body) - _KNOWN)
    if unknown:
        raise _bad(f"unknown field '{unknown[0]}': this server cannot honour it", unknown[0])
    for key, why in _UNSUPPORTED.items():
        if body.get(key) is not None:
            raise _bad(why, key)

    model = _optional_str(body, "model")
    stream = _optional_bool(body, "stream", False)
    store = _optional_bool(body, "store", True)
    background = _optional_bool(body, "background", False)
    if background and not store:
        raise _bad("'background' responses must be stored: 'store' cannot be false", "background")
    instructions = _optional_str(body, "instructions")
    previous = _optional_str(body, "previous_response_id")
    if previous is not None and not previous:
        raise _bad("'previous_response_id' must not be empty", "previous_response_id")

    params: dict[str, Any] = {}
    echo: dict[str, Any] = {
        "instructions": instructions,
        "previous_response_id": previous,
        "store": store,
        "background": background,
    }
    for key in ("temperature", "top_p"):
        value = _number(body, key, 0, 2 if key == "temperature" else 1)
        if value is not None:
            params[key] = value
            echo[key] = value
    max_output = body.get("max_output_tokens")
    if max_output is not None:
        if isinstance(max_output, bool) or not isinstance(max_output, int) or max_output < 1:
            raise _bad("'max_output_tokens' must be a positive integer", "max_output_tokens")
        params["max_tokens"] = max_output
        echo["max_output_tokens"] = max_output
    parallel = body.get("parallel_tool_calls")
    if parallel is not None:
        if not isinstance(parallel, bool):
            raise _bad("'parallel_tool_calls' must be true or false", "parallel_tool_calls")
        params["parallel_tool_calls"] = parallel
        echo["parallel_tool_calls"] = parallel
    top_logprobs = body.get("top_logprobs")
    if top_logprobs not in (None, 0):
        raise _bad("'top_logprobs' is not supported by this server", "top_logprobs")
    truncation = body.get("truncation")
    if truncation not in (None, "disabled"):
        raise _bad(
            "'truncation' must be 'disabled': this server does not drop context", "truncation"
        )
    include = body.get("include")
    if include is not None and (not isinstance(include, list) or include):
        raise _bad("'include' is not supported by this server (send null or [])", "include")
    options = body.get("stream_options")
    if options is not None:
        if not isinstance(options, dict):
            raise _bad("'stream_options' must be an object", "stream_options")
        if not stream:
            raise _bad("'stream_options' is only allowed with 'stream': true", "stream_options")
        extra = sorted(set(options) - {"include_obfuscation"})
        if extra:
            raise _bad(f"unknown field 'stream_options.{extra[0]}'", f"stream_options.{extra[0]}")
        if options.get("include_obfuscation") not in (None, False):
            raise _bad(
                "stream obfuscation is not supported: set 'include_obfuscation' to false",
                "stream_options.include_obfuscation",
            )
    _accepted(body, echo)
    _text_settings(body.get("text"), params, echo)
    _reasoning_settings(body.get("reasoning"), params, echo)
    tools, echoed_tools = _tools(body.get("tools"))
    echo["tools"] = echoed_tools
    choice = body.get("tool_choice")
    if choice is not None:
        params["tool_choice"] = _tool_choice(choice)
        echo["tool_choice"] = choice

    messages, items, system_parts = _input(body.get("input"))
    if instructions:
        system_parts.insert(0, instructions)
    return ResponsesRequest(
        model=model,
        messages=messages,
        input_items=items,
        system="\n\n".join(p for p in system_parts if p) or None,
        previous_response_id=previous,
        store=store,
        stream=stream,
        background=background,
        tools=tools,
        params=params,
        echo=echo,
    )


def _accepted(body: dict[str, Any], echo: dict[str, Any]) -> None:
    for key in ("user", "safety_identifier", "prompt_cache_key", "service_tier"):
        echo[key] = _optional_str(body, key)
    retention = body.get("prompt_cache_retention")
    if retention is not None and retention not in ("in_memory", "24h"):
        raise _bad(
            "'prompt_cache_retention' must be 'in_memory' or '24h'", "prompt_cache_retention"
        )
    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict) or len(metadata) > 16:
            raise _bad("'metadata' must be an object with at most 16 keys", "metadata")
        for key, value in metadata.items():
            if len(key) > 64 or not isinstance(value, str) or len(value) > 512:
                raise _bad(
                    "'metadata' keys must be at most 64 characters and values strings of at "
                    "most 512",
                    f"metadata.{key}",
                )
        echo["metadata"] = dict(metadata)


def _text_settings(text: Any, params: dict[str, Any], echo: dict[str, Any]) -> None:
    if text is None:
        return
    if not isinstance(text, dict):
        raise _bad("'text' must be an object", "text")
    extra = sorted(set(text) - {"format", "verbosity"})
    if extra:
        raise _bad(f"unknown field 'text.{extra[0]}'", f"text.{extra[0]}")
    fmt = text.get("format")
    if fmt is not None:
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if kind == "json_object":
            params["response_format"] = {"type": "json_object"}
        elif kind == "json_schema":
            if not isinstance(fmt.get("name"), str) or not isinstance(fmt.get("schema"), dict):
                raise _bad(
                    "'text.format' of type json_schema needs 'name' and 'schema'", "text.format"
                )
            schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
            params["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif kind != "text":
            raise _bad(
                "'text.format.type' must be 'text', 'json_object' or 'json_schema'",
                "text.format.type",
            )
    verbosity = text.get("verbosity")
    if verbosity is not None:
        if verbosity not in ("low", "medium", "high"):
            raise _bad("'text.verbosity' must be 'low', 'medium' or 'high'", "text.verbosity")
        params["verbosity"] = verbosity
    echo["text"] = {"format": fmt or {"type": "text"}, "verbosity": verbosity}


def _reasoning_settings(reasoning: Any, params: dict[str, Any], echo: dict[str, Any]) -> None:
    if reasoning is None:
        return
    if not isinstance(reasoning, dict):
        raise _bad("'reasoning' must be an object", "reasoning")
    extra = sorted(set(reasoning) - {"effort", "summary", "generate_summary"})
    if extra:
        raise _bad(f"unknown field 'reasoning.{extra[0]}'", f"reasoning.{extra[0]}")
    effort = reasoning.get("effort")
    if effort is not None:
        if effort not in ("none", "minimal", "low", "medium", "high", "xhigh"):
            raise _bad(
                "'reasoning.effort' must be none, minimal, low, medium, high or xhigh",
                "reasoning.effort",
            )
        params["reasoning_effort"] = effort
    summary = reasoning.get("summary", reasoning.get("generate_summary"))
    if summary not in (None, "auto", "concise", "detailed"):
        raise _bad("'reasoning.summary' must be auto, concise or detailed", "reasoning.summary")
    # The model's reasoning comes back as reasoning items whatever the
    # summary setting asks for.
    echo["reasoning"] = {"effort": effort, "summary": summary}


def _tools(tools: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Client tools in Chat Completions form (for the agent) and as echoed."""
    if tools is None:
        return [], []
    if not isinstance(tools, list):
        raise _bad("'tools' must be a list", "tools")
    chat: list[dict[str, Any]] = []
    echoed: list[dict[str, Any]] = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise _bad(f"'{where}' must be an object", where)
        if tool.get("type") != "function":
            raise _bad(
                f"'{where}.type' {tool.get('type')!r} is not supported: only 'function' tools "
                "(the agent runs its own tools server-side)",
                f"{where}.type",
            )
        extra = sorted(set(tool) - {"type", "name", "description", "parameters", "strict"})
        if extra:
            raise _bad(f"unknown field '{where}.{extra[0]}'", f"{where}.{extra[0]}")
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise _bad(f"'{where}.name' must be a non-empty string", f"{where}.name")
        description = tool.get("description")
        parameters = tool.get("parameters")
        strict = tool.get("strict")
        if parameters is not None and not isinstance(parameters, dict):
            raise _bad(f"'{where}.parameters' must be a JSON schema object", f"{where}.parameters")
        fn: dict[str, Any] = {"name": name}
        if description is not None:
            fn["description"] = description
        fn["parameters"] = parameters or {"type": "object", "properties": {}}
        if strict is not None:
            fn["strict"] = bool(strict)
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
    return chat, echoed


def _tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = choice.get("name")
        if not isinstance(name, str) or not name:
            raise _bad("'tool_choice.name' must be a tool name", "tool_choice.name")
        return {"type": "function", "function": {"name": name}}
    raise _bad(
        "'tool_choice' must be 'auto', 'none', 'required' or "
        '{"type": "function", "name": ...}',
        "tool_choice",
    )


def _input(value: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """The input as chat messages, as stored items, and system text."""
    if isinstance(value, str):
        if not value:
            raise _bad("'input' must not be empty", "input")
        item = {
            "id": new_item_id("msg"),
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [{"type": "input_text", "text": value}],
        }
        return [{"role": "user", "content": value}], [item], []
    if not isinstance(value, list) or not value:
        raise _bad("'input' must be a string or a non-empty list of input items", "input")
    messages: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    system: list[str] = []
    for i, raw in enumerate(value):
        where = f"input[{i}]"
        if not isinstance(raw, dict):
            raise _bad(f"'{where}' must be an object", where)
        kind = raw.get("type", "message")
        if kind == "message":
            _input_message(raw, where, messages, items, system)
        elif kind == "function_call":
            _input_function_call(raw, where, messages, items)
        elif kind == "function_call_output":
            call_id = raw.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise _bad(f"'{where}.call_id' must be a non-empty string", f"{where}.call_id")
            output = _output_text(raw.get("output"), f"{where}.output")
            messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
            items.append(
                {
                    "id": _item_id(raw, "fco", where),
                    "type": "function_call_output",
                    "call_id": call_id,
                    "output": output,
                    "status": "completed",
                }
            )
        elif kind == "reasoning":
            # Reasoning given back from an earlier output: chat models take
            # no reasoning input, and their own reasoning is not needed to
            # continue. Kept in the input items as sent.
            items.append(
                {**raw, "id": _item_id(raw, "rs", where), "summary": raw.get("summary") or []}
            )
        else:
            raise _bad(
                f"'{where}.type' {kind!r} is not supported (supported: message, function_call, "
                "function_call_output, reasoning)",
                f"{where}.type",
            )
    if not messages:
        raise _bad("'input' must contain at least one message or tool output", "input")
    return messages, items, system


def _item_id(raw: dict[str, Any], prefix: str, where: str) -> str:
    given = raw.get("id")
    if given is None:
        return new_item_id(prefix)
    if not isinstance(given, str) or not given:
        raise _bad(f"'{where}.id' must be a non-empty string", f"{where}.id")
    return given


def _output_text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for j, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") not in ("input_text", "output_text"):
                raise _bad(f"'{where}[{j}]' must be a text part", f"{where}[{j}]")
            texts.append(str(part.get("text", "")))
        return "".join(texts)
    raise _bad(f"'{where}' must be a string or a list of text parts", where)


def _input_function_call(
    raw: dict[str, Any], where: str, messages: list[dict[str, Any]], items: list[dict[str, Any]]
) -> None:
    for key in ("call_id", "name", "arguments"):
        if not isinstance(raw.get(key), str):
            raise _bad(f"'{where}.{key}' must be a string", f"{where}.{key}")
    call = {
        "id": raw["call_id"],
        "type": "function",
        "function": {"name": raw["name"], "arguments": raw["arguments"]},
    }
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        # Calls that follow assistant text (or each other) belong to the same
        # assistant message, as a chat model would have produced them.
        last.setdefault("tool_calls", []).append(call)
    else:
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
    items.append(
        {
            "id": _item_id(raw, "fc", where),
            "type": "function_call",
            "call_id": raw["call_id"],
            "name": raw["name"],
            "arguments": raw["arguments"],
            "status": "completed",
        }
    )


def _input_message(
    raw: dict[str, Any],
    where: str,
    messages: list[dict[str, Any]],
    items: list[dict[str, Any]],
    system: list[str],
) -> None:
    role = raw.get("role")
    if role not in _INPUT_ROLES:
        raise _bad(
            f"'{where}.role' must be one of {', '.join(sorted(_INPUT_ROLES))}, got {role!r}",
            f"{where}.role",
        )
    content = raw.get("content")
    item_id = _item_id(raw, "msg", where)
    if isinstance(content, str):
        parts: list[dict[str, Any]] = [
            {"type": "output_text" if role == "assistant" else "input_text", "text": content}
        ]
    elif isinstance(content, list) and content:
        parts = content
    else:
        raise _bad(
            f"'{where}.content' must be a string or a non-empty list of content parts",
            f"{where}.content",
        )
    chat_parts: list[dict[str, Any]] = []
    stored_parts: list[dict[str, Any]] = []
    for j, part in enumerate(parts):
        chat_part, stored = _content_part(part, role, f"{where}.content[{j}]")
        chat_parts.append(chat_part)
        stored_parts.append(stored)
    texts_only = all(p["type"] == "text" for p in chat_parts)
    text = "".join(p.get("text", "") for p in chat_parts) if texts_only else ""
    if role in ("system", "developer"):
        if not texts_only:
            raise _bad(f"'{where}.content' of a {role} message must be text", f"{where}.content")
        # Layered on the agent's system prompt for this turn, like
        # instructions.
        system.append(text)
    elif role == "assistant":
        if not texts_only:
            raise _bad(
                f"'{where}.content' of an assistant message must be text", f"{where}.content"
            )
        messages.append({"role": "assistant", "content": text})
    else:
        messages.append({"role": "user", "content": text if texts_only else chat_parts})
    item: dict[str, Any] = {
        "id": item_id,
        "type": "message",
        "role": role,
        "status": "completed",
        "content": stored_parts,
    }
    items.append(item)


def _content_part(part: Any, role: str, where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """One content part as a chat part and as a stored input item part."""
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in ("input_text", "output_text"):
        text = part.get("text")
        if not isinstance(text, str):
            raise _bad(f"'{where}.text' must be a string", f"{where}.text")
        if role == "assistant":
            stored = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        else:
            stored = {"type": "input_text", "text": text}
        return {"type": "text", "text": text}, stored
    if kind == "refusal" and role == "assistant":
        refusal = str(part.get("refusal", ""))
        return {"type": "text", "text": refusal}, {"type": "refusal", "refusal": refusal}
    if kind == "input_image" and role == "user":
        url = part.get("image_url")
        if part.get("file_id") is not None or not isinstance(url, str):
            raise _bad(
                f"'{where}.image_url' must be a URL or data URL (file ids are not supported)",
                f"{where}.image_url",
            )
        detail = part.get("detail") or "auto"
        chat = {"type": "image_url", "image_url": {"url": url, "detail": detail}}
        return chat, {"type": "input_image", "image_url": url, "detail": detail, "file_id": None}
    if kind == "input_file" and role == "user":
        data = part.get("file_data")
        if part.get("file_id") is not None or not isinstance(data, str):
            raise _bad(
                f"'{where}.file_data' must be the file's content (file ids and URLs are not "
                "supported)",
                f"{where}.file_data",
            )
        filename = part.get("filename")
        chat_file: dict[str, Any] = {"file_data": data}
        if isinstance(filename, str):
            chat_file["filename"] = filename
        stored = {"type": "input_file", "file_data": data, "filename": filename, "file_id": None}
        return {"type": "file", "file": chat_file}, stored
    allowed = (
        "output_text, refusal"
        if role == "assistant"
        else "input_text, input_image, input_file"
        if role == "user"
        else "input_text"
    )
    raise _bad(f"'{where}.type' must be one of {allowed} for a {role} message", f"{where}.type")


def check_tool_outputs(messages: list[dict[str, Any]]) -> None:
    """Every tool result must answer a call the conversation made, or the
    model server would refuse the whole conversation."""
    calls = {
        call.get("id")
        for message in messages
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or []
    }
    for message in messages:
        if message.get("role") == "tool" and message.get("tool_call_id") not in calls:
            raise _bad(
                f"no tool call found for function call output with call_id "
                f"'{message.get('tool_call_id')}'",
                "input",
            )


# ---------------------------------------------------------------------------
# Running responses


@dataclass(eq=False)
class _Live:
    id: str
    owner: str
    builder: ResponseBuilder
    conversation: list[dict[str, Any]]
    background: bool
    stored: bool
    log: EventLog = field(default_factory=EventLog)
    turn: RunningTurn = field(default_factory=RunningTurn)
    finished: trio.Event = field(default_factory=trio.Event)
    persisted: int = 0
    """Events up to here are in the store."""
    cancelled: bool = False
    """Cancelled through ``/cancel``: ends as ``cancelled``, not ``incomplete``."""
    slot_held: bool = False


class _FollowBody(ResponseBody):
    """An SSE response body following a response's event log; its end
    detaches the reader and, for a turn its client owns, cancels it."""

    def __init__(self, follower: LogFollower, on_close: Callable[[], None] | None) -> None:
        self._follower = follower
        self._on_close = on_close

    async def __aenter__(self) -> _FollowBody:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._follower.detach()
        if self._on_close is not None:
            self._on_close()

    def __aiter__(self) -> _FollowBody:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self._follower.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


def _json(body: Any, status: int = 200) -> Response:
    return Response(
        json.dumps(body, ensure_ascii=False), status=status, content_type="application/json"
    )


def _sse(body: ResponseBody | bytes) -> Response:
    response = Response(body, status=200, content_type="text/event-stream")
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"
    # Quart would cut a long stream after RESPONSE_TIMEOUT (DESIGN §7).
    response.timeout = None
    return response


def _owner() -> str:
    given = request.headers.get("Authorization", "")
    return owner_scope(given[7:] if given[:7].lower() == "bearer " else given)


def _not_found(response_id: str) -> APIError:
    return APIError(
        404,
        f"Response with id '{response_id}' not found.",
        param="response_id",
        code="response_not_found",
    )


class _Responses:
    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.live: dict[str, _Live] = {}

    @property
    def store(self) -> ResponseStore | None:
        store: ResponseStore | None = self.state.store
        return store

    def find_live(self, response_id: str, owner: str) -> _Live | None:
        live = self.live.get(response_id)
        return live if live is not None and live.owner == owner else None

    # -- create -------------------------------------------------------------

    async def create(self, body: Any) -> Response:
        req = parse_responses_request(body)
        state = self.state
        agent = state.agent
        api = agent.config.api_server
        owner = _owner()
        store = self.store
        if req.store and store is None:
            raise APIError(500, "the response store is not open", code="store_unavailable")
        conversation: list[dict[str, Any]] = []
        if req.previous_response_id is not None:
            previous = (
                await store.get(req.previous_response_id, owner) if store is not None else None
            )
            if previous is None:
                raise _bad(
                    f"Previous response with id '{req.previous_response_id}' not found.",
                    "previous_response_id",
                    code="previous_response_not_found",
                )
            if previous.status == "in_progress":
                raise _bad(
                    f"Previous response with id '{req.previous_response_id}' is still in "
                    "progress; wait for it to finish or cancel it",
                    "previous_response_id",
                    code="previous_response_in_progress",
                )
            conversation = list(previous.messages)
        conversation += req.messages
        check_tool_outputs(conversation)

        model = req.model or api.model_name
        builder = ResponseBuilder(
            new_response_id(),
            created_at=int(wall_clock()),
            model=model,
            echo=req.echo,
            clock=wall_clock,
        )
        live = _Live(
            builder.id, owner, builder, conversation, background=req.background, stored=req.store
        )
        live.log.extend(builder.start())
        kwargs: dict[str, Any] = {
            # Streamed upstream whenever someone may watch the events.
            "stream": agent.streams("api_server", True if req.stream or req.background else None),
            "client_tools": req.tools,
            "params": req.params,
            "model": req.model if (api.allow_model_override and req.model) else None,
            "system": req.system,
        }
        record = None
        if req.store:
            record = StoredResponse(
                id=builder.id,
                owner=owner,
                status="in_progress",
                created_at=builder.created_at,
                response=builder.snapshot(),
                messages=conversation,
                input_items=req.input_items,
                background=req.background,
            )
        state.slots.acquire()
        live.slot_held = True
        try:
            await state.nursery.start(partial(self._run, live, kwargs, record))
        finally:
            # Only when the runner never ran (it releases its own slot).
            self._release_slot(live)

        if req.stream:
            follower = LogFollower(
                live.log, keepalive=api.keepalive_interval, primary=not req.background
            )
            on_close = None if req.background else partial(live.turn.cancel, "client went away")
            return _sse(_FollowBody(follower, on_close))
        if req.background:
            return _json(builder.snapshot())
        try:
            await live.finished.wait()
        finally:
            live.turn.cancel("client went away")
        if builder.status == "failed":
            error = builder.error or {}
            raise APIError(
                error_status(builder.error_code),
                str(error.get("message") or "the model server failed"),
                code=builder.error_code,
            )
        return _json(builder.snapshot())

    def _release_slot(self, live: _Live) -> None:
        if live.slot_held:
            live.slot_held = False
            self.state.slots.release()

    async def _run(
        self,
        live: _Live,
        kwargs: dict[str, Any],
        record: StoredResponse | None,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """One response from its first store write to its last."""
        agent = self.state.agent
        turn = live.turn
        failure: str | None = None
        try:
            if record is not None:
                store = self.store
                if store is None:
                    raise APIError(500, "the response store is not open", code="store_unavailable")
                # Before started(): a failure here is the request's own error.
                await store.create(record)
                self.live[live.id] = live
        except BaseException:
            self._release_slot(live)
            turn.done.set()
            live.finished.set()
            raise
        try:
            with turn.scope:
                send, receive = trio.open_memory_channel[StreamEvent](
                    agent.config.agent.channel_size
                )
                task_status.started()
                async with trio.open_nursery() as outer:
                    if live.stored:
                        outer.start_soon(self._persist, live)
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(
                            partial(write_response_events, receive, live.builder, live.log)
                        )
                        turn.result = await agent.run_turn(live.conversation, send, **kwargs)
                    # What the persister has not written yet goes with the
                    # final write below.
                    outer.cancel_scope.cancel()
        except Exception as exc:
            # A bug in a tool or the agent fails this response, not the server.
            log.exception("response %s failed", live.id)
            failure = f"internal error: {type(exc).__name__}"
        finally:
            self._release_slot(live)
            with trio.move_on_after(FINALIZE_GRACE, shield=True):
                await self._finalize(live, failure)
            turn.done.set()
            self.live.pop(live.id, None)
            live.finished.set()

    async def _persist(self, live: _Live) -> None:
        store = self.store
        assert store is not None
        while True:
            await live.log.wait_beyond(live.persisted)
            batch = live.log.events[live.persisted :]
            if not batch:
                return
            try:
                await store.append_events(live.id, batch)
            except Exception:
                # The turn goes on; the final write tries these events again.
                log.exception("could not store events of response %s", live.id)
                return
            live.persisted += len(batch)

    async def _finalize(self, live: _Live, failure: str | None) -> None:
        builder = live.builder
        if not builder.ended:
            if failure is not None:
                live.log.extend(builder.fail(failure, "server_error"))
            elif live.cancelled:
                live.log.extend(builder.cancel())
            else:
                live.log.extend(builder.interrupt())
        live.log.close()
        store = self.store
        if not live.stored or store is None:
            return
        try:
            await store.finish(
                live.id,
                status=builder.status,
                response=builder.snapshot(),
                messages=live.conversation,
                events=live.log.events[live.persisted :],
            )
        except Exception:
            log.exception("could not record the end of response %s", live.id)

    # -- the other endpoints ------------------------------------------------

    async def retrieve(self, response_id: str) -> Response:
        owner = _owner()
        args = request.args
        unknown = sorted(
            set(args) - {"stream", "starting_after", "include", "include[]", "include_obfuscation"}
        )
        if unknown:
            raise _bad(f"unknown query parameter '{unknown[0]}'", unknown[0])
        if any(args.getlist("include")) or any(args.getlist("include[]")):
            raise _bad("'include' is not supported by this server", "include")
        stream = _query_bool(args.get("stream"), "stream")
        if _query_bool(args.get("include_obfuscation"), "include_obfuscation"):
            raise _bad("stream obfuscation is not supported", "include_obfuscation")
        after_text = args.get("starting_after")
        after = -1
        if after_text is not None:
            if not stream:
                raise _bad("'starting_after' is only allowed with 'stream=true'", "starting_after")
            try:
                after = int(after_text)
            except ValueError:
                raise _bad("'starting_after' must be an integer", "starting_after") from None
            if after < -1:
                raise _bad("'starting_after' must be -1 or more", "starting_after")

        live = self.find_live(response_id, owner)
        if live is not None:
            if not stream:
                return _json(live.builder.snapshot())
            keepalive = self.state.agent.config.api_server.keepalive_interval
            return _sse(_FollowBody(LogFollower(live.log, after=after, keepalive=keepalive), None))
        store = self.store
        row = await store.get(response_id, owner) if store is not None else None
        if row is None or store is None:
            raise _not_found(response_id)
        if not stream:
            return _json(row.response)
        events = await store.events_after(response_id, after)
        return _sse(b"".join(event.frame for event in events))

    async def delete(self, response_id: str) -> Response:
        owner = _owner()
        live = self.find_live(response_id, owner)
        if live is not None:
            live.turn.cancel("the response was deleted")
            with trio.move_on_after(STOP_WAIT):
                await live.finished.wait()
        store = self.store
        if store is None or not await store.delete(response_id, owner):
            raise _not_found(response_id)
        return _json({"id": response_id, "object": "response.deleted", "deleted": True})

    async def cancel(self, response_id: str) -> Response:
        owner = _owner()
        live = self.find_live(response_id, owner)
        if live is not None:
            if not live.background:
                raise _bad(
                    "Only responses created with 'background': true can be cancelled.",
                    "response_id",
                )
            live.cancelled = True
            live.turn.cancel("cancelled by the client")
            with trio.move_on_after(STOP_WAIT):
                await live.finished.wait()
            return _json(live.builder.snapshot())
        store = self.store
        row = await store.get(response_id, owner) if store is not None else None
        if row is None:
            raise _not_found(response_id)
        if not row.background:
            raise _bad(
                "Only responses created with 'background': true can be cancelled.", "response_id"
            )
        # Already over: cancelling again returns the final response.
        return _json(row.response)

    async def input_items(self, response_id: str) -> Response:
        owner = _owner()
        args = request.args
        unknown = sorted(set(args) - {"limit", "order", "after", "include", "include[]"})
        if unknown:
            raise _bad(f"unknown query parameter '{unknown[0]}'", unknown[0])
        if any(args.getlist("include")) or any(args.getlist("include[]")):
            raise _bad("'include' is not supported by this server", "include")
        try:
            limit = int(args.get("limit", "20"))
        except ValueError:
            raise _bad("'limit' must be an integer from 1 to 100", "limit") from None
        if not 1 <= limit <= 100:
            raise _bad("'limit' must be an integer from 1 to 100", "limit")
        order = args.get("order", "desc")
        if order not in ("asc", "desc"):
            raise _bad("'order' must be 'asc' or 'desc'", "order")
        store = self.store
        row = await store.get(response_id, owner) if store is not None else None
        if row is None:
            raise _not_found(response_id)
        items = list(row.input_items)
        if order == "desc":
            items.reverse()
        after = args.get("after")
        if after is not None:
            ids = [item.get("id") for item in items]
            if after not in ids:
                raise _bad(f"no input item with id '{after}' in this response", "after")
            items = items[ids.index(after) + 1 :]
        page = items[:limit]
        return _json(
            {
                "object": "list",
                "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": len(items) > limit,
            }
        )


def _query_bool(value: str | None, name: str) -> bool:
    if value is None:
        return False
    lowered = value.lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0", ""):
        return False
    raise _bad(f"'{name}' must be true or false", name)


def register_responses_routes(app: QuartTrio, state: ServerState) -> None:
    """Add the ``/v1/responses`` endpoints to ``app``."""
    responses = _Responses(state)

    @app.post("/v1/responses")
    async def create_response() -> Response:
        raw = await request.get_data(cache=False)
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise APIError(
                400, f"invalid JSON in request body: {exc}", code="invalid_json"
            ) from None
        return await responses.create(body)

    @app.get("/v1/responses/<response_id>")
    async def retrieve_response(response_id: str) -> Response:
        return await responses.retrieve(response_id)

    @app.delete("/v1/responses/<response_id>")
    async def delete_response(response_id: str) -> Response:
        return await responses.delete(response_id)

    @app.post("/v1/responses/<response_id>/cancel")
    async def cancel_response(response_id: str) -> Response:
        return await responses.cancel(response_id)

    @app.get("/v1/responses/<response_id>/input_items")
    async def list_input_items(response_id: str) -> Response:
        return await responses.input_items(response_id)
