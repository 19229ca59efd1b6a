"""Building Responses API objects and stream events.

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
- a call to a client-side tool → a ``function_call`` item streamed as the
  model writes it (``output_item.added``, ``function_call_arguments.delta``…,
  ``.done``, ``output_item.done``), as OpenAI returns them: the client runs
  it and answers with a ``function_call_output``;
- the agent's own tool calls → nothing in ``output``: agent frameworks run
  every ``function_call`` item they see, and the server already ran these.
  With ``tool_events`` they show as ``hermes.tool.started``,
  ``hermes.tool.running`` and ``hermes.tool.finished`` stream events (no
  items), like the chat endpoint's opt-in tool events;
- a call held for a person's approval (``ApprovalRequested`` of a
  ``defer`` channel) → an ``mcp_approval_request`` item, added and done at
  once; the turn then ends ``completed`` (``finish_reason "approval"``)
  with no message item of its own. The calls answered yes in this request
  (``approved_calls``) → ``mcp_call`` items with their output, as OpenAI
  shows an approved MCP call (``response.mcp_call.in_progress`` /
  ``.completed`` or ``.failed`` between ``output_item.added`` and ``.done``);
- the end → ``response.completed``, ``response.incomplete`` (length limit,
  interrupted, cancelled) or an ``error`` event and ``response.failed``.

Every object here passes the official SDK's pydantic models
(``tests/wire/test_wire_responses_out.py`` validates them) and OpenAI's
published OpenAPI schemas (``tests/spec/``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..events import (
    ApprovalRequested,
    ContextCompacted,
    LongToolHint,
    MessageChunk,
    MessageStop,
    ReasoningChunk,
    StreamEvent,
    ToolCallChunk,
    ToolCallDelta,
    ToolCallFinished,
    ToolProgress,
    TurnFinished,
    Usage,
)
from .mcp_items import (
    HERMES_LABEL,
    approval_request_item,
    arguments_json,
    list_tools_item,
    mcp_call_item,
)
from .responses_types import (
    CompactionItem,
    ContentPartEvent,
    ErrorEvent,
    FunctionCallArgumentsDeltaEvent,
    FunctionCallArgumentsDoneEvent,
    ItemEvent,
    ItemStatus,
    McpApprovalRequest,
    McpCallArgumentsDoneEvent,
    McpListTools,
    McpListToolsTool,
    McpToolCall,
    McpToolCallStatus,
    OutputItem,
    OutputItemEvent,
    OutputMessage,
    OutputText,
    ReasoningTextDeltaEvent,
    ReasoningTextDoneEvent,
    ResponseEcho,
    ResponseError,
    ResponseLifecycleEvent,
    ResponseObject,
    ResponseStatus,
    ResponseStreamEvent,
    ResponseUsage,
    TextDeltaEvent,
    TextDoneEvent,
)
from .sealed import Sealer, compaction_item
from .sse import encode_event
from .tool_events import ToolEventFields, tool_event

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


def response_usage(usage: Usage) -> ResponseUsage:
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


_LifecycleType = Literal[
    "response.created",
    "response.in_progress",
    "response.completed",
    "response.failed",
    "response.incomplete",
]
_OutputItemType = Literal["response.output_item.added", "response.output_item.done"]
_ItemEventType = Literal[
    "response.mcp_call.in_progress",
    "response.mcp_call.completed",
    "response.mcp_call.failed",
    "response.mcp_list_tools.in_progress",
    "response.mcp_list_tools.completed",
    "response.mcp_list_tools.failed",
]


def _text_part(text: str) -> OutputText:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


class _Item:
    """One output item while it is being built."""

    __slots__ = ("call_id", "fixed", "id", "index", "kind", "name", "parts", "phase", "status")

    def __init__(self, kind: str, id: str, index: int) -> None:
        self.kind = kind
        self.id = id
        self.index = index
        self.status: ItemStatus = "in_progress"
        self.parts: list[str] = []
        self.call_id = ""
        self.name = ""
        self.phase: Literal["commentary", "final_answer"] | None = None
        # The whole item, for kinds built at once (the MCP items).
        self.fixed: McpListTools | McpToolCall | McpApprovalRequest | CompactionItem | None = None

    @property
    def text(self) -> str:
        if len(self.parts) > 1:
            # Join once and keep the result: snapshots may ask repeatedly.
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""

    def render(self, *, full: bool = True) -> OutputItem:
        """The item as the API shows it; ``full=False`` is the empty shape
        of ``output_item.added``."""
        if self.fixed is not None:
            return self.fixed.copy()
        if self.kind == "message":
            item: OutputMessage = {
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
        return {
            "id": self.id,
            "type": "function_call",
            "status": self.status,
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.text if full else "",
        }


def _stopped(item: _Item) -> None:
    """An ``mcp_call`` item whose call the turn stopped in: ``incomplete``."""
    fixed = item.fixed
    assert fixed is not None and fixed["type"] == "mcp_call"
    stopped = fixed.copy()
    stopped["status"] = "incomplete"
    item.fixed = stopped


class ResponseBuilder:
    """Turn events → Responses stream events, and the response object.

    ``echo`` holds the request settings the response object repeats
    (``instructions``, ``tools``, ``tool_choice``, ``temperature``, …); keys
    not given take OpenAI's defaults. ``clock`` (Unix seconds) stamps
    ``completed_at``; without it the field stays null. ``tool_events`` shows
    the agent's own tool runs as ``hermes.tool.*`` events. ``approved_calls``
    (call id -> approval id) are the held calls this response runs, shown
    as ``mcp_call`` items; ``server_labels`` (tool name -> label) names the
    MCP server of a tool in its items, ``hermes`` for the agent's own.
    ``sealer`` seals the summary of a compaction into a ``compaction`` item
    (without one, a compaction shows no item).
    """

    def __init__(
        self,
        response_id: str,
        *,
        created_at: int,
        model: str,
        echo: ResponseEcho | None = None,
        new_id: Callable[[str], str] = new_item_id,
        clock: Callable[[], float] | None = None,
        tool_events: bool = False,
        approved_calls: Mapping[str, str] | None = None,
        server_labels: Mapping[str, str] | None = None,
        mcp_tools: Mapping[str, tuple[str, str]] | None = None,
        sealer: Sealer | None = None,
    ) -> None:
        self.id = response_id
        self.sealer = sealer
        self.compacted = False
        """A compaction replaced the start of the conversation in this turn."""
        self.created_at = created_at
        self.model = model
        self.echo: ResponseEcho = {**echo} if echo else {}
        self._new_id = new_id
        self._clock = clock
        self.tool_events = tool_events
        self.seq = 0
        self.status: ResponseStatus = "in_progress"
        self.items: list[_Item] = []
        self.usage: Usage | None = None
        self.error: ResponseError | None = None
        self.error_code: str | None = None
        """The precise failure code (``response.error.code`` is coarser)."""
        self.model_status: int | None = None
        """The model server's HTTP status when it refused the turn's request."""
        self.incomplete_reason: Literal["max_output_tokens", "content_filter"] | None = None
        self.completed_at: int | None = None
        self._open: _Item | None = None
        # No message since the last tool item: the turn's final text still
        # needs an item of its own.
        self._answered = False
        self._started = False
        # Client tool calls being written, by their index in the answer.
        self._calls: dict[int, _Item] = {}
        # Tool name -> the MCP server it comes from; the agent's own: hermes.
        self.server_labels = dict(server_labels or {})
        self.approval_requests: list[ApprovalRequested] = []
        """The calls this response holds for a person's answer."""
        # call id -> the approval it was run on: shown as mcp_call items.
        self._approved = dict(approved_calls or {})
        self._mcp_calls: dict[str, _Item] = {}
        self.mcp_tools = dict(mcp_tools or {})
        """The request's MCP tools: the model's name -> (server label, tool)."""
        self.mcp_held: set[str] = set()
        """Those of them a call of is held for approval first: its item is
        the ``mcp_approval_request``, and the ``mcp_call`` comes when it runs."""
        # Their calls running now, by call index: mcp_call items.
        self._request_mcp: dict[int, _Item] = {}

    # -- state --------------------------------------------------------------

    @property
    def ended(self) -> bool:
        return self.status in FINAL_STATUSES

    @property
    def output_text(self) -> str:
        return "".join(i.text for i in self.items if i.kind == "message")

    def snapshot(self) -> ResponseObject:
        """The response object as it stands now."""
        echo = self.echo
        output = [item.render() for item in self.items]
        body: ResponseObject = {
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
            "reasoning": echo.get("reasoning") or {"effort": None, "summary": None},
            "service_tier": echo.get("service_tier") or "default",
            "store": bool(echo.get("store", True)),
            "temperature": echo.get("temperature"),
            "text": echo.get("text") or {"format": {"type": "text"}},
            "tool_choice": echo.get("tool_choice") or "auto",
            "tools": list(echo.get("tools") or []),
            "top_logprobs": 0,
            "top_p": echo.get("top_p"),
            "truncation": echo.get("truncation") or "disabled",
        }
        # The spec types these as non-nullable: absent when unset.
        if self.usage is not None:
            body["usage"] = response_usage(self.usage)
        cache_key = echo.get("prompt_cache_key")
        if cache_key is not None:
            body["prompt_cache_key"] = cache_key
        safety = echo.get("safety_identifier")
        if safety is not None:
            body["safety_identifier"] = safety
        user = echo.get("user")
        if user is not None:
            body["user"] = user
        return body

    # -- events -------------------------------------------------------------

    def _emit(self, type: str, payload: ResponseStreamEvent) -> ResponseEvent:
        """The event of ``payload``, whose ``sequence_number`` is ``self.seq``."""
        event = ResponseEvent.make(self.seq, type, _dumps(payload))
        self.seq += 1
        return event

    def _extension(self, type: str, fields: ToolEventFields) -> ResponseEvent:
        """One of the project's own ``hermes.*`` events (``tool_event``'s fields)."""
        payload = {"type": type, **fields, "sequence_number": self.seq}
        event = ResponseEvent.make(self.seq, type, _dumps(payload))
        self.seq += 1
        return event

    def _lifecycle(self, type: _LifecycleType) -> ResponseEvent:
        payload: ResponseLifecycleEvent = {
            "type": type,
            "response": self.snapshot(),
            "sequence_number": self.seq,
        }
        return self._emit(type, payload)

    def _item_event(self, type: _ItemEventType, item: _Item) -> ResponseEvent:
        payload: ItemEvent = {
            "type": type,
            "item_id": item.id,
            "output_index": item.index,
            "sequence_number": self.seq,
        }
        return self._emit(type, payload)

    def _output_item(self, type: _OutputItemType, index: int, item: OutputItem) -> ResponseEvent:
        payload: OutputItemEvent = {
            "type": type,
            "output_index": index,
            "item": item,
            "sequence_number": self.seq,
        }
        return self._emit(type, payload)

    def start(self) -> list[ResponseEvent]:
        """``response.created`` and ``response.in_progress``."""
        if self._started:
            return []
        self._started = True
        created = self._lifecycle("response.created")
        return [created, self._lifecycle("response.in_progress")]

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
            out += self._close() + self._close_calls()
        elif isinstance(event, ToolCallDelta):
            out += self._client_call(event)
        elif isinstance(event, ApprovalRequested):
            out += self._approval_request(event)
        elif isinstance(event, ToolCallChunk | ToolCallFinished | LongToolHint | ToolProgress):
            if isinstance(event, ToolCallChunk | ToolCallFinished):
                # The final text after the agent's tools needs an item of its own.
                self._answered = False
            shown = tool_event(event) if self.tool_events else None
            if shown is not None:
                out.append(self._extension(*shown))
            if isinstance(event, ToolCallChunk | ToolCallFinished):
                if event.call_id in self._approved:
                    out += self._mcp_call(event)
                elif event.tool_name in self.mcp_tools and event.tool_name not in self.mcp_held:
                    out += self._request_mcp_call(event)
        elif isinstance(event, ContextCompacted):
            out += self._compaction(event)
        elif isinstance(event, TurnFinished):
            out += self._finish(event)
        # Commentary repeats text already streamed as MessageChunks; notices
        # have no Responses form.
        return out

    def feed_all(self, events: Iterable[StreamEvent]) -> list[ResponseEvent]:
        out: list[ResponseEvent] = []
        for event in events:
            out += self.feed(event)
        return out

    def _open_item(self, kind: str, prefix: str) -> tuple[_Item, list[ResponseEvent]]:
        out = self._close()
        item = self._add_item(kind, prefix)
        self._open = item
        out.append(self._added(item))
        return item, out

    def _add_item(self, kind: str, prefix: str) -> _Item:
        item = _Item(kind, self._new_id(prefix), len(self.items))
        self.items.append(item)
        return item

    def _added(self, item: _Item) -> ResponseEvent:
        return self._output_item("response.output_item.added", item.index, item.render(full=False))

    def _text(self, text: str) -> list[ResponseEvent]:
        item = self._open
        out: list[ResponseEvent] = []
        if item is None or item.kind != "message":
            item, out = self._open_message()
        item.parts.append(text)
        delta: TextDeltaEvent = {
            "type": "response.output_text.delta",
            "item_id": item.id,
            "output_index": item.index,
            "content_index": 0,
            "delta": text,
            "logprobs": [],
            "sequence_number": self.seq,
        }
        out.append(self._emit("response.output_text.delta", delta))
        return out

    def _reasoning(self, text: str) -> list[ResponseEvent]:
        item = self._open
        out: list[ResponseEvent] = []
        if item is None or item.kind != "reasoning":
            item, out = self._open_item("reasoning", "rs")
        item.parts.append(text)
        delta: ReasoningTextDeltaEvent = {
            "type": "response.reasoning_text.delta",
            "item_id": item.id,
            "output_index": item.index,
            "content_index": 0,
            "delta": text,
            "sequence_number": self.seq,
        }
        out.append(self._emit("response.reasoning_text.delta", delta))
        return out

    def _close(self, status: ItemStatus = "completed") -> list[ResponseEvent]:
        item = self._open
        if item is None:
            return []
        self._open = None
        return self._done(item, status)

    def _close_calls(self, status: ItemStatus = "completed") -> list[ResponseEvent]:
        """End the client tool calls being written (at the end of their step),
        and any MCP call the turn stopped in."""
        out: list[ResponseEvent] = []
        for item in self._calls.values():
            out += self._done(item, status)
        self._calls.clear()
        for item in self._request_mcp.values():
            _stopped(item)
            out += self._done(item, "incomplete")
        self._request_mcp.clear()
        return out

    def _compaction(self, event: ContextCompacted) -> list[ResponseEvent]:
        """A summary now stands for the start of the conversation: a
        ``compaction`` item carries it, sealed (dropped messages, a
        truncation, have no item: OpenAI shows none either)."""
        self.compacted = True
        if self.sealer is None or event.how != "summary" or not event.summary:
            return []
        out = self._close()
        item = self._add_item("compaction", "cmp")
        item.fixed = compaction_item(self.sealer, item.id, event.summary)
        # The next text after it needs an item of its own.
        self._answered = False
        return [*out, self._added(item), *self._done(item, "completed")]

    # -- the request's MCP tools ------------------------------------------------

    def mcp_list_tools(
        self, label: str, tools: list[McpListToolsTool] | None, error: str | None = None
    ) -> list[ResponseEvent]:
        """An ``mcp_list_tools`` item: what server ``label`` offers, or why
        it could not say (``error``)."""
        out = self.start() + self._close()
        item = self._add_item("mcp_list_tools", "mcpl")
        item.fixed = list_tools_item(item.id, label, [])
        out += [self._added(item), self._item_event("response.mcp_list_tools.in_progress", item)]
        item.fixed = list_tools_item(item.id, label, tools or [], error)
        out.append(
            self._item_event(
                "response.mcp_list_tools.failed"
                if error is not None
                else "response.mcp_list_tools.completed",
                item,
            )
        )
        # The item carries its status; the listing's end event says how it went.
        return out + self._done(item, "completed")

    def _request_mcp_call(self, event: ToolCallChunk | ToolCallFinished) -> list[ResponseEvent]:
        """A call to one of the request's MCP tools, as an ``mcp_call`` item."""
        label, tool = self.mcp_tools[event.tool_name]
        if isinstance(event, ToolCallChunk):
            out = self._close()
            item = self._add_item("mcp_call", "mcp")
            item.name = tool
            arguments = arguments_json(event.args)
            added = mcp_call_item(item.id, tool, "", server_label=label, status="in_progress")
            self._request_mcp[event.index] = item
            item.fixed = mcp_call_item(
                item.id, tool, arguments, server_label=label, status="in_progress"
            )
            out += [
                self._output_item("response.output_item.added", item.index, added),
                self._item_event("response.mcp_call.in_progress", item),
            ]
            delta: FunctionCallArgumentsDeltaEvent = {
                "type": "response.mcp_call_arguments.delta",
                "item_id": item.id,
                "output_index": item.index,
                "delta": arguments,
                "sequence_number": self.seq,
            }
            out.append(self._emit("response.mcp_call_arguments.delta", delta))
            done: McpCallArgumentsDoneEvent = {
                "type": "response.mcp_call_arguments.done",
                "item_id": item.id,
                "output_index": item.index,
                "arguments": arguments,
                "sequence_number": self.seq,
            }
            out.append(self._emit("response.mcp_call_arguments.done", done))
            return out
        found = self._request_mcp.pop(event.index, None)
        if found is None:
            return []
        fixed = found.fixed
        assert fixed is not None and fixed["type"] == "mcp_call"
        found.fixed = mcp_call_item(
            found.id,
            tool,
            fixed["arguments"],
            server_label=label,
            status="completed" if event.ok else "failed",
            output=event.result,
            failed=not event.ok,
        )
        return self._done(found, "completed", failed=not event.ok)

    def _done(
        self, item: _Item, status: ItemStatus, *, failed: bool = False
    ) -> list[ResponseEvent]:
        """End ``item``; an ``mcp_call`` that ``failed`` says so in its event
        (its item, built whole, carries its own status)."""
        item.status = status
        out: list[ResponseEvent] = []
        if item.kind == "message":
            text = item.text
            text_done: TextDoneEvent = {
                "type": "response.output_text.done",
                "item_id": item.id,
                "output_index": item.index,
                "content_index": 0,
                "text": text,
                "logprobs": [],
                "sequence_number": self.seq,
            }
            out.append(self._emit("response.output_text.done", text_done))
            part_done: ContentPartEvent = {
                "type": "response.content_part.done",
                "item_id": item.id,
                "output_index": item.index,
                "content_index": 0,
                "part": _text_part(text),
                "sequence_number": self.seq,
            }
            out.append(self._emit("response.content_part.done", part_done))
        elif item.kind == "reasoning":
            reasoning_done: ReasoningTextDoneEvent = {
                "type": "response.reasoning_text.done",
                "item_id": item.id,
                "output_index": item.index,
                "content_index": 0,
                "text": item.text,
                "sequence_number": self.seq,
            }
            out.append(self._emit("response.reasoning_text.done", reasoning_done))
        elif item.kind == "function_call":
            args_done: FunctionCallArgumentsDoneEvent = {
                "type": "response.function_call_arguments.done",
                "item_id": item.id,
                "output_index": item.index,
                "name": item.name,
                "arguments": item.text,
                "sequence_number": self.seq,
            }
            out.append(self._emit("response.function_call_arguments.done", args_done))
        elif item.kind == "mcp_call":
            out.append(
                self._item_event(
                    "response.mcp_call.failed" if failed else "response.mcp_call.completed", item
                )
            )
        out.append(self._output_item("response.output_item.done", item.index, item.render()))
        return out

    def _client_call(self, event: ToolCallDelta) -> list[ResponseEvent]:
        out: list[ResponseEvent] = []
        item = self._calls.get(event.index)
        if event.starts or item is None:
            # Text written before the call is over (it led up to the call);
            # the call is an item of its own, open until its step ends.
            if self._open is not None and self._open.kind == "message":
                self._open.phase = "commentary"
            out += self._close()
            if item is not None:
                out += self._done(item, "completed")
            item = self._add_item("function_call", "fc")
            # Unique already: the agent's ClientCallStream made them so.
            item.call_id = event.call_id
            item.name = event.name
            self._calls[event.index] = item
            out.append(self._added(item))
        if event.arguments:
            item.parts.append(event.arguments)
            delta: FunctionCallArgumentsDeltaEvent = {
                "type": "response.function_call_arguments.delta",
                "item_id": item.id,
                "output_index": item.index,
                "delta": event.arguments,
                "sequence_number": self.seq,
            }
            out.append(self._emit("response.function_call_arguments.delta", delta))
        return out

    def _close_all(self, status: ItemStatus) -> list[ResponseEvent]:
        return self._close(status) + self._close_calls(status) + self._close_mcp_calls()

    def _close_mcp_calls(self) -> list[ResponseEvent]:
        """End the approved calls still running (the turn stopped)."""
        out: list[ResponseEvent] = []
        for item in self._mcp_calls.values():
            _stopped(item)
            out += self._done(item, "incomplete")
        self._mcp_calls.clear()
        return out

    def _approval_request(self, event: ApprovalRequested) -> list[ResponseEvent]:
        out = self._close()
        item = self._add_item("mcp_approval_request", "mcpr")
        item.id = event.id
        label, name = self._server_of(event.tool_name)
        item.fixed = approval_request_item(event.id, name, event.arguments, server_label=label)
        self.approval_requests.append(event)
        return [*out, self._added(item), *self._done(item, "completed")]

    def _mcp_call(self, event: ToolCallChunk | ToolCallFinished) -> list[ResponseEvent]:
        """An approved call that runs now, as an ``mcp_call`` item."""
        approval_id = self._approved[event.call_id]
        if isinstance(event, ToolCallChunk):
            out = self._close()
            item = self._add_item("mcp_call", "mcp")
            item.name = event.tool_name
            item.call_id = event.call_id
            item.parts.append(json.dumps(event.args, ensure_ascii=False, separators=(",", ":")))
            item.fixed = self._mcp_call_item(item, "in_progress", None, approval_id)
            self._mcp_calls[event.call_id] = item
            return [
                *out,
                self._added(item),
                self._item_event("response.mcp_call.in_progress", item),
            ]
        found = self._mcp_calls.pop(event.call_id, None)
        if found is None:
            return []
        status: McpToolCallStatus = "completed" if event.ok else "failed"
        found.fixed = self._mcp_call_item(found, status, event.result, approval_id)
        return self._done(found, "completed", failed=not event.ok)

    def _server_of(self, tool_name: str) -> tuple[str, str]:
        """The server label and the server's own name of the tool the model
        calls ``tool_name``: a request's MCP tool, a configured server's
        (``server_labels``), or the agent's own (``hermes``)."""
        found = self.mcp_tools.get(tool_name)
        if found is not None:
            return found
        return self.server_labels.get(tool_name, HERMES_LABEL), tool_name

    def _mcp_call_item(
        self, item: _Item, status: McpToolCallStatus, output: str | None, approval_id: str
    ) -> McpToolCall:
        label, name = self._server_of(item.name)
        return mcp_call_item(
            item.id,
            name,
            item.text,
            server_label=label,
            status=status,
            output=output,
            failed=status == "failed",
            approval_request_id=approval_id,
        )

    def _finish(self, event: TurnFinished) -> list[ResponseEvent]:
        self.usage = event.usage
        if event.finish_reason == "error":
            self.model_status = event.model_status
            return self.fail(event.error or "the model server failed", event.error_code)
        if event.finish_reason == "interrupted":
            return self.interrupt()
        # A client call reached us as ToolCallDelta events (the agent
        # announces every one, streamed or whole); the ending adds none.
        out = self._close() + self._close_calls()
        if event.finish_reason == "approval":
            # The approval request is the answer: nothing more to say yet.
            return out + self._end("completed")
        if not event.tool_calls and not self._answered:
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
        part: ContentPartEvent = {
            "type": "response.content_part.added",
            "item_id": item.id,
            "output_index": item.index,
            "content_index": 0,
            "part": _text_part(""),
            "sequence_number": self.seq,
        }
        out.append(self._emit("response.content_part.added", part))
        return item, out

    def _end(
        self,
        status: Literal["completed", "failed", "incomplete", "cancelled"],
        *,
        reason: Literal["max_output_tokens"] | None = None,
    ) -> list[ResponseEvent]:
        self.status = status
        if status == "completed" and self._clock is not None:
            self.completed_at = int(self._clock())
        if status == "incomplete":
            self.incomplete_reason = reason
        if status == "completed":
            return [self._lifecycle("response.completed")]
        if status == "failed":
            return [self._lifecycle("response.failed")]
        return [self._lifecycle("response.incomplete")]

    # -- endings from outside the turn ----------------------------------------

    def fail(self, message: str, code: str | None = None) -> list[ResponseEvent]:
        """An ``error`` event and ``response.failed``."""
        if self.ended:
            return []
        out = self.start() + self._close_all("incomplete")
        error: ErrorEvent = {
            "type": "error",
            "code": code or "server_error",
            "message": message,
            "param": None,
            "sequence_number": self.seq,
        }
        out.append(self._emit("error", error))
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
        ending = self._close_all("incomplete")
        return self.start() + ending + self._end("incomplete")

    def cancel(self) -> list[ResponseEvent]:
        """A cancelled background response: status ``cancelled``; the stream
        ends with ``response.incomplete``, the only terminal event that fits."""
        if self.ended:
            return []
        ending = self._close_all("incomplete")
        return self.start() + ending + self._end("cancelled")
