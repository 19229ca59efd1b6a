"""Responses API upstreams: fold a streamed (or whole) Responses object into the
same :class:`ChunkDelta`/:class:`AssistantMessage` the Chat Completions path
produces, and translate chat-shaped requests into Responses input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from hermes_trio.events import Usage
from hermes_trio.wire.chat_chunks import (
    AssistantMessage,
    ChunkDelta,
    ToolCall,
    ToolCallArgs,
    ToolCallStart,
)
from hermes_trio.wire.messages import ChatTool, Message
from hermes_trio.wire.responses_types import FunctionToolParam, InputImageParam, InputItemParam
from hermes_trio.wire.upstream_fields import (
    ProviderError,
    chunk_error,
    fallback_id,
    provider_error,
    quote,
    usage_from,
)
from hermes_trio.wire.upstream_json import loads_upstream

__all__ = [
    "ResponsesStreamAccumulator",
    "chat_messages_to_responses_input",
    "chat_tools_to_responses_tools",
    "message_from_response",
]

_EMPTY = ChunkDelta()


def _key(value: object) -> str | int | None:
    """An item id or output index usable as a set member, else None."""
    if isinstance(value, str | int) and not isinstance(value, bool):
        return value
    return None


def _usage_from_responses(usage: object) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    return usage_from(usage, "input", "output")


def _incomplete_reason(response: dict[str, object]) -> str:
    details = response.get("incomplete_details")
    if isinstance(details, dict) and details.get("reason") == "content_filter":
        return "content_filter"
    return "length"


def _failure(response: object, raw: object) -> ProviderError:
    error = response.get("error") if isinstance(response, dict) else None
    if error is None:
        return ProviderError("the model server reported the response as failed", raw=raw)
    return provider_error(error, raw)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _message_text(item: dict[str, object]) -> str:
    parts = item.get("content")
    if not isinstance(parts, list):
        return _str(parts)
    return "".join(
        _str(part.get("text")) or _str(part.get("refusal"))
        for part in parts
        if isinstance(part, dict) and part.get("type") in ("output_text", "refusal", "text")
    )


def _reasoning_text(item: dict[str, object]) -> str:
    texts: list[str] = []
    for key in ("summary", "content"):
        parts = item.get(key)
        if isinstance(parts, list):
            texts.extend(
                part["text"]
                for part in parts
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
        if texts:
            # The summary is what the model means for people to read; the raw
            # reasoning content only stands in when there is no summary.
            break
    return "\n\n".join(texts)


class _Slot:
    __slots__ = ("args", "call_id", "name")

    def __init__(self, call_id: str, name: str) -> None:
        self.call_id = call_id
        self.name = name
        self.args: list[str] = []


class ResponsesStreamAccumulator:
    """Folds Responses API stream events into an :class:`AssistantMessage`.

    ``event_type`` is the SSE ``event:`` field; when it is absent (``"message"``)
    the ``type`` member of the payload names the event. Unknown events are
    ignored, so new event types from the server cost nothing.
    """

    def __init__(self) -> None:
        self.model: str | None = None
        self.id: str | None = None
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._slots: list[_Slot] = []
        self._slot_by_output: dict[int, int] = {}
        self._slot_by_item: dict[str, int] = {}
        # Items (by id or output index) whose text arrived as deltas, so their
        # ``output_item.done`` must not add it again.
        self._texted: set[str | int | None] = set()
        self._untracked_text = False
        self._finish_reason: str | None = None
        self._usage: Usage | None = None
        self._done = False

    @property
    def usage(self) -> Usage | None:
        return self._usage

    @property
    def done(self) -> bool:
        return self._done

    def feed_json(self, event_type: str, raw: str) -> ChunkDelta:
        try:
            data = loads_upstream(raw)
        except ValueError as exc:
            raise chunk_error(f"event data is not valid JSON ({exc})", raw) from None
        return self.feed_event(event_type, data)

    def feed_event(self, event_type: str, data: object) -> ChunkDelta:
        """Fold one event; ``data`` is its JSON as the server sent it (any
        value, each member checked before use)."""
        if not isinstance(data, dict):
            raise chunk_error("event data is not a JSON object", data)
        if not event_type or event_type == "message":
            event_type = _str(data.get("type"))
        handler = _HANDLERS.get(event_type)
        if handler is None:
            return _EMPTY
        return handler(self, data)

    def result(self) -> AssistantMessage:
        return AssistantMessage(
            content="".join(self._content),
            reasoning="".join(self._reasoning),
            tool_calls=tuple(
                ToolCall(slot.call_id or fallback_id(n), slot.name, "".join(slot.args))
                for n, slot in enumerate(self._slots)
            ),
            finish_reason=self._finish_reason,
        )

    # -- event handlers ------------------------------------------------------

    def _on_created(self, data: dict[str, object]) -> ChunkDelta:
        response = data.get("response")
        if isinstance(response, dict):
            self._note_response(response)
        return _EMPTY

    def _note_response(self, response: dict[str, object]) -> None:
        model = response.get("model")
        if isinstance(model, str) and model:
            self.model = model
        response_id = response.get("id")
        if isinstance(response_id, str) and response_id:
            self.id = response_id

    def _on_text_delta(self, data: dict[str, object]) -> ChunkDelta:
        text = _str(data.get("delta"))
        if not text:
            return _EMPTY
        keys = {_key(data.get("item_id")), _key(data.get("output_index"))} - {None}
        if keys:
            self._texted.update(keys)
        else:
            self._untracked_text = True
        self._content.append(text)
        return ChunkDelta(content=text)

    def _on_reasoning_delta(self, data: dict[str, object]) -> ChunkDelta:
        text = _str(data.get("delta"))
        if not text:
            return _EMPTY
        self._reasoning.append(text)
        return ChunkDelta(reasoning=text)

    def _on_summary_part_added(self, data: dict[str, object]) -> ChunkDelta:
        # Summary parts are separate paragraphs; without a break they run together.
        if self._reasoning and not self._reasoning[-1].endswith("\n"):
            self._reasoning.append("\n\n")
            return ChunkDelta(reasoning="\n\n")
        return _EMPTY

    def _on_item_added(self, data: dict[str, object]) -> ChunkDelta:
        item = data.get("item")
        if not isinstance(item, dict) or item.get("type") != "function_call":
            return _EMPTY
        out: list[ToolCallStart | ToolCallArgs] = []
        slot_no = self._slot_for(data, item, out)
        self._take_args(slot_no, _str(item.get("arguments")), out)
        return ChunkDelta(tool_calls=tuple(out))

    def _on_args_delta(self, data: dict[str, object]) -> ChunkDelta:
        out: list[ToolCallStart | ToolCallArgs] = []
        slot_no = self._slot_for(data, None, out)
        text = _str(data.get("delta"))
        if text:
            self._slots[slot_no].args.append(text)
            out.append(ToolCallArgs(slot_no, text))
        return ChunkDelta(tool_calls=tuple(out)) if out else _EMPTY

    def _on_args_done(self, data: dict[str, object]) -> ChunkDelta:
        out: list[ToolCallStart | ToolCallArgs] = []
        slot_no = self._slot_for(data, None, out)
        self._take_args(slot_no, _str(data.get("arguments")), out)
        return ChunkDelta(tool_calls=tuple(out)) if out else _EMPTY

    def _on_item_done(self, data: dict[str, object]) -> ChunkDelta:
        item = data.get("item")
        if not isinstance(item, dict):
            return _EMPTY
        kind = item.get("type")
        if kind == "function_call":
            out: list[ToolCallStart | ToolCallArgs] = []
            slot_no = self._slot_for(data, item, out)
            self._take_args(slot_no, _str(item.get("arguments")), out)
            return ChunkDelta(tool_calls=tuple(out)) if out else _EMPTY
        if kind == "message":
            # A server that skipped the text deltas still sends the whole item.
            if (
                self._untracked_text
                or _key(item.get("id")) in self._texted
                or _key(data.get("output_index")) in self._texted
            ):
                return _EMPTY
            text = _message_text(item)
            if text:
                self._content.append(text)
                return ChunkDelta(content=text)
        return _EMPTY

    def _on_completed(self, data: dict[str, object]) -> ChunkDelta:
        self._done = True
        response = data.get("response")
        delta = _EMPTY
        if isinstance(response, dict):
            self._note_response(response)
            self._usage = _usage_from_responses(response.get("usage")) or self._usage
            if not (self._content or self._reasoning or self._slots):
                delta = self._adopt_output(response)
        self._finish_reason = "tool_calls" if self._slots else "stop"
        return ChunkDelta(delta.content, delta.reasoning, delta.tool_calls, self._finish_reason)

    def _on_incomplete(self, data: dict[str, object]) -> ChunkDelta:
        self._done = True
        response = data.get("response")
        self._finish_reason = "length"
        if isinstance(response, dict):
            self._note_response(response)
            self._usage = _usage_from_responses(response.get("usage")) or self._usage
            self._finish_reason = _incomplete_reason(response)
        return ChunkDelta(finish_reason=self._finish_reason)

    def _on_failed(self, data: dict[str, object]) -> ChunkDelta:
        self._done = True
        raise _failure(data.get("response"), data)

    def _on_error(self, data: dict[str, object]) -> ChunkDelta:
        # The error event carries message/code/type at top level; some servers
        # nest them under "error" instead.
        nested = data.get("error")
        raise provider_error(nested if nested is not None else data, data)

    # -- helpers -------------------------------------------------------------

    def _slot_for(
        self,
        data: dict[str, object],
        item: dict[str, object] | None,
        out: list[ToolCallStart | ToolCallArgs],
    ) -> int:
        """The slot of the function call an event is about, created on first sight."""
        output_index = data.get("output_index")
        if isinstance(output_index, bool) or not isinstance(output_index, int):
            output_index = None
        item_id = item.get("id") if item is not None else data.get("item_id")
        item_id = item_id if isinstance(item_id, str) and item_id else None

        slot_no = None
        if output_index is not None:
            slot_no = self._slot_by_output.get(output_index)
        if slot_no is None and item_id is not None:
            slot_no = self._slot_by_item.get(item_id)
        if slot_no is None and output_index is None and item_id is None and self._slots:
            # Nothing says which call this is about: the one in progress.
            slot_no = len(self._slots) - 1
        if slot_no is None:
            call_id = _str(item.get("call_id")) if item is not None else ""
            name = _str(item.get("name")) if item is not None else ""
            slot_no = len(self._slots)
            self._slots.append(_Slot(call_id, name))
            out.append(ToolCallStart(slot_no, call_id or fallback_id(slot_no), name))
        elif item is not None:
            slot = self._slots[slot_no]
            slot.call_id = slot.call_id or _str(item.get("call_id"))
            slot.name = slot.name or _str(item.get("name"))
        if output_index is not None:
            self._slot_by_output.setdefault(output_index, slot_no)
        if item_id is not None:
            self._slot_by_item.setdefault(item_id, slot_no)
        return slot_no

    def _take_args(self, slot_no: int, text: str, out: list[ToolCallStart | ToolCallArgs]) -> None:
        """Use complete arguments text only if no deltas delivered it already."""
        slot = self._slots[slot_no]
        if text and not slot.args:
            slot.args.append(text)
            out.append(ToolCallArgs(slot_no, text))

    def _adopt_output(self, response: dict[str, object]) -> ChunkDelta:
        """Take the final output whole, for servers that stream no deltas at all."""
        message, _ = message_from_response(response)
        calls: list[ToolCallStart | ToolCallArgs] = []
        for call in message.tool_calls:
            slot_no = len(self._slots)
            slot = _Slot(call.id, call.name)
            self._slots.append(slot)
            calls.append(ToolCallStart(slot_no, call.id, call.name))
            if call.arguments:
                slot.args.append(call.arguments)
                calls.append(ToolCallArgs(slot_no, call.arguments))
        if message.content:
            self._content.append(message.content)
        if message.reasoning:
            self._reasoning.append(message.reasoning)
        return ChunkDelta(message.content, message.reasoning, tuple(calls))


_Handler = Callable[[ResponsesStreamAccumulator, dict[str, object]], ChunkDelta]
_A = ResponsesStreamAccumulator
_HANDLERS: dict[str, _Handler] = {
    "response.created": _A._on_created,
    "response.in_progress": _A._on_created,
    "response.output_text.delta": _A._on_text_delta,
    "response.refusal.delta": _A._on_text_delta,
    "response.reasoning_summary_text.delta": _A._on_reasoning_delta,
    "response.reasoning_text.delta": _A._on_reasoning_delta,
    "response.reasoning_summary_part.added": _A._on_summary_part_added,
    "response.output_item.added": _A._on_item_added,
    "response.function_call_arguments.delta": _A._on_args_delta,
    "response.function_call_arguments.done": _A._on_args_done,
    "response.output_item.done": _A._on_item_done,
    "response.completed": _A._on_completed,
    "response.incomplete": _A._on_incomplete,
    "response.failed": _A._on_failed,
    "error": _A._on_error,
}
del _A


def message_from_response(body: object) -> tuple[AssistantMessage, Usage | None]:
    """Read a non-streaming Responses object (the server's JSON, each member
    checked before use) into the streaming result types."""
    if not isinstance(body, dict):
        raise chunk_error("response is not a JSON object", body)
    if body.get("error") is not None or body.get("status") == "failed":
        raise _failure(body, body)
    output = body.get("output")
    if output is None:
        output = []
    if not isinstance(output, list):
        raise chunk_error("response output is not a list", body)
    content: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for item in output:
        if not isinstance(item, dict):
            raise chunk_error("output item is not an object", body)
        kind = item.get("type")
        if kind == "message":
            content.append(_message_text(item))
        elif kind == "reasoning":
            text = _reasoning_text(item)
            if text:
                reasoning.append(text)
        elif kind == "function_call":
            calls.append(
                ToolCall(
                    _str(item.get("call_id")) or fallback_id(len(calls)),
                    _str(item.get("name")),
                    _str(item.get("arguments")),
                )
            )
    if body.get("status") == "incomplete":
        finish = _incomplete_reason(body)
    else:
        finish = "tool_calls" if calls else "stop"
    message = AssistantMessage("".join(content), "\n\n".join(reasoning), tuple(calls), finish)
    return message, _usage_from_responses(body.get("usage"))


# -- requests: chat shape -> Responses shape --------------------------------


def _flat_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return "" if content is None else quote(content)


def _input_content(content: object, role: str) -> str | list[Any]:
    """Chat content parts -> Responses content parts (strings pass as they are)."""
    if not isinstance(content, list):
        return _flat_text(content)
    text_type = "output_text" if role == "assistant" else "input_text"
    parts: list[Any] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            parts.append({"type": text_type, "text": _str(part.get("text"))})
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            detail = image.get("detail") if isinstance(image, dict) else None
            converted: InputImageParam = {
                "type": "input_image",
                "image_url": url,
                "detail": detail or "auto",
            }
            parts.append(converted)
        else:
            parts.append(part)
    return parts


def chat_messages_to_responses_input(
    messages: Sequence[Message],
) -> tuple[str | None, list[InputItemParam]]:
    """Chat ``messages`` -> ``(instructions, input)`` for a Responses request.

    Leading system/developer messages become ``instructions``; later ones stay
    in place as messages, since their position matters to the model.
    """
    instructions: list[str] = []
    items: list[InputItemParam] = []
    leading = True
    for entry in messages:
        # Read defensively: a conversation may come from an older store.
        message = cast("Mapping[str, Any]", entry)
        role = _str(message.get("role"))
        if role in ("system", "developer") and leading:
            instructions.append(_flat_text(message.get("content")))
            continue
        leading = False
        if role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": _str(message.get("tool_call_id")),
                    "output": _flat_text(message.get("content")),
                }
            )
        elif role == "assistant":
            content = message.get("content")
            if content:
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": _input_content(content, role),
                    }
                )
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                items.append(
                    {
                        "type": "function_call",
                        "call_id": _str(call.get("id")),
                        "name": _str(function.get("name")),
                        "arguments": _str(function.get("arguments")),
                    }
                )
        else:
            items.append(
                {
                    "type": "message",
                    "role": role or "user",
                    "content": _input_content(message.get("content"), role),
                }
            )
    return ("\n\n".join(instructions) if instructions else None), items


def chat_tools_to_responses_tools(
    tools: Sequence[ChatTool],
) -> list[ChatTool | FunctionToolParam]:
    """Chat tool definitions (nested ``function``) -> Responses ones (flat)."""
    converted: list[ChatTool | FunctionToolParam] = []
    for entry in tools:
        # Read defensively: a caller may pass flat or built-in tools too.
        function = entry.get("function")
        if entry.get("type") != "function" or not isinstance(function, dict):
            # Already flat, or a built-in tool type: pass it through untouched.
            converted.append(entry)
            continue
        flat: FunctionToolParam = {"type": "function", "name": function.get("name")}
        if "description" in function:
            flat["description"] = function["description"]
        if "parameters" in function:
            flat["parameters"] = function["parameters"]
        if "strict" in function:
            flat["strict"] = function["strict"]
        converted.append(flat)
    return converted
