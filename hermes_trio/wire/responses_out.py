"""Building Responses API objects and stream events (DESIGN §5).

:class:`ResponseBuilder` is a small state machine: feed it the agent's turn
events and it returns the Responses stream events they become, each with the
next ``sequence_number``, while it keeps the response object (output items,
status, usage) that a non-streaming answer, a stored response or a late
``GET`` returns. Sans-IO: no trio, no clock unless one is passed in.

Mapping from turn events:

- assistant text → a ``message`` item (``output_item.added``,
  ``content_part.added``, ``output_text.delta``…, ``output_text.done``,
  ``content_part.done``, ``output_item.done``); a tool boundary ends it, and
  text after the tools is a new message item;
- reasoning → a ``reasoning`` item with ``reasoning_text`` deltas;
- a server-side tool call → a completed ``function_call`` item when it starts
  and a ``function_call_output`` item with its result when it ends, so a
  client can show what the agent did;
- client-side tool calls at the end of a turn → ``function_call`` items, as
  OpenAI returns them;
- the end → ``response.completed``, ``response.incomplete`` (length limit,
  interrupted, cancelled) or an ``error`` event and ``response.failed``.

Every object here passes the official SDK's pydantic models
(``tests/wire/test_wire_responses_out.py`` validates them).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..events import (
    MessageChunk,
    MessageStop,
    ReasoningChunk,
    StreamEvent,
    ToolCallChunk,
    ToolCallFinished,
    TurnFinished,
    Usage,
)
from .sse import encode_event

__all__ = [
    "TERMINAL_TYPES",
    "ResponseBuilder",
    "ResponseEvent",
    "new_item_id",
    "new_response_id",
    "response_usage",
]

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

TERMINAL_TYPES = frozenset({"response.completed", "response.failed", "response.incomplete"})

# Statuses after which nothing changes any more.
FINAL_STATUSES = frozenset({"completed", "failed", "incomplete", "cancelled"})


def new_response_id() -> str:
    return "resp_" + secrets.token_hex(24)


def new_item_id(prefix: str) -> str:
    return f"{prefix}_" + secrets.token_hex(16)


def response_usage(usage: Usage) -> dict[str, Any]:
    """Chat-style token counts in the Responses ``usage`` shape."""
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens or usage.prompt_tokens + usage.completion_tokens,
    }


@dataclass(frozen=True, slots=True)
class ResponseEvent:
    """One stream event: its JSON ``data`` and the SSE frame, encoded once
    so that every follower of a stream shares the same bytes."""

    sequence_number: int
    type: str
    data: str
    frame: bytes

    @classmethod
    def make(cls, sequence_number: int, type: str, data: str) -> ResponseEvent:
        frame = encode_event(data, event=type, id=str(sequence_number))
        return cls(sequence_number, type, data, frame)

    def payload(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.data)
        return loaded


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


class _Item:
    """One output item while it is being built."""

    __slots__ = ("call_id", "id", "index", "kind", "name", "output", "parts", "phase", "status")

    def __init__(self, kind: str, id: str, index: int) -> None:
        self.kind = kind
        self.id = id
        self.index = index
        self.status = "in_progress"
        self.parts: list[str] = []
        self.call_id = ""
        self.name = ""
        self.output = ""
        self.phase: str | None = None

    @property
    def text(self) -> str:
        if len(self.parts) > 1:
            # Join once and keep the result: snapshots may ask repeatedly.
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""

    def render(self, *, full: bool = True) -> dict[str, Any]:
        """The item as the API shows it; ``full=False`` is the empty shape
        of ``output_item.added``."""
        if self.kind == "message":
            item: dict[str, Any] = {
                "id": self.id,
                "type": "message",
                "status": self.status,
                "role": "assistant",
                "content": [_text_part(self.text)] if full else [],
            }
            if self.phase is not None:
                item["phase"] = self.phase
            return item
        if self.kind == "reasoning":
            return {
                "id": self.id,
                "type": "reasoning",
                "status": self.status,
                "summary": [],
                "content": [{"type": "reasoning_text", "text": self.text}] if full else [],
            }
        if self.kind == "function_call":
            return {
                "id": self.id,
                "type": "function_call",
                "status": self.status,
                "call_id": self.call_id,
                "name": self.name,
                "arguments": self.text if full else "",
            }
        return {
            "id": self.id,
            "type": "function_call_output",
            "status": self.status,
            "call_id": self.call_id,
            "output": self.output if full else "",
        }


class ResponseBuilder:
    """Turn events → Responses stream events, and the response object.

    ``echo`` holds the request settings the response object repeats
    (``instructions``, ``tools``, ``tool_choice``, ``temperature``, …); keys
    not given take OpenAI's defaults. ``clock`` (Unix seconds) stamps
    ``completed_at``; without it the field stays null.
    """

    def __init__(
        self,
        response_id: str,
        *,
        created_at: int,
        model: str,
        echo: Mapping[str, Any] | None = None,
        new_id: Callable[[str], str] = new_item_id,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.id = response_id
        self.created_at = created_at
        self.model = model
        self.echo = dict(echo or {})
        self._new_id = new_id
        self._clock = clock
        self.seq = 0
        self.status = "in_progress"
        self.items: list[_Item] = []
        self.usage: Usage | None = None
        self.error: dict[str, Any] | None = None
        self.error_code: str | None = None
        """The precise failure code (``response.error.code`` is coarser)."""
        self.model_status: int | None = None
        """The model server's HTTP status when it refused the turn's request."""
        self.incomplete_reason: str | None = None
        self.completed_at: int | None = None
        self._open: _Item | None = None
        # No message since the last tool item: the turn's final text still
        # needs an item of its own.
        self._answered = False
        self._started = False
        # call_ids already shown, and for each call id the agent used, the
        # shown ids still waiting for their result (oldest first).
        self._call_ids: set[str] = set()
        self._pending: dict[str, list[str]] = {}

    # -- state --------------------------------------------------------------

    @property
    def ended(self) -> bool:
        return self.status in FINAL_STATUSES

    @property
    def output_text(self) -> str:
        return "".join(i.text for i in self.items if i.kind == "message")

    def snapshot(self) -> dict[str, Any]:
        """The response object as it stands now."""
        echo = self.echo
        output = [item.render() for item in self.items]
        body: dict[str, Any] = {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": self.status,
            "background": bool(echo.get("background", False)),
            "completed_at": self.completed_at,
            "error": self.error,
            "incomplete_details": (
                {"reason": self.incomplete_reason} if self.status == "incomplete" else None
            ),
            "instructions": echo.get("instructions"),
            "max_output_tokens": echo.get("max_output_tokens"),
            "max_tool_calls": None,
            "metadata": dict(echo.get("metadata") or {}),
            "model": self.model,
            "output": output,
            "output_text": self.output_text,
            "parallel_tool_calls": bool(echo.get("parallel_tool_calls", True)),
            "previous_response_id": echo.get("previous_response_id"),
            "prompt_cache_key": echo.get("prompt_cache_key"),
            "reasoning": echo.get("reasoning") or {"effort": None, "summary": None},
            "safety_identifier": echo.get("safety_identifier"),
            "service_tier": echo.get("service_tier") or "default",
            "store": bool(echo.get("store", True)),
            "temperature": echo.get("temperature"),
            "text": echo.get("text") or {"format": {"type": "text"}},
            "tool_choice": echo.get("tool_choice") or "auto",
            "tools": list(echo.get("tools") or []),
            "top_logprobs": 0,
            "top_p": echo.get("top_p"),
            "truncation": echo.get("truncation") or "disabled",
            "usage": response_usage(self.usage) if self.usage is not None else None,
            "user": echo.get("user"),
        }
        return body

    # -- events -------------------------------------------------------------

    def _event(self, type: str, fields: dict[str, Any]) -> ResponseEvent:
        payload = {"type": type, **fields, "sequence_number": self.seq}
        event = ResponseEvent.make(self.seq, type, _dumps(payload))
        self.seq += 1
        return event

    def start(self) -> list[ResponseEvent]:
        """``response.created`` and ``response.in_progress``."""
        if self._started:
            return []
        self._started = True
        created = self._event("response.created", {"response": self.snapshot()})
        return [created, self._event("response.in_progress", {"response": self.snapshot()})]

    def feed(self, event: StreamEvent) -> list[ResponseEvent]:
        """The stream events one turn event becomes (often none)."""
        if self.ended:
            return []
        out = self.start()
        if isinstance(event, MessageChunk):
            if event.text:
                out += self._text(event.text)
        elif isinstance(event, ReasoningChunk):
            if event.text:
                out += self._reasoning(event.text)
        elif isinstance(event, MessageStop):
            if self._open is not None and self._open.kind == "message":
                self._open.phase = "final_answer" if event.final else "commentary"
            out += self._close()
        elif isinstance(event, ToolCallChunk):
            out += self._tool_call(event)
        elif isinstance(event, ToolCallFinished):
            out += self._tool_result(event)
        elif isinstance(event, TurnFinished):
            out += self._finish(event)
        # Commentary repeats text already streamed as MessageChunks; hints and
        # notices have no Responses form.
        return out

    def feed_all(self, events: Iterable[StreamEvent]) -> list[ResponseEvent]:
        out: list[ResponseEvent] = []
        for event in events:
            out += self.feed(event)
        return out

    def _open_item(
        self, kind: str, prefix: str, *, call_id: str = "", name: str = ""
    ) -> tuple[_Item, list[ResponseEvent]]:
        out = self._close()
        item = _Item(kind, self._new_id(prefix), len(self.items))
        item.call_id = call_id
        item.name = name
        self.items.append(item)
        self._open = item
        out.append(
            self._event(
                "response.output_item.added",
                {"output_index": item.index, "item": item.render(full=False)},
            )
        )
        return item, out

    def _text(self, text: str) -> list[ResponseEvent]:
        item = self._open
        out: list[ResponseEvent] = []
        if item is None or item.kind != "message":
            item, out = self._open_message()
        item.parts.append(text)
        out.append(
            self._event(
                "response.output_text.delta",
                {
                    "item_id": item.id,
                    "output_index": item.index,
                    "content_index": 0,
                    "delta": text,
                    "logprobs": [],
                },
            )
        )
        return out

    def _reasoning(self, text: str) -> list[ResponseEvent]:
        item = self._open
        out: list[ResponseEvent] = []
        if item is None or item.kind != "reasoning":
            item, out = self._open_item("reasoning", "rs")
        item.parts.append(text)
        out.append(
            self._event(
                "response.reasoning_text.delta",
                {
                    "item_id": item.id,
                    "output_index": item.index,
                    "content_index": 0,
                    "delta": text,
                },
            )
        )
        return out

    def _close(self, status: str = "completed") -> list[ResponseEvent]:
        item = self._open
        if item is None:
            return []
        self._open = None
        item.status = status
        out: list[ResponseEvent] = []
        where = {"item_id": item.id, "output_index": item.index}
        if item.kind == "message":
            text = item.text
            out.append(
                self._event(
                    "response.output_text.done",
                    {**where, "content_index": 0, "text": text, "logprobs": []},
                )
            )
            out.append(
                self._event(
                    "response.content_part.done",
                    {**where, "content_index": 0, "part": _text_part(text)},
                )
            )
        elif item.kind == "reasoning":
            out.append(
                self._event(
                    "response.reasoning_text.done",
                    {**where, "content_index": 0, "text": item.text},
                )
            )
        elif item.kind == "function_call":
            out.append(
                self._event(
                    "response.function_call_arguments.done",
                    {**where, "name": item.name, "arguments": item.text},
                )
            )
        out.append(
            self._event(
                "response.output_item.done", {"output_index": item.index, "item": item.render()}
            )
        )
        return out

    def _unique_call_id(self, call_id: str) -> str:
        """The SDK tells function calls apart by ``call_id``, and some model
        servers reuse ids across steps (``call_0`` every time): show each
        server-side call under an id of its own."""
        if call_id and call_id not in self._call_ids:
            return call_id
        base = call_id or "call"
        n = len(self.items)
        while f"{base}_{n}" in self._call_ids:
            n += 1
        return f"{base}_{n}"

    def _function_call(self, call_id: str, name: str, arguments: str) -> list[ResponseEvent]:
        self._call_ids.add(call_id)
        item, out = self._open_item("function_call", "fc", call_id=call_id, name=name)
        if arguments:
            item.parts.append(arguments)
            out.append(
                self._event(
                    "response.function_call_arguments.delta",
                    {"item_id": item.id, "output_index": item.index, "delta": arguments},
                )
            )
        out += self._close()
        return out

    def _tool_call(self, event: ToolCallChunk) -> list[ResponseEvent]:
        self._answered = False
        shown = self._unique_call_id(event.call_id)
        self._pending.setdefault(event.call_id or event.tool_name, []).append(shown)
        return self._function_call(shown, event.tool_name, _dumps(event.args))

    def _tool_result(self, event: ToolCallFinished) -> list[ResponseEvent]:
        self._answered = False
        waiting = self._pending.get(event.call_id or event.tool_name)
        call_id = waiting.pop(0) if waiting else self._unique_call_id(event.call_id)
        item, out = self._open_item("function_call_output", "fco", call_id=call_id)
        item.output = event.result
        out += self._close()
        return out

    def _finish(self, event: TurnFinished) -> list[ResponseEvent]:
        self.usage = event.usage
        if event.finish_reason == "error":
            self.model_status = event.model_status
            return self.fail(event.error or "the model server failed", event.error_code)
        if event.finish_reason == "interrupted":
            return self.interrupt()
        out = self._close()
        if event.tool_calls:
            for call in event.tool_calls:
                fn = call.get("function") or {}
                # Kept as the model gave them: the client answers with these
                # ids, and the stored conversation holds the same.
                out += self._function_call(
                    str(call.get("id") or "") or self._unique_call_id(""),
                    str(fn.get("name") or ""),
                    str(fn.get("arguments") or ""),
                )
        elif not self._answered:
            # Every answer has a message item, even an empty one.
            out += self._text(event.text) if event.text else self._open_message()[1]
            if self._open is not None:
                self._open.phase = "final_answer"
            out += self._close()
        if event.finish_reason == "length":
            return out + self._end("incomplete", reason="max_output_tokens")
        return out + self._end("completed")

    def _open_message(self) -> tuple[_Item, list[ResponseEvent]]:
        """A message item with its (empty) text part, as the SDK expects."""
        item, out = self._open_item("message", "msg")
        self._answered = True
        out.append(
            self._event(
                "response.content_part.added",
                {
                    "item_id": item.id,
                    "output_index": item.index,
                    "content_index": 0,
                    "part": _text_part(""),
                },
            )
        )
        return item, out

    def _end(self, status: str, *, reason: str | None = None) -> list[ResponseEvent]:
        self.status = status
        if status == "completed" and self._clock is not None:
            self.completed_at = int(self._clock())
        if status == "incomplete":
            self.incomplete_reason = reason
        kind = {
            "completed": "response.completed",
            "failed": "response.failed",
        }.get(status, "response.incomplete")
        return [self._event(kind, {"response": self.snapshot()})]

    # -- endings from outside the turn ----------------------------------------

    def fail(self, message: str, code: str | None = None) -> list[ResponseEvent]:
        """An ``error`` event and ``response.failed``."""
        if self.ended:
            return []
        out = self.start() + self._close("incomplete")
        out.append(
            self._event(
                "error", {"code": code or "server_error", "message": message, "param": None}
            )
        )
        # The SDK knows a fixed set of codes here; the precise one is on the
        # error event above.
        self.error = {"code": "server_error", "message": message}
        self.error_code = code
        return out + self._end("failed")

    def interrupt(self) -> list[ResponseEvent]:
        """The turn stopped early (client gone, shutdown): ``response.incomplete``.

        The SDK's ``incomplete_details.reason`` has no value for an
        interruption, so it stays null.
        """
        if self.ended:
            return []
        return self.start() + self._close("incomplete") + self._end("incomplete")

    def cancel(self) -> list[ResponseEvent]:
        """A cancelled background response: status ``cancelled``; the stream
        ends with ``response.incomplete``, the only terminal event that fits."""
        if self.ended:
            return []
        return self.start() + self._close("incomplete") + self._end("cancelled")
