"""Responses API answers as bytes: events with sequence numbers and item
lifecycles (with the gap to wait before each frame), and whole response
objects. Pure: no I/O, no clock."""

from __future__ import annotations

from typing import Any, Literal

from ...wire.responses_types import (
    FunctionToolCall,
    IncompleteDetails,
    ItemStatus,
    OutputItem,
    OutputMessage,
    OutputMessageContent,
    OutputText,
    ReasoningItem,
    ReasoningTextContent,
    ResponseError,
    ResponseObject,
    ResponseStatus,
    ResponseUsage,
)
from .encoding import CREATED, dumps
from .turns import Call, Ending, Ids, Turn, responses_usage

__all__ = ["ResponsesRenderer"]


_INCOMPLETE_REASONS: dict[str, Literal["max_output_tokens", "content_filter"]] = {
    "length": "max_output_tokens",
    "content_filter": "content_filter",
}


class ResponsesRenderer:
    """Responses API events with sequence numbers and item lifecycles."""

    def __init__(self, ids: Ids, model: str, request: dict[str, Any], prompt_tokens: int) -> None:
        self.ids = ids
        self.model = model
        # The request body as the client sent it: the object repeats some of it.
        self.request = request
        self.prompt_tokens = prompt_tokens
        self.seq = 0
        # Stream state: finished output items, and the open one.
        self.items: list[OutputItem] = []
        self.open_kind: str | None = None
        self.open_text: list[str] = []
        self.open_index = -1

    def _event(self, type_: str, **fields: Any) -> bytes:
        payload = {"type": type_, **fields, "sequence_number": self.seq}
        self.seq += 1
        return b"event: " + type_.encode() + b"\ndata: " + dumps(payload) + b"\n\n"

    def response_object(
        self,
        status: ResponseStatus,
        output: list[OutputItem],
        usage: ResponseUsage | None,
        error: ResponseError | None = None,
        incomplete_reason: Literal["max_output_tokens", "content_filter"] | None = None,
    ) -> ResponseObject:
        req = self.request
        incomplete: IncompleteDetails | None = (
            {"reason": incomplete_reason} if incomplete_reason is not None else None
        )
        return {
            "id": self.ids.response,
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "error": error,
            "incomplete_details": incomplete,
            "instructions": req.get("instructions"),
            "max_output_tokens": req.get("max_output_tokens"),
            "model": self.model,
            "output": output,
            "parallel_tool_calls": req.get("parallel_tool_calls", True),
            "previous_response_id": req.get("previous_response_id"),
            "reasoning": {"effort": None, "summary": None},
            "store": req.get("store", True),
            "temperature": req.get("temperature", 1.0),
            "text": {"format": {"type": "text"}},
            "tool_choice": req.get("tool_choice", "auto"),
            "tools": req.get("tools", []),
            "top_p": req.get("top_p", 1.0),
            "truncation": "disabled",
            "usage": usage,
            "user": None,
            "metadata": req.get("metadata") or {},
        }

    @staticmethod
    def _message_item(ids: Ids, text: str, status: ItemStatus) -> OutputMessage:
        content: list[OutputMessageContent] = (
            [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
            if status == "completed"
            else []
        )
        return {
            "id": ids.message,
            "type": "message",
            "status": status,
            "role": "assistant",
            "content": content,
        }

    @staticmethod
    def _reasoning_item(ids: Ids, text: str, status: ItemStatus) -> ReasoningItem:
        content: list[ReasoningTextContent] = (
            [{"type": "reasoning_text", "text": text}] if status == "completed" else []
        )
        return {
            "id": ids.reasoning,
            "type": "reasoning",
            "status": status,
            "summary": [],
            "content": content,
        }

    @staticmethod
    def _call_item(call: Call, status: ItemStatus) -> FunctionToolCall:
        return {
            "id": call.item_id,
            "type": "function_call",
            "status": status,
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments if status == "completed" else "",
        }

    def _output(self, turn: Turn) -> list[OutputItem]:
        out: list[OutputItem] = []
        if turn.reasoning:
            out.append(self._reasoning_item(self.ids, "".join(turn.reasoning), "completed"))
        if turn.text or not turn.calls:
            out.append(self._message_item(self.ids, "".join(turn.text), "completed"))
        out += [self._call_item(c, "completed") for c in turn.calls]
        return out

    def _open(self, turn: Turn, kind: str, call_index: int = -1) -> list[bytes]:
        parts = self._close(turn)
        self.open_kind = kind
        self.open_text = []
        self.open_index = len(self.items)
        item: OutputItem
        if kind == "reasoning":
            item = self._reasoning_item(self.ids, "", "in_progress")
        elif kind == "message":
            item = self._message_item(self.ids, "", "in_progress")
        else:
            item = self._call_item(turn.calls[call_index], "in_progress")
            self.open_kind = f"call:{call_index}"
        parts.append(
            self._event("response.output_item.added", output_index=self.open_index, item=item)
        )
        if kind == "message":
            parts.append(
                self._event(
                    "response.content_part.added",
                    item_id=self.ids.message,
                    output_index=self.open_index,
                    content_index=0,
                    part={"type": "output_text", "text": "", "annotations": [], "logprobs": []},
                )
            )
        return parts

    def _close(self, turn: Turn) -> list[bytes]:
        kind = self.open_kind
        if kind is None:
            return []
        idx = self.open_index
        text = "".join(self.open_text)
        parts = []
        item: OutputItem
        if kind == "reasoning":
            parts.append(
                self._event(
                    "response.reasoning_text.done",
                    item_id=self.ids.reasoning,
                    output_index=idx,
                    content_index=0,
                    text=text,
                )
            )
            item = self._reasoning_item(self.ids, text, "completed")
        elif kind == "message":
            part: OutputText = {
                "type": "output_text",
                "text": text,
                "annotations": [],
                "logprobs": [],
            }
            parts.append(
                self._event(
                    "response.output_text.done",
                    item_id=self.ids.message,
                    output_index=idx,
                    content_index=0,
                    text=text,
                    logprobs=[],
                )
            )
            parts.append(
                self._event(
                    "response.content_part.done",
                    item_id=self.ids.message,
                    output_index=idx,
                    content_index=0,
                    part=part,
                )
            )
            item = self._message_item(self.ids, text, "completed")
        else:
            call = turn.calls[int(kind.split(":")[1])]
            parts.append(
                self._event(
                    "response.function_call_arguments.done",
                    item_id=call.item_id,
                    output_index=idx,
                    name=call.name,
                    arguments=call.arguments,
                )
            )
            item = self._call_item(call, "completed")
        parts.append(self._event("response.output_item.done", output_index=idx, item=item))
        self.items.append(item)
        self.open_kind = None
        return parts

    def _element(self, turn: Turn, el: tuple[Any, ...]) -> bytes:
        kind = el[0]
        parts: list[bytes] = []
        if kind == "reasoning":
            if self.open_kind != "reasoning":
                parts += self._open(turn, "reasoning")
            self.open_text.append(el[1])
            parts.append(
                self._event(
                    "response.reasoning_text.delta",
                    item_id=self.ids.reasoning,
                    output_index=self.open_index,
                    content_index=0,
                    delta=el[1],
                )
            )
        elif kind == "text":
            if self.open_kind != "message":
                parts += self._open(turn, "message")
            self.open_text.append(el[1])
            parts.append(
                self._event(
                    "response.output_text.delta",
                    item_id=self.ids.message,
                    output_index=self.open_index,
                    content_index=0,
                    delta=el[1],
                    logprobs=[],
                )
            )
        elif kind == "call":
            parts += self._open(turn, "call", el[1])
        else:
            parts.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=turn.calls[el[1]].item_id,
                    output_index=self.open_index,
                    delta=el[2],
                )
            )
        return b"".join(parts)

    def stream(
        self, turn: Turn, ending: Ending, error: str = "", *, done: bool = True
    ) -> list[tuple[float, bytes]]:
        # ``done`` is Chat's [DONE]; a Responses stream ends with its events.
        elements = turn.elements()
        start = self.response_object("in_progress", [], None)
        frames: list[tuple[float, bytes]] = []
        if ending == "cut" and not elements:
            return frames
        frames.append(
            (
                0.0,
                self._event("response.created", response=start)
                + self._event("response.in_progress", response=start),
            )
        )
        for i, el in enumerate(elements):
            gap = turn.first_token_delay if i == 0 else turn.delay
            frames.append((gap, self._element(turn, el)))
        if ending == "complete":
            parts: list[bytes] = []
            if (
                not turn.calls
                and self.open_kind != "message"
                and not any(it["type"] == "message" for it in self.items)
            ):
                # An empty answer still has a (empty) message item.
                parts += self._open(turn, "message")
            parts += self._close(turn)
            final = self._final(turn, self.items)
            parts.append(self._event(f"response.{final['status']}", response=final))
            gap = turn.finish_delay if elements else turn.first_token_delay
            frames.append((gap, b"".join(parts)))
        elif ending == "error":
            failed = self.response_object(
                "failed",
                self.items,
                None,
                error={"code": "server_error", "message": error},
            )
            frames.append((0.0, self._event("response.failed", response=failed)))
        return frames

    def _final(self, turn: Turn, output: list[OutputItem]) -> ResponseObject:
        usage = responses_usage(turn, self.prompt_tokens)
        # Chat's "length"/"content_filter" are an incomplete response here.
        reason = _INCOMPLETE_REASONS.get(turn.finish_reason)
        if reason is None:
            return self.response_object("completed", output, usage)
        return self.response_object("incomplete", output, usage, incomplete_reason=reason)

    def completion(self, turn: Turn) -> bytes:
        return dumps(self._final(turn, self._output(turn)))
