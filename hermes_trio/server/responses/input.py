"""The ``input`` of a ``POST /v1/responses`` body (pure): its items as the
chat messages the agent continues from, and as the stored items
``GET /v1/responses/{id}/input_items`` lists.

Items without an id get one, so a listing can page by id. An
``item_reference`` names an item stored earlier (the Vercel AI SDK sends one
for every answer it already has); :func:`item_references` lists their ids and
:func:`resolve_references` puts the stored items in their place before the
input is parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict, cast

from ...wire.context import summary_message
from ...wire.mcp_items import approval_request_item, approval_response_item
from ...wire.messages import ChatTextPart, ChatToolCall, Message
from ...wire.responses_out import new_item_id
from ...wire.responses_types import (
    InputContent,
    InputItem,
    InputMessageItem,
    McpApprovalRequest,
    McpApprovalResponse,
    McpToolCall,
    ReasoningItem,
)
from ...wire.sealed import Sealer
from ..parsing.errors import APIError
from ..parsing.validation import bad, role_of

__all__ = [
    "MAX_ITEM_REFERENCES",
    "SealedInput",
    "approval_answers",
    "check_tool_outputs",
    "item_references",
    "open_sealed",
    "parse_input",
    "parse_input_items",
    "resolve_references",
]

_INPUT_ROLES = frozenset({"user", "assistant", "system", "developer"})

_Role = Literal["user", "assistant", "system", "developer"]


class _ChatImageURL(TypedDict):
    url: str
    detail: str


class _ChatImagePart(TypedDict):
    """An image part as a chat model takes it, with its ``detail``."""

    type: Literal["image_url"]
    image_url: _ChatImageURL


class _ChatFile(TypedDict):
    file_data: str
    filename: NotRequired[str]


class _ChatFilePart(TypedDict):
    type: Literal["file"]
    file: _ChatFile


_ChatPart = ChatTextPart | _ChatImagePart | _ChatFilePart

MAX_ITEM_REFERENCES = 1000
"""Most ``item_reference`` items one request may hold: each is a store
lookup; a client continuing a long conversation sends one per earlier
item, far fewer than this."""


def item_references(value: Any) -> list[str]:
    """The ids the ``item_reference`` items of an input name, in order; 400
    beyond :data:`MAX_ITEM_REFERENCES` of them."""
    if not isinstance(value, list):
        return []
    ids: list[str] = []
    for i, raw in enumerate(value):
        if isinstance(raw, dict) and raw.get("type") == "item_reference":
            ref = raw.get("id")
            if not isinstance(ref, str) or not ref:
                raise bad(f"'input[{i}].id' must be a non-empty string", f"input[{i}].id")
            ids.append(ref)
    if len(ids) > MAX_ITEM_REFERENCES:
        raise bad(
            f"'input' holds {len(ids)} item references; at most {MAX_ITEM_REFERENCES} are "
            "allowed in one request (continue with previous_response_id instead)",
            "input",
            code="too_many_item_references",
        )
    return ids


def resolve_references(value: Any, stored: Mapping[str, object]) -> Any:
    """The input with each ``item_reference`` replaced by the stored item it
    names; 400 naming the first reference to an item not in ``stored``."""
    if not isinstance(value, list):
        return value
    out: list[Any] = []
    for i, raw in enumerate(value):
        if isinstance(raw, dict) and raw.get("type") == "item_reference":
            ref = raw.get("id")
            item = stored.get(ref) if isinstance(ref, str) else None
            if item is None:
                raise _unknown_reference(ref, f"input[{i}]")
            out.append(item)
        else:
            out.append(raw)
    return out


def _unknown_reference(ref: Any, where: str) -> APIError:
    return bad(f"Item with id '{ref}' not found.", where, code="item_not_found")


@dataclass(frozen=True)
class SealedInput:
    """A ``compaction`` item of the input: its summary takes the place of
    ``messages[position]`` once opened (:func:`open_sealed`)."""

    where: str
    id: str
    content: str
    position: int


def parse_input(value: Any) -> tuple[list[Message], list[InputItem], list[str]]:
    """The input as chat messages, as stored items, and system text."""
    messages, items, system, _ = parse_input_items(value)
    return messages, items, system


def parse_input_items(
    value: Any,
) -> tuple[list[Message], list[InputItem], list[str], list[SealedInput]]:
    """The input as chat messages, as stored items, system text, and the
    ``compaction`` items still to be opened."""
    if isinstance(value, str):
        if not value:
            raise bad("'input' must not be empty", "input")
        item: InputMessageItem = {
            "id": new_item_id("msg"),
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [{"type": "input_text", "text": value}],
        }
        return [{"role": "user", "content": value}], [item], [], []
    if not isinstance(value, list) or not value:
        raise bad("'input' must be a string or a non-empty list of input items", "input")
    messages: list[Message] = []
    items: list[InputItem] = []
    system: list[str] = []
    sealed: list[SealedInput] = []
    for i, raw in enumerate(value):
        where = f"input[{i}]"
        if not isinstance(raw, dict):
            raise bad(f"'{where}' must be an object", where)
        kind = raw.get("type", "message")
        if kind == "message":
            _input_message(raw, where, messages, items, system)
        elif kind == "function_call":
            _input_function_call(raw, where, messages, items)
        elif kind == "function_call_output":
            call_id = raw.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise bad(f"'{where}.call_id' must be a non-empty string", f"{where}.call_id")
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
        elif kind == "mcp_approval_response":
            items.append(_approval_response(raw, where))
        elif kind in ("mcp_approval_request", "mcp_call"):
            # Given back from an earlier output (clients that resend the
            # whole output do): the stored conversation holds the call.
            items.append(_given_back(raw, where))
        elif kind == "compaction":
            sealed.append(_compaction(raw, where, len(messages)))
            # Stands in for the summary until it is opened.
            messages.append(summary_message(""))
            items.append({"type": "compaction", "id": sealed[-1].id, "encrypted_content": ""})
        elif kind == "item_reference":
            # Resolved before parsing when the store has the item.
            raise _unknown_reference(raw.get("id"), where)
        elif kind == "reasoning":
            # Reasoning given back from an earlier output: chat models take
            # no reasoning input, and their own reasoning is not needed to
            # continue. Kept in the input items as sent.
            given: ReasoningItem = cast(
                "ReasoningItem",
                {**raw, "id": _item_id(raw, "rs", where), "summary": raw.get("summary") or []},
            )
            items.append(given)
        else:
            raise bad(
                f"'{where}.type' {kind!r} is not supported (supported: message, function_call, "
                "function_call_output, mcp_approval_response, mcp_approval_request, mcp_call, "
                "reasoning, compaction, item_reference)",
                f"{where}.type",
            )
    if not messages and not approval_answers(items):
        raise bad(
            "'input' must contain at least one message, tool output or approval response", "input"
        )
    return messages, items, system, sealed


def _compaction(raw: dict[str, Any], where: str, position: int) -> SealedInput:
    item_id = raw.get("id")
    if not isinstance(item_id, str) or not item_id:
        raise bad(
            f"'{where}.id' must be the id the compaction item came with: its "
            "encrypted_content is sealed for that id",
            f"{where}.id",
        )
    content = raw.get("encrypted_content")
    if not isinstance(content, str) or not content:
        raise bad(
            f"'{where}.encrypted_content' must be a non-empty string", f"{where}.encrypted_content"
        )
    return SealedInput(where, item_id, content, position)


def open_sealed(
    sealer: Sealer, sealed: list[SealedInput], messages: list[Message], items: list[InputItem]
) -> None:
    """Put each ``compaction`` item's summary in its place in ``messages``
    (and its content in the stored ``items``); 400 naming the item whose
    content does not open: altered, or sealed by another install."""
    for entry in sealed:
        text = sealer.open(entry.id, entry.content)
        if text is None:
            raise bad(
                f"'{entry.where}.encrypted_content' could not be opened: the compaction item "
                "was altered, or it was made by another server (or for another item id)",
                f"{entry.where}.encrypted_content",
                code="invalid_encrypted_content",
            )
        messages[entry.position] = summary_message(text)
    by_id = {entry.id: entry.content for entry in sealed}
    for item in items:
        if item["type"] == "compaction" and item["id"] in by_id:
            item["encrypted_content"] = by_id[item["id"]]


def approval_answers(items: list[InputItem]) -> list[McpApprovalResponse]:
    """The ``mcp_approval_response`` items among parsed input items."""
    return [item for item in items if item["type"] == "mcp_approval_response"]


def _approval_response(raw: dict[str, Any], where: str) -> McpApprovalResponse:
    request_id = raw.get("approval_request_id")
    if not isinstance(request_id, str) or not request_id:
        raise bad(
            f"'{where}.approval_request_id' must be the id of an mcp_approval_request",
            f"{where}.approval_request_id",
        )
    approve = raw.get("approve")
    if not isinstance(approve, bool):
        raise bad(f"'{where}.approve' must be true or false", f"{where}.approve")
    reason = raw.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise bad(f"'{where}.reason' must be a string", f"{where}.reason")
    return approval_response_item(_item_id(raw, "mcpa", where), request_id, approve, reason)


def _given_back(raw: dict[str, Any], where: str) -> McpApprovalRequest | McpToolCall:
    """An ``mcp_approval_request`` or ``mcp_call`` item of an earlier
    output, kept in the input items as sent (it adds no message)."""
    for key in ("id", "server_label", "name", "arguments"):
        if not isinstance(raw.get(key), str):
            raise bad(f"'{where}.{key}' must be a string", f"{where}.{key}")
    if raw["type"] == "mcp_approval_request":
        return approval_request_item(
            raw["id"], raw["name"], raw["arguments"], server_label=raw["server_label"]
        )
    # Our own earlier item, given back: its fields the server reads are
    # checked above; the rest is stored as sent.
    return cast("McpToolCall", dict(raw))


def _item_id(raw: dict[str, Any], prefix: str, where: str) -> str:
    given = raw.get("id")
    if given is None:
        return new_item_id(prefix)
    if not isinstance(given, str) or not given:
        raise bad(f"'{where}.id' must be a non-empty string", f"{where}.id")
    return given


def _output_text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for j, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") not in ("input_text", "output_text"):
                raise bad(f"'{where}[{j}]' must be a text part", f"{where}[{j}]")
            texts.append(str(part.get("text", "")))
        return "".join(texts)
    raise bad(f"'{where}' must be a string or a list of text parts", where)


def _input_function_call(
    raw: dict[str, Any], where: str, messages: list[Message], items: list[InputItem]
) -> None:
    for key in ("call_id", "name", "arguments"):
        if not isinstance(raw.get(key), str):
            raise bad(f"'{where}.{key}' must be a string", f"{where}.{key}")
    call: ChatToolCall = {
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
    messages: list[Message],
    items: list[InputItem],
    system: list[str],
) -> None:
    # role_of accepts only the roles in _INPUT_ROLES.
    role = cast("_Role", role_of(raw, where, _INPUT_ROLES))
    content = raw.get("content")
    item_id = _item_id(raw, "msg", where)
    if isinstance(content, str):
        # Parts as a client may send them: each is checked below.
        parts: list[Any] = [
            {"type": "output_text" if role == "assistant" else "input_text", "text": content}
        ]
    elif isinstance(content, list) and content:
        parts = content
    else:
        raise bad(
            f"'{where}.content' must be a string or a non-empty list of content parts",
            f"{where}.content",
        )
    chat_parts: list[_ChatPart] = []
    stored_parts: list[InputContent] = []
    for j, part in enumerate(parts):
        chat_part, stored = _content_part(part, role, f"{where}.content[{j}]")
        chat_parts.append(chat_part)
        stored_parts.append(stored)
    texts = [p["text"] for p in chat_parts if p["type"] == "text"]
    texts_only = len(texts) == len(chat_parts)
    text = "".join(texts) if texts_only else ""
    if role in ("system", "developer"):
        if not texts_only:
            raise bad(f"'{where}.content' of a {role} message must be text", f"{where}.content")
        # Layered on the agent's system prompt for this turn, like
        # instructions.
        system.append(text)
    elif role == "assistant":
        if not texts_only:
            raise bad(f"'{where}.content' of an assistant message must be text", f"{where}.content")
        messages.append({"role": "assistant", "content": text})
    else:
        messages.append({"role": "user", "content": text if texts_only else chat_parts})
    item: InputMessageItem = {
        "id": item_id,
        "type": "message",
        "role": role,
        "status": "completed",
        "content": stored_parts,
    }
    items.append(item)


def _content_part(part: Any, role: str, where: str) -> tuple[_ChatPart, InputContent]:
    """One content part as a chat part and as a stored input item part."""
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in ("input_text", "output_text"):
        text = part.get("text")
        if not isinstance(text, str):
            raise bad(f"'{where}.text' must be a string", f"{where}.text")
        stored: InputContent
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
            raise bad(
                f"'{where}.image_url' must be a URL or data URL (file ids are not supported)",
                f"{where}.image_url",
            )
        detail = part.get("detail") or "auto"
        chat: _ChatImagePart = {"type": "image_url", "image_url": {"url": url, "detail": detail}}
        return chat, {"type": "input_image", "image_url": url, "detail": detail, "file_id": None}
    if kind == "input_file" and role == "user":
        data = part.get("file_data")
        if part.get("file_id") is not None or not isinstance(data, str):
            raise bad(
                f"'{where}.file_data' must be the file's content (file ids and URLs are not "
                "supported)",
                f"{where}.file_data",
            )
        filename = part.get("filename")
        chat_file: _ChatFile = {"file_data": data}
        if isinstance(filename, str):
            chat_file["filename"] = filename
        stored = {
            "type": "input_file",
            "file_data": data,
            "filename": filename,
            "file_id": None,
        }
        return {"type": "file", "file": chat_file}, stored
    allowed = (
        "output_text, refusal"
        if role == "assistant"
        else "input_text, input_image, input_file"
        if role == "user"
        else "input_text"
    )
    raise bad(f"'{where}.type' must be one of {allowed} for a {role} message", f"{where}.type")


def check_tool_outputs(messages: list[Message]) -> None:
    """Every tool result must answer a call the conversation made, or the
    model server would refuse the whole conversation."""
    calls = {
        call.get("id")
        for message in messages
        if message["role"] == "assistant"
        for call in message.get("tool_calls") or []
    }
    for message in messages:
        if message["role"] == "tool" and message.get("tool_call_id") not in calls:
            raise bad(
                f"no tool call found for function call output with call_id "
                f"'{message.get('tool_call_id')}'",
                "input",
            )
