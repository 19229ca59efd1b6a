"""Validation of ``POST /v1/chat/completions`` bodies (pure).

Fields the server uses or forwards as OpenAI documents them are checked
(type, and range where OpenAI gives one) with a 400 naming the field; what
the server cannot honour at all is refused the same way; every other field
(a sampler extension such as ``min_p``, a newer OpenAI field) is the model
server's business and handled by the ``api_server.extra_params`` policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...wire.messages import ChatAssistantMessage, ChatTool, Message
from ..parsing.forwarded import FORWARDED
from ..parsing.validation import (
    ExtraParams,
    a_bool,
    a_string,
    an_object,
    bad,
    check_fields,
    extra_params,
    join_system,
    optional_bool,
    optional_str,
    refuse_unsupported,
    request_object,
    role_of,
    stream_options,
)

__all__ = ["ChatRequest", "parse_chat_request"]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})

_USED = frozenset({"model", "messages", "stream", "stream_options", "tools"}) | set(FORWARDED)


@dataclass
class ChatRequest:
    model: str | None
    messages: list[Message]
    system: str | None
    stream: bool
    include_usage: bool
    params: dict[str, Any] = field(default_factory=dict)
    tools: list[ChatTool] = field(default_factory=list)


def parse_chat_request(body: Any, extra: ExtraParams = "pass") -> ChatRequest:
    """Validate a chat request; ``extra`` is the ``api_server.extra_params``
    policy for fields the server does not use."""
    body = request_object(body)
    model = optional_str(body, "model")
    stream = optional_bool(body, "stream", False)
    refuse_unsupported(body)
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
    check_fields(body, FORWARDED)
    params = {k: body[k] for k in FORWARDED if body.get(k) is not None}
    params.update(extra_params(body, _USED, extra))

    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad("'messages' must be a non-empty list of message objects", "messages")
    system_parts: list[str] = []
    conversation: list[Message] = []
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
            out: ChatAssistantMessage = {"role": "assistant", "content": content}
            if content is not None and not isinstance(content, str | list):
                raise bad(f"'{where}.content' must be a string, a list or null", f"{where}.content")
            if isinstance(content, list):
                out["content"] = _text_of(content, where)
            calls = message.get("tool_calls")
            if calls is not None:
                _check_tool_calls(calls, f"{where}.tool_calls")
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

    tools = _tools(body.get("tools"))
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
        at = f"{where}.content[{j}]"
        kind = part["type"]
        if kind == "text":
            a_string(part.get("text"), f"{at}.text")
        elif kind == "image_url":
            # Any JSON value until an_object has checked it.
            image: Any = part.get("image_url")
            an_object(image, f"{at}.image_url")
            a_string(image.get("url"), f"{at}.image_url.url")
        else:
            an_object(part.get(kind), f"{at}.{kind}")


def _tools(tools: Any) -> list[ChatTool]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise bad("'tools' must be a list", "tools", "invalid_type")
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
        check_fields(
            fn,
            {"description": a_string, "parameters": _schema, "strict": a_bool},
            f"tools[{i}].function.",
        )
    return tools


def _schema(value: Any, param: str) -> None:
    if not isinstance(value, dict):
        raise bad(f"'{param}' must be a JSON schema object", param, "invalid_type")


def _check_tool_calls(calls: Any, where: str) -> None:
    """An assistant message's tool calls, as the agent reads them back."""
    if not isinstance(calls, list):
        raise bad(f"'{where}' must be a list", where, "invalid_type")
    for j, call in enumerate(calls):
        at = f"{where}[{j}]"
        an_object(call, at)
        a_string(call.get("id"), f"{at}.id")
        fn = call.get("function")
        an_object(fn, f"{at}.function")
        a_string(fn.get("name"), f"{at}.function.name")
        a_string(fn.get("arguments"), f"{at}.function.arguments")
