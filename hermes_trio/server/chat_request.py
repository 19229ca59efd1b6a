"""Validation of ``POST /v1/chat/completions`` bodies (pure).

Every field the server cannot honour is refused with a 400 naming it, never
silently dropped; fields that only describe the caller are accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .validation import (
    bad,
    join_system,
    number,
    optional_bool,
    optional_str,
    positive_int,
    request_object,
    role_of,
    stream_options,
)

__all__ = ["ChatRequest", "parse_chat_request"]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
# Passed to the model server unchanged.
PASS_THROUGH = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "response_format",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning_effort",
        "logit_bias",
    }
)
# Describe the caller or ask for things that need nothing from us.
ACCEPTED = frozenset({"user", "metadata", "store", "service_tier", "stream_options"})
KNOWN = (
    PASS_THROUGH
    | ACCEPTED
    | {"model", "messages", "stream", "n", "tools", "logprobs", "top_logprobs", "modalities"}
)


@dataclass
class ChatRequest:
    model: str | None
    messages: list[dict[str, Any]]
    system: str | None
    stream: bool
    include_usage: bool
    params: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)


def parse_chat_request(body: Any) -> ChatRequest:
    body = request_object(body, KNOWN)
    model = optional_str(body, "model")
    stream = optional_bool(body, "stream", False)
    n = body.get("n")
    if n is not None and n != 1:
        raise bad("'n' must be 1: this server returns one choice per request", "n")
    if body.get("logprobs") or body.get("top_logprobs"):
        key = "logprobs" if body.get("logprobs") else "top_logprobs"
        raise bad(f"'{key}' is not supported by this server", key)
    modalities = body.get("modalities")
    if modalities is not None and modalities != ["text"]:
        raise bad("only the 'text' modality is supported", "modalities")
    include_usage = False
    options = stream_options(body, stream)
    if options is not None:
        value = options.get("include_usage", False)
        if not isinstance(value, bool):
            raise bad(
                "'stream_options.include_usage' must be true or false",
                "stream_options.include_usage",
            )
        include_usage = value
    number(body, "temperature", 0, 2)
    number(body, "top_p", 0, 1)
    number(body, "presence_penalty", -2, 2)
    number(body, "frequency_penalty", -2, 2)
    positive_int(body, "max_tokens")
    positive_int(body, "max_completion_tokens")
    stop = body.get("stop")
    if stop is not None and not (
        isinstance(stop, str)
        or (isinstance(stop, list) and len(stop) <= 4 and all(isinstance(s, str) for s in stop))
    ):
        raise bad("'stop' must be a string or a list of at most 4 strings", "stop")

    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad("'messages' must be a non-empty list of message objects", "messages")
    system_parts: list[str] = []
    conversation: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise bad(f"'{where}' must be an object", where)
        role = role_of(message, where, ROLES)
        content = message.get("content")
        if role in ("system", "developer"):
            system_parts.append(_text_of(content, where))
            continue
        if role == "tool":
            if not isinstance(message.get("tool_call_id"), str):
                raise bad(
                    f"'{where}.tool_call_id' is required for tool messages", f"{where}.tool_call_id"
                )
            conversation.append(
                {
                    "role": "tool",
                    "tool_call_id": message["tool_call_id"],
                    "content": _text_of(content, where),
                }
            )
            continue
        if role == "assistant":
            out: dict[str, Any] = {"role": "assistant", "content": content}
            if content is not None and not isinstance(content, str | list):
                raise bad(f"'{where}.content' must be a string, a list or null", f"{where}.content")
            if isinstance(content, list):
                out["content"] = _text_of(content, where)
            calls = message.get("tool_calls")
            if calls is not None:
                if not isinstance(calls, list):
                    raise bad(f"'{where}.tool_calls' must be a list", f"{where}.tool_calls")
                out["tool_calls"] = calls
            conversation.append(out)
            continue
        if not isinstance(content, str | list):
            raise bad(
                f"'{where}.content' must be a string or a list of content parts", f"{where}.content"
            )
        if isinstance(content, list):
            _check_parts(content, where)
        conversation.append({"role": "user", "content": content})
    if not conversation:
        raise bad("'messages' must contain at least one user message", "messages")

    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise bad("'tools' must be a list", "tools")
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(tool, dict)
            or tool.get("type") != "function"
            or not isinstance(fn, dict)
            or not isinstance(fn.get("name"), str)
        ):
            raise bad(
                f'\'tools[{i}]\' must be {{"type": "function", "function": {{"name": ...}}}}',
                f"tools[{i}]",
            )
    params = {k: body[k] for k in PASS_THROUGH if k in body and body[k] is not None}
    if "tool_choice" in params and not tools:
        raise bad("'tool_choice' needs 'tools'", "tool_choice")
    return ChatRequest(
        model=model,
        messages=conversation,
        system=join_system(system_parts),
        stream=stream,
        include_usage=include_usage,
        params=params,
        tools=tools,
    )


def _text_of(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        _check_parts(content, where, text_only=True)
        return "".join(part.get("text", "") for part in content)
    raise bad(f"'{where}.content' must be a string or a list of text parts", f"{where}.content")


def _check_parts(parts: list[Any], where: str, *, text_only: bool = False) -> None:
    allowed = {"text"} if text_only else {"text", "image_url", "input_audio", "file"}
    for j, part in enumerate(parts):
        if not isinstance(part, dict) or part.get("type") not in allowed:
            kinds = ", ".join(sorted(allowed))
            raise bad(
                f"'{where}.content[{j}]' must be a content part of type {kinds}",
                f"{where}.content[{j}]",
            )
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise bad(f"'{where}.content[{j}].text' must be a string", f"{where}.content[{j}].text")
