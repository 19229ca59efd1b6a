"""Chat Completions streaming: fold ``chat.completion.chunk`` objects into one
assistant message.

The accumulator is lenient where real servers disagree (missing tool-call
``index``, reused indices, ``reasoning`` vs ``reasoning_content``, list-shaped
content) and strict where a chunk is plainly not a chunk: then it raises
:class:`ChunkError` quoting what it got, so a log line shows the culprit.
Any value in any field (nested a thousand deep, a number no JSON encoder
takes back, a lone surrogate) ends as a result or a ``ChunkError``, and what
it passes on can be encoded again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hermes_trio.events import Usage
from hermes_trio.wire.messages import ChatAssistantMessage, ChatToolCall
from hermes_trio.wire.upstream_fields import (
    chunk_error,
    fallback_id,
    provider_error,
    usage_from,
)
from hermes_trio.wire.upstream_json import loads_upstream

__all__ = [
    "AssistantMessage",
    "ChatChunkAccumulator",
    "ChunkDelta",
    "ToolCall",
    "ToolCallArgs",
    "ToolCallStart",
    "merge_deltas",
    "message_from_completion",
]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A complete tool call; ``arguments`` is the raw JSON text as the model wrote it."""

    id: str
    name: str
    arguments: str
    type: str = "function"

    def to_message(self) -> ChatToolCall:
        return {
            "id": self.id,
            "type": self.type,
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A tool-call slot appeared; ``slot`` is its position in the final list.

    If the server sent no id with the first fragment, ``id`` is a stand-in
    (``call_<slot>``); an id arriving later replaces it in :meth:`result`.
    """

    slot: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallArgs:
    """A fragment of a slot's arguments text."""

    slot: int
    text: str


@dataclass(frozen=True, slots=True)
class ChunkDelta:
    """What one chunk (or Responses event) added. ``tokens``: how many of
    the model's deltas with content it joins (see :func:`merge_deltas`)."""

    content: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCallStart | ToolCallArgs, ...] = ()
    finish_reason: str | None = None
    tokens: int = 1


def merge_deltas(deltas: list[ChunkDelta]) -> ChunkDelta:
    """Several deltas that arrived together, as one (order kept per field)."""
    if len(deltas) == 1:
        return deltas[0]
    finish = None
    for delta in deltas:
        finish = delta.finish_reason or finish
    return ChunkDelta(
        "".join(d.content for d in deltas),
        "".join(d.reasoning for d in deltas),
        tuple(call for d in deltas for call in d.tool_calls),
        finish,
        # The model's tokens, not the reads: what waits for N tokens
        # (the message editor's min_tokens) must not depend on how the
        # bytes were cut.
        sum(d.tokens for d in deltas if d.content),
    )


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """The accumulated result of one model call."""

    content: str
    reasoning: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None

    def to_message(self) -> ChatAssistantMessage:
        """The OpenAI ``assistant`` message to append to the conversation."""
        message: ChatAssistantMessage = {
            "role": "assistant",
            # OpenAI's own shape: a pure tool-call turn has content null.
            "content": self.content if self.content or not self.tool_calls else None,
        }
        if self.tool_calls:
            message["tool_calls"] = [call.to_message() for call in self.tool_calls]
        return message


_EMPTY = ChunkDelta()


def _text(content: object, chunk: object) -> str:
    """Content as text: a string, null, or a list of ``{"type": "text"}`` parts."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    raise chunk_error("content is neither a string nor a list of parts", chunk)


def _reasoning(message: Mapping[str, object]) -> str:
    # Some servers send the same text under both names; take one, never both.
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _arguments(value: object, chunk: object) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    # A few servers send already-parsed arguments; keep the wire form JSON text.
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        raise chunk_error("tool call arguments are nested too deep", chunk) from None


class _Slot:
    __slots__ = ("args", "given_id", "name", "type")

    def __init__(self, given_id: str, name: str, type_: str) -> None:
        self.given_id = given_id
        self.name = name
        self.type = type_
        self.args: list[str] = []


class ChatChunkAccumulator:
    """Folds streamed ``chat.completion.chunk`` objects into an :class:`AssistantMessage`.

    Feed every SSE ``data:`` payload except ``[DONE]``; each call returns the
    :class:`ChunkDelta` that chunk added. Only choice 0 is followed.
    """

    def __init__(self) -> None:
        self.model: str | None = None
        self.id: str | None = None
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._slots: list[_Slot] = []
        self._slot_by_index: dict[int, int] = {}
        self._last_index: int | None = None
        self._finish_reason: str | None = None
        self._usage: Usage | None = None

    @property
    def usage(self) -> Usage | None:
        return self._usage

    def feed_json(self, raw: str) -> ChunkDelta:
        try:
            chunk = loads_upstream(raw)
        except ValueError as exc:
            raise chunk_error(f"chunk is not valid JSON ({exc})", raw) from None
        return self.feed(chunk)

    def feed(self, chunk: object) -> ChunkDelta:
        """One parsed chunk, as the model server sent it (any JSON value)."""
        if not isinstance(chunk, dict):
            raise chunk_error("chunk is not a JSON object", chunk)
        error = chunk.get("error")
        if error is not None:
            raise provider_error(error, chunk)
        model = chunk.get("model")
        if isinstance(model, str) and model:
            self.model = model
        chunk_id = chunk.get("id")
        if isinstance(chunk_id, str) and chunk_id:
            self.id = chunk_id
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = usage_from(usage)

        choices = chunk.get("choices")
        if choices is None:
            return _EMPTY
        if not isinstance(choices, list):
            raise chunk_error("choices is not a list", chunk)
        choice = _choice_zero(choices, chunk)
        if choice is None:
            return _EMPTY
        delta = choice.get("delta")
        if delta is None:
            delta = {}
        elif not isinstance(delta, dict):
            raise chunk_error("delta is not an object", chunk)

        content = _text(delta.get("content"), chunk)
        if content:
            self._content.append(content)
        reasoning = _reasoning(delta)
        if reasoning:
            self._reasoning.append(reasoning)
        calls: tuple[ToolCallStart | ToolCallArgs, ...] = ()
        fragments = delta.get("tool_calls")
        if fragments is not None:
            if not isinstance(fragments, list):
                raise chunk_error("tool_calls is not a list", chunk)
            calls = self._merge_tool_calls(fragments, chunk)
        finish = choice.get("finish_reason")
        if isinstance(finish, str) and finish:
            self._finish_reason = finish
        else:
            finish = None
        if not (content or reasoning or calls or finish):
            return _EMPTY
        return ChunkDelta(content, reasoning, calls, finish)

    def _merge_tool_calls(
        self, fragments: list[Any], chunk: object
    ) -> tuple[ToolCallStart | ToolCallArgs, ...]:
        out: list[ToolCallStart | ToolCallArgs] = []
        for fragment in fragments:
            if not isinstance(fragment, dict):
                raise chunk_error("tool call fragment is not an object", chunk)
            index = fragment.get("index")
            if not isinstance(index, int) or isinstance(index, bool):
                # Servers that omit the index continue the previous call.
                index = self._last_index if self._last_index is not None else 0
            self._last_index = index
            function = fragment.get("function")
            if function is None:
                function = {}
            elif not isinstance(function, dict):
                raise chunk_error("tool call function is not an object", chunk)
            given_id = fragment.get("id")
            given_id = given_id if isinstance(given_id, str) else ""
            name = function.get("name")
            name = name if isinstance(name, str) else ""

            slot_no = self._slot_by_index.get(index)
            slot = self._slots[slot_no] if slot_no is not None else None
            if slot is None or (given_id and slot.given_id and given_id != slot.given_id):
                # A new index, or a server that reuses index 0 for every
                # parallel call but gives each its own id.
                type_ = fragment.get("type")
                slot = _Slot(given_id, name, type_ if isinstance(type_, str) else "function")
                slot_no = len(self._slots)
                self._slots.append(slot)
                self._slot_by_index[index] = slot_no
                out.append(ToolCallStart(slot_no, given_id or fallback_id(slot_no), name))
            else:
                # First-fragment fields occasionally arrive late; take them
                # then, but never concatenate names that some servers repeat.
                if given_id and not slot.given_id:
                    slot.given_id = given_id
                if name and not slot.name:
                    slot.name = name
            assert slot_no is not None
            args = _arguments(function.get("arguments"), chunk)
            if args:
                slot.args.append(args)
                out.append(ToolCallArgs(slot_no, args))
        return tuple(out)

    def result(self) -> AssistantMessage:
        return AssistantMessage(
            content="".join(self._content),
            reasoning="".join(self._reasoning),
            tool_calls=tuple(
                ToolCall(slot.given_id or fallback_id(n), slot.name, "".join(slot.args), slot.type)
                for n, slot in enumerate(self._slots)
            ),
            finish_reason=self._finish_reason,
        )


def _choice_zero(choices: list[Any], chunk: object) -> dict[str, object] | None:
    for choice in choices:
        if not isinstance(choice, dict):
            raise chunk_error("choice is not an object", chunk)
        index = choice.get("index", 0)
        if index == 0 or index is None:
            return choice
    return None


def message_from_completion(body: object) -> tuple[AssistantMessage, Usage | None]:
    """Read a non-streaming ``chat.completion`` body into the streaming result types."""
    if not isinstance(body, dict):
        raise chunk_error("completion is not a JSON object", body)
    error = body.get("error")
    if error is not None:
        raise provider_error(error, body)
    choices = body.get("choices")
    if not isinstance(choices, list):
        raise chunk_error("completion has no choices list", body)
    choice = _choice_zero(choices, body)
    if choice is None:
        raise chunk_error("completion has no choice 0", body)
    message = choice.get("message")
    if not isinstance(message, dict):
        raise chunk_error("choice has no message object", body)

    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise chunk_error("tool_calls is not a list", body)
    calls = []
    for n, call in enumerate(raw_calls):
        if not isinstance(call, dict):
            raise chunk_error("tool call is not an object", body)
        function = call.get("function") or {}
        if not isinstance(function, dict):
            raise chunk_error("tool call function is not an object", body)
        call_id = call.get("id")
        name = function.get("name")
        type_ = call.get("type")
        calls.append(
            ToolCall(
                id=call_id if isinstance(call_id, str) and call_id else fallback_id(n),
                name=name if isinstance(name, str) else "",
                arguments=_arguments(function.get("arguments"), body),
                type=type_ if isinstance(type_, str) else "function",
            )
        )
    finish = choice.get("finish_reason")
    usage = body.get("usage")
    return (
        AssistantMessage(
            content=_text(message.get("content"), body),
            reasoning=_reasoning(message),
            tool_calls=tuple(calls),
            finish_reason=finish if isinstance(finish, str) and finish else None,
        ),
        usage_from(usage) if isinstance(usage, dict) else None,
    )
