"""A scripted OpenAI-compatible model server on raw trio sockets and h11.

Tests script the answers turn by turn; the server speaks real HTTP/1.1 on a
loopback port so the code under test runs its real network path. Building on
h11 rather than a web framework keeps every byte under our control: stalls,
dropped connections, and the exact moment each client connection closed.

Streamed responses are rendered to a list of pre-serialized SSE frames (with
the gap to wait before each one) before the first byte goes out; the writer
then only frames chunks, sleeps and calls ``send_all``.
"""

from __future__ import annotations

import functools
import json
import socket
import struct
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal

import h11
import trio

from .script import (
    Drop,
    ErrorFrame,
    ErrorReply,
    JSONInsteadOfStream,
    RawReply,
    RefuseStream,
    Stall,
    Step,
    TextReply,
    ToolCallReply,
    split_tokens,
)

__all__ = [
    "ConnectionRecord",
    "RecordedRequest",
    "ScriptedModelServer",
    "open_scripted_server",
]

# A fixed `created` keeps responses deterministic; wall-clock time has no
# business in a scripted server (DESIGN §1: time comes from trio).
CREATED = 1_700_000_000
_RECV_SIZE = 65536
# Frames that are already due are coalesced into one write up to this size.
_FLUSH_BYTES = 64 * 1024
_SERVER_NAME = b"hermes-trio-scripted"

_dumps_str = functools.partial(json.dumps, ensure_ascii=False, separators=(",", ":"))

# The endpoints that consume script steps.
_API_BY_PATH = {"/v1/chat/completions": "chat", "/v1/responses": "responses"}


def _dumps(obj: Any) -> bytes:
    return _dumps_str(obj).encode()


# ---------------------------------------------------------------------------
# Records


@dataclass
class RecordedRequest:
    """One HTTP request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    connection_id: int
    received_at: float
    body: bytes = b""
    #: The script step that answered it (None for non-model endpoints).
    step: Step | None = None

    @property
    def stream(self) -> bool:
        return isinstance(self.json, dict) and self.json.get("stream") is True


@dataclass
class ConnectionRecord:
    """One accepted TCP connection."""

    id: int
    opened_at: float
    closed_at: float | None = None
    #: "client" when we saw EOF/reset from the peer, "server" when we closed it
    #: ourselves (Drop, Stall ending, Connection: close, server shutdown).
    closed_by: Literal["client", "server"] | None = None

    @property
    def closed(self) -> bool:
        return self.closed_at is not None


# ---------------------------------------------------------------------------
# Rendering: steps -> bytes (pure, no I/O)


@dataclass
class _Call:
    call_id: str
    item_id: str
    name: str
    arguments: str
    fragments: list[str]


@dataclass
class _Turn:
    """What the assistant says, independent of the wire API."""

    reasoning: list[str]
    text: list[str]
    calls: list[_Call]
    finish_reason: str = "stop"
    usage: dict[str, Any] | None = None
    delay: float = 0.0
    first_token_delay: float = 0.0
    #: Silence after the last element, before the stream's end.
    finish_delay: float = 0.0
    #: Encoded Chat deltas, cached across responses of the same step.
    chat_deltas: list[bytes] | None = None

    def elements(self) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = [("reasoning", t) for t in self.reasoning]
        out += [("text", t) for t in self.text]
        for index, call in enumerate(self.calls):
            out.append(("call", index))
            out += [("args", index, frag) for frag in call.fragments]
        return out


@dataclass
class _Plan:
    """Everything one response will do on the wire, decided up front."""

    status: int = 200
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    #: False: close before sending a single response byte.
    send_head: bool = True
    #: A fixed-length body (Content-Length set in headers).
    body: bytes | None = None
    #: Send only this many bytes of `body`, then end abruptly.
    truncate: int | None = None
    #: Streamed body: (seconds to wait before it, raw SSE bytes).
    frames: list[tuple[float, bytes]] = field(default_factory=list)
    has_waits: bool = False
    #: Silence after the last frame, before `end`.
    tail_wait: float = 0.0
    end: Literal["eom", "close", "reset"] = "eom"


_ERROR_DEFAULTS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("requests", "rate_limit_exceeded"),
}


def _error_body(
    status: int, message: str, type_: str | None = None, code: str | None = None, param: Any = None
) -> bytes:
    default_type, default_code = _ERROR_DEFAULTS.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return _dumps(
        {
            "error": {
                "message": message,
                "type": type_ or default_type,
                "param": param,
                "code": code if code is not None else default_code,
            }
        }
    )


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


def _json_plan(status: int, body: bytes, extra: Sequence[tuple[bytes, bytes]] = ()) -> _Plan:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra,
    ]
    return _Plan(status=status, headers=headers, body=body)


def _error_plan(
    status: int,
    message: str,
    *,
    type_: str | None = None,
    code: str | None = None,
    param: Any = None,
    headers: Iterable[tuple[str, str]] = (),
) -> _Plan:
    extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    return _json_plan(status, _error_body(status, message, type_, code, param), extra)


def _chat_usage(turn: _Turn, prompt_tokens: int) -> dict[str, Any]:
    u = turn.usage
    if u is not None and "input_tokens" in u:
        # A Responses-style override given for a Chat request: translate.
        return {
            "prompt_tokens": u.get("input_tokens", 0),
            "completion_tokens": u.get("output_tokens", 0),
            "total_tokens": u.get(
                "total_tokens", u.get("input_tokens", 0) + u.get("output_tokens", 0)
            ),
        }
    if u is not None:
        return dict(u)
    completion = len(turn.reasoning) + len(turn.text)
    completion += sum(1 + len(c.fragments) for c in turn.calls)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": len(turn.reasoning)},
    }


def _responses_usage(turn: _Turn, prompt_tokens: int) -> dict[str, Any]:
    u = turn.usage
    if u is not None and "input_tokens" in u:
        return dict(u)
    chat = _chat_usage(turn, prompt_tokens)
    inp = chat.get("prompt_tokens", 0)
    outp = chat.get("completion_tokens", 0)
    return {
        "input_tokens": inp,
        "input_tokens_details": {
            "cached_tokens": (chat.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        },
        "output_tokens": outp,
        "output_tokens_details": {
            "reasoning_tokens": (chat.get("completion_tokens_details") or {}).get(
                "reasoning_tokens", 0
            )
        },
        "total_tokens": chat.get("total_tokens", inp + outp),
    }


class _Ids:
    """Deterministic ids for one response, so tests can assert on them."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.chat = f"chatcmpl-scripted{n}"
        self.response = f"resp_scripted{n}"
        self.message = f"msg_scripted{n}"
        self.reasoning = f"rs_scripted{n}"

    def call(self, i: int) -> str:
        return f"call_scripted{self.n}_{i}"

    def fc_item(self, i: int) -> str:
        return f"fc_scripted{self.n}_{i}"


def _make_turn(step: Step, ids: _Ids, cache: dict[int, tuple[Step, _Turn]] | None = None) -> _Turn:
    if cache is not None and isinstance(step, TextReply):
        hit = cache.get(id(step))
        if hit is not None and hit[0] is step:
            return hit[1]
        if len(cache) >= 256:
            cache.clear()
        turn = _make_turn(step, ids)
        cache[id(step)] = (step, turn)
        return turn
    if isinstance(step, TextReply):
        return _Turn(
            reasoning=split_tokens(step.reasoning),
            text=step.token_list(),
            calls=[],
            finish_reason=step.finish_reason,
            usage=step.usage,
            delay=step.delay,
            first_token_delay=step.first_token_delay,
        )
    if isinstance(step, ToolCallReply):
        calls = []
        for i, (name, args) in enumerate(step.calls):
            raw = args if isinstance(args, str) else _dumps_str(args)
            size = step.fragment_size
            frags = [raw[j : j + size] for j in range(0, len(raw), size)]
            calls.append(_Call(ids.call(i), ids.fc_item(i), name, raw, frags))
        return _Turn(
            reasoning=[],
            text=split_tokens(step.text),
            calls=calls,
            finish_reason="tool_calls",
            delay=step.delay,
            finish_delay=step.finish_delay,
        )
    if isinstance(step, ErrorFrame | Stall | Drop):
        return _Turn(reasoning=[], text=split_tokens(step.text), calls=[])
    raise TypeError(f"no turn for {step!r}")


_Ending = Literal["complete", "error", "cut"]


class _ChatRenderer:
    """Chat Completions chunks, templated: per token only the delta is encoded."""

    def __init__(self, ids: _Ids, model: str, include_usage: bool, prompt_tokens: int) -> None:
        self.ids = ids
        self.model = model
        self.include_usage = include_usage
        self.prompt_tokens = prompt_tokens
        head = (
            f'{{"id":{_dumps_str(ids.chat)},"object":"chat.completion.chunk",'
            f'"created":{CREATED},"model":{_dumps_str(model)},"system_fingerprint":null,'
            f'"choices":[{{"index":0,"delta":'
        )
        self._prefix = b"data: " + head.encode()
        self._usage_null = b',"usage":null' if include_usage else b""
        self._suffix = b',"logprobs":null,"finish_reason":null}]' + self._usage_null + b"}\n\n"

    def _chunk(self, delta: bytes) -> bytes:
        return b"".join((self._prefix, delta, self._suffix))

    @staticmethod
    def _delta(turn: _Turn, el: tuple[Any, ...]) -> bytes:
        kind = el[0]
        if kind == "text":
            return b'{"content":' + _dumps(el[1]) + b"}"
        if kind == "reasoning":
            return b'{"reasoning_content":' + _dumps(el[1]) + b"}"
        if kind == "args":
            frag = {"index": el[1], "function": {"arguments": el[2]}}
            return b'{"tool_calls":[' + _dumps(frag) + b"]}"
        call = turn.calls[el[1]]
        first = {
            "index": el[1],
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        return b'{"tool_calls":[' + _dumps(first) + b"]}"

    def _deltas(self, turn: _Turn) -> list[bytes]:
        if turn.chat_deltas is not None:
            return turn.chat_deltas
        deltas = [self._delta(turn, el) for el in turn.elements()]
        if not turn.calls:
            # No per-response ids inside: safe to reuse for the next
            # response from the same (cached) turn.
            turn.chat_deltas = deltas
        return deltas

    def stream(
        self, turn: _Turn, ending: _Ending, error: str = "", *, done: bool = True
    ) -> list[tuple[float, bytes]]:
        deltas = self._deltas(turn)
        frames: list[tuple[float, bytes]] = []
        if ending == "cut" and not deltas:
            return frames  # headers only: nothing was "generated" yet
        content = b'""' if turn.text or not turn.calls else b"null"
        role = self._chunk(b'{"role":"assistant","content":' + content + b',"refusal":null}')
        # The role chunk goes out with the first token, not with the headers,
        # so first_token_delay really is silence on the wire.
        frames.append((turn.first_token_delay, role))
        prefix, suffix, delay = self._prefix, self._suffix, turn.delay
        frames += [(0.0 if i == 0 else delay, prefix + d + suffix) for i, d in enumerate(deltas)]
        if ending == "error":
            frames.append((0.0, b"data: " + _error_body(500, error) + b"\n\n"))
        elif ending == "complete":
            frames.append((turn.finish_delay, self._finish(turn, done)))
        return frames

    def _finish(self, turn: _Turn, done: bool = True) -> bytes:
        reason = _dumps(turn.finish_reason)
        last = b"".join(
            (
                self._prefix,
                b'{},"logprobs":null,"finish_reason":',
                reason,
                b"}]",
                self._usage_null,
                b"}\n\n",
            )
        )
        parts = [last]
        if self.include_usage:
            usage_chunk = {
                "id": self.ids.chat,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": self.model,
                "system_fingerprint": None,
                "choices": [],
                "usage": _chat_usage(turn, self.prompt_tokens),
            }
            parts.append(b"data: " + _dumps(usage_chunk) + b"\n\n")
        if done:
            parts.append(b"data: [DONE]\n\n")
        return b"".join(parts)

    def completion(self, turn: _Turn) -> bytes:
        text = "".join(turn.text)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": text if (text or not turn.calls) else None,
            "refusal": None,
        }
        if turn.reasoning:
            message["reasoning_content"] = "".join(turn.reasoning)
        if turn.calls:
            message["tool_calls"] = [
                {
                    "id": c.call_id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in turn.calls
            ]
        return _dumps(
            {
                "id": self.ids.chat,
                "object": "chat.completion",
                "created": CREATED,
                "model": self.model,
                "system_fingerprint": None,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": turn.finish_reason,
                    }
                ],
                "usage": _chat_usage(turn, self.prompt_tokens),
            }
        )


_INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}


class _ResponsesRenderer:
    """Responses API events with sequence numbers and item lifecycles."""

    def __init__(self, ids: _Ids, model: str, request: dict[str, Any], prompt_tokens: int) -> None:
        self.ids = ids
        self.model = model
        self.request = request
        self.prompt_tokens = prompt_tokens
        self.seq = 0
        # Stream state: finished output items, and the open one.
        self.items: list[dict[str, Any]] = []
        self.open_kind: str | None = None
        self.open_text: list[str] = []
        self.open_index = -1

    def _event(self, type_: str, **fields: Any) -> bytes:
        payload = {"type": type_, **fields, "sequence_number": self.seq}
        self.seq += 1
        return b"event: " + type_.encode() + b"\ndata: " + _dumps(payload) + b"\n\n"

    def response_object(
        self,
        status: str,
        output: list[dict[str, Any]],
        usage: dict[str, Any] | None,
        error: dict[str, Any] | None = None,
        incomplete_reason: str | None = None,
    ) -> dict[str, Any]:
        req = self.request
        return {
            "id": self.ids.response,
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "error": error,
            "incomplete_details": (
                {"reason": incomplete_reason} if incomplete_reason is not None else None
            ),
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
    def _message_item(ids: _Ids, text: str, status: str) -> dict[str, Any]:
        content = (
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
    def _reasoning_item(ids: _Ids, text: str, status: str) -> dict[str, Any]:
        content = [{"type": "reasoning_text", "text": text}] if status == "completed" else []
        return {
            "id": ids.reasoning,
            "type": "reasoning",
            "status": status,
            "summary": [],
            "content": content,
        }

    @staticmethod
    def _call_item(call: _Call, status: str) -> dict[str, Any]:
        return {
            "id": call.item_id,
            "type": "function_call",
            "status": status,
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments if status == "completed" else "",
        }

    def _output(self, turn: _Turn) -> list[dict[str, Any]]:
        out = []
        if turn.reasoning:
            out.append(self._reasoning_item(self.ids, "".join(turn.reasoning), "completed"))
        if turn.text or not turn.calls:
            out.append(self._message_item(self.ids, "".join(turn.text), "completed"))
        out += [self._call_item(c, "completed") for c in turn.calls]
        return out

    def _open(self, turn: _Turn, kind: str, call_index: int = -1) -> list[bytes]:
        parts = self._close(turn)
        self.open_kind = kind
        self.open_text = []
        self.open_index = len(self.items)
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

    def _close(self, turn: _Turn) -> list[bytes]:
        kind = self.open_kind
        if kind is None:
            return []
        idx = self.open_index
        text = "".join(self.open_text)
        parts = []
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
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
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

    def _element(self, turn: _Turn, el: tuple[Any, ...]) -> bytes:
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
        self, turn: _Turn, ending: _Ending, error: str = "", *, done: bool = True
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

    def _final(self, turn: _Turn, output: list[dict[str, Any]]) -> dict[str, Any]:
        usage = _responses_usage(turn, self.prompt_tokens)
        # Chat's "length"/"content_filter" are an incomplete response here.
        reason = _INCOMPLETE_REASONS.get(turn.finish_reason)
        if reason is None:
            return self.response_object("completed", output, usage)
        return self.response_object("incomplete", output, usage, incomplete_reason=reason)

    def completion(self, turn: _Turn) -> bytes:
        return _dumps(self._final(turn, self._output(turn)))


# ---------------------------------------------------------------------------
# The server


class ScriptedModelServer:
    """An OpenAI-compatible HTTP server whose answers come from a script.

    Each ``POST /v1/chat/completions`` or ``POST /v1/responses`` consumes the
    next step (FIFO); an empty script falls back to ``default``, or a 500
    "script exhausted" error so a test notices it asked more than it scripted.
    Every HTTP request (also ``GET /v1/models``) is appended to ``requests``;
    ``model_requests`` leaves out all but those two endpoints.

    ``record=False`` keeps nothing per request or connection (long benchmark
    runs); the ``wait_*`` helpers are then unavailable.
    """

    def __init__(
        self,
        script: Iterable[Step] = (),
        *,
        default: Step | None = None,
        model: str = "scripted-model",
        host: str = "127.0.0.1",
        port: int = 0,
        record: bool = True,
    ) -> None:
        self._script: deque[Step] = deque()
        self.add(*script)
        if default is not None:
            _check_step(default)
        self.default = default
        self.model = model
        self.host = host
        self.port = port
        self.record = record
        self.requests: list[RecordedRequest] = []
        self.connections: list[ConnectionRecord] = []
        self._started = False
        self._request_count = 0
        self._connection_count = 0
        self._response_count = 0
        self._request_arrived = trio.Event()
        self._closed_events: dict[int, trio.Event] = {}
        # id(step) -> (step, turn): a default reply served thousands of times
        # is tokenized and JSON-encoded once. Holding the step keeps its id
        # from being reused by another object.
        self._turn_cache: dict[int, tuple[Step, _Turn]] = {}

    # -- script ------------------------------------------------------------

    def add(self, *steps: Step) -> None:
        """Append steps to the script."""
        for step in steps:
            _check_step(step)
        self._script.extend(steps)

    @property
    def remaining(self) -> list[Step]:
        """Steps not consumed yet."""
        return list(self._script)

    @property
    def model_requests(self) -> list[RecordedRequest]:
        """The recorded requests to the chat completions and responses
        endpoints: ``requests`` without ``GET /v1/models`` and the like."""
        return [r for r in self.requests if r.path in _API_BY_PATH]

    def _take_step(self, streaming: bool) -> Step | None:
        if not self._script:
            return self.default
        step = self._script[0]
        # RefuseStream stays put for streaming requests so the client's
        # non-streaming fallback gets its reply.
        if not (streaming and isinstance(step, RefuseStream)):
            self._script.popleft()
        return step

    # -- addresses ---------------------------------------------------------

    @property
    def base_url(self) -> str:
        if not self._started:
            raise RuntimeError("ScriptedModelServer is not serving yet")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    # -- waiting -----------------------------------------------------------

    async def wait_request(self, n: int = 1) -> RecordedRequest:
        """Wait until at least ``n`` requests were received; return the nth (1-based)."""
        if n < 1:
            raise ValueError("n is 1-based")
        if not self.record:
            raise RuntimeError("wait_request needs record=True")
        while len(self.requests) < n:
            await self._request_arrived.wait()
        return self.requests[n - 1]

    async def wait_connection_closed(self, connection_id: int | None = None) -> ConnectionRecord:
        """Wait until a connection is closed (by either side) and return its record.

        Default: the connection that served the most recent request (waiting
        for a first request if there was none).
        """
        if not self.record:
            raise RuntimeError("wait_connection_closed needs record=True")
        if connection_id is None:
            if not self.requests:
                await self.wait_request(1)
            connection_id = self.requests[-1].connection_id
        if not 1 <= connection_id <= len(self.connections):
            raise LookupError(f"no connection {connection_id}")
        await self._closed_events[connection_id].wait()
        return self.connections[connection_id - 1]

    # -- serving -----------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled. Use with ``nursery.start(server.serve)``."""
        listeners = await trio.open_tcp_listeners(self.port, host=self.host)
        self.port = listeners[0].socket.getsockname()[1]
        self._started = True
        task_status.started(self)
        await trio.serve_listeners(self._handle_connection, listeners)

    def _mark_closed(self, record: ConnectionRecord, by: Literal["client", "server"]) -> None:
        if record.closed_at is None:
            record.closed_at = trio.current_time()
            record.closed_by = by
            event = self._closed_events.get(record.id)
            if event is not None:
                event.set()
            if not self.record:
                self._closed_events.pop(record.id, None)

    async def _handle_connection(self, stream: trio.SocketStream) -> None:
        self._connection_count += 1
        record = ConnectionRecord(id=self._connection_count, opened_at=trio.current_time())
        if self.record:
            self.connections.append(record)
            self._closed_events[record.id] = trio.Event()
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                got = await self._read_request(stream, conn, record)
                if got is None:
                    return
                if not await self._respond(stream, conn, record, *got):
                    return
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return  # Connection: close, HTTP/1.0, or a half-read body
                conn.start_next_cycle()
        finally:
            # Covers every way out, including server shutdown (Cancelled):
            # the record is settled before the socket actually closes.
            self._mark_closed(record, "server")
            await trio.aclose_forcefully(stream)

    async def _read_request(
        self, stream: trio.SocketStream, conn: h11.Connection, record: ConnectionRecord
    ) -> tuple[h11.Request, bytes] | None:
        request: h11.Request | None = None
        body: list[bytes] = []
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                await self._bad_request(stream, conn, record, str(exc))
                return None
            if event is h11.NEED_DATA:
                if conn.they_are_waiting_for_100_continue:
                    interim = conn.send(h11.InformationalResponse(status_code=100, headers=[]))
                    if interim and not await self._send(stream, record, interim):
                        return None
                try:
                    data = await stream.receive_some(_RECV_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                if not data:
                    self._mark_closed(record, "client")
                    return None
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                return request, b"".join(body)
            elif isinstance(event, h11.ConnectionClosed):
                self._mark_closed(record, "client")
                return None
            # PAUSED cannot happen here: we only read while their state is IDLE/SEND_BODY.

    async def _bad_request(
        self, stream: trio.SocketStream, conn: h11.Connection, record: ConnectionRecord, why: str
    ) -> None:
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        body = _error_body(400, f"malformed HTTP request: {why}")
        try:
            data = (
                conn.send(
                    h11.Response(
                        status_code=400,
                        headers=[
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"),
                        ],
                    )
                )
                or b""
            )
            data += conn.send(h11.Data(data=body)) or b""
            data += conn.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError:
            return
        await self._send(stream, record, data)

    async def _respond(
        self,
        stream: trio.SocketStream,
        conn: h11.Connection,
        record: ConnectionRecord,
        request: h11.Request,
        body: bytes,
    ) -> bool:
        """Answer one request. False when the connection must not be reused."""
        method = request.method.decode("ascii", "replace")
        path = request.target.decode("latin-1").split("?", 1)[0]
        headers: dict[str, str] = {}
        for name, value in request.headers:
            key = name.decode("latin-1")
            val = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {val}" if key in headers else val
        try:
            payload: Any = json.loads(body) if body else None
        except ValueError:
            payload = _INVALID_JSON

        api = _API_BY_PATH.get(path)
        step: Step | None = None
        if api is not None and method == "POST" and isinstance(payload, dict):
            step = self._take_step(payload.get("stream") is True)

        self._request_count += 1
        if self.record:
            self.requests.append(
                RecordedRequest(
                    method=method,
                    path=path,
                    headers=headers,
                    json=None if payload is _INVALID_JSON else payload,
                    connection_id=record.id,
                    received_at=trio.current_time(),
                    body=body,
                    step=step,
                )
            )
            # Wake every waiter, then arm a fresh event for the next request.
            self._request_arrived.set()
            self._request_arrived = trio.Event()

        plan = self._plan(method, path, api, payload, body, step)
        plan.headers.append((b"server", _SERVER_NAME))
        plan.headers.append((b"x-request-id", f"req_scripted{self._request_count}".encode()))
        return await self._execute(stream, conn, record, plan)

    # -- planning ----------------------------------------------------------

    def _plan(
        self,
        method: str,
        path: str,
        api: str | None,
        payload: Any,
        body: bytes,
        step: Step | None,
    ) -> _Plan:
        if path == "/v1/models" or path.startswith("/v1/models/"):
            if method != "GET":
                return _error_plan(405, f"method {method} not allowed", headers=[("Allow", "GET")])
            model = {
                "id": self.model,
                "object": "model",
                "created": CREATED,
                "owned_by": "hermes-trio",
            }
            if path == "/v1/models":
                return _json_plan(200, _dumps({"object": "list", "data": [model]}))
            if path == f"/v1/models/{self.model}":
                return _json_plan(200, _dumps(model))
            return _error_plan(
                404, f"The model '{path[11:]}' does not exist", code="model_not_found"
            )
        if api is None:
            return _error_plan(404, f"Unknown request URL: {method} {path}", code="unknown_url")
        if method != "POST":
            return _error_plan(405, f"method {method} not allowed", headers=[("Allow", "POST")])
        if payload is _INVALID_JSON or not isinstance(payload, dict):
            return _error_plan(400, "request body must be a JSON object")
        if step is None:
            return _error_plan(500, "script exhausted", code="script_exhausted")

        streaming = payload.get("stream") is True
        self._response_count += 1
        ids = _Ids(self._response_count)
        model = payload.get("model")
        model = model if isinstance(model, str) and model else self.model
        # Plausible, cheap and deterministic: ~4 bytes of JSON per token.
        prompt_tokens = max(1, len(body) // 4)
        renderer: _ChatRenderer | _ResponsesRenderer
        if api == "chat":
            opts = payload.get("stream_options")
            include_usage = isinstance(opts, dict) and opts.get("include_usage") is True
            renderer = _ChatRenderer(ids, model, include_usage, prompt_tokens)
        else:
            renderer = _ResponsesRenderer(ids, model, payload, prompt_tokens)

        if isinstance(step, ErrorReply):
            return _error_plan(
                step.status,
                step.message,
                type_=step.type,
                code=step.code,
                headers=step.headers.items(),
            )
        if isinstance(step, RefuseStream):
            if streaming:
                return _error_plan(
                    400, "streaming is not supported", param="stream", code="unsupported_value"
                )
            return _json_plan(200, renderer.completion(_make_turn(step.reply, ids)))
        if isinstance(step, JSONInsteadOfStream):
            return _json_plan(200, renderer.completion(_make_turn(step.reply, ids)))
        if isinstance(step, RawReply):
            return _raw_plan(step)
        if isinstance(step, TextReply | ToolCallReply):
            turn = _make_turn(step, ids, self._turn_cache)
            if not streaming:
                return _json_plan(200, renderer.completion(turn))
            hold = step.hold if isinstance(step, TextReply) else 0.0
            plan = _stream_plan(renderer.stream(turn, "complete", done=not hold))
            if hold:
                plan.has_waits = True
                plan.tail_wait = hold
                plan.end = "close"
            return plan
        if isinstance(step, ErrorFrame):
            if not streaming:
                return _error_plan(500, step.message)
            return _stream_plan(renderer.stream(_make_turn(step, ids), "error", step.message))
        if isinstance(step, Stall):
            if not streaming:
                # A non-streaming server that "thinks" forever sends nothing.
                return _Plan(send_head=False, has_waits=True, tail_wait=step.seconds, end="close")
            plan = _stream_plan(renderer.stream(_make_turn(step, ids), "cut"))
            plan.has_waits = True
            plan.tail_wait = step.seconds
            plan.end = "close"
            return plan
        if isinstance(step, Drop):
            end: Literal["close", "reset"] = "reset" if step.reset else "close"
            if not step.text:
                return _Plan(send_head=False, end=end)
            if not streaming:
                full = renderer.completion(_make_turn(TextReply(step.text), ids))
                plan = _json_plan(200, full)
                plan.truncate = len(full) // 2
            else:
                plan = _stream_plan(renderer.stream(_make_turn(step, ids), "cut"))
            plan.end = end
            return plan
        raise TypeError(f"not a script step: {step!r}")

    # -- writing -----------------------------------------------------------

    async def _execute(
        self, stream: trio.SocketStream, conn: h11.Connection, record: ConnectionRecord, plan: _Plan
    ) -> bool:
        if not plan.has_waits:
            # Nothing to sleep through: a failed send or the next read will
            # notice a closed peer, no watcher task needed.
            return await self._write(stream, conn, record, plan)
        ok = False
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_peer, stream, conn, record, nursery.cancel_scope)
            ok = await self._write(stream, conn, record, plan)
            nursery.cancel_scope.cancel()
        return ok and not record.closed

    async def _watch_peer(
        self,
        stream: trio.SocketStream,
        conn: h11.Connection,
        record: ConnectionRecord,
        scope: trio.CancelScope,
    ) -> None:
        """Notice a client closing while we sleep between frames."""
        while True:
            try:
                data = await stream.receive_some(_RECV_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                self._mark_closed(record, "client")
                scope.cancel()
                return
            # A pipelined next request: h11 buffers it for the next cycle.
            conn.receive_data(data)

    async def _send(self, stream: trio.SocketStream, record: ConnectionRecord, data: bytes) -> bool:
        try:
            await stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._mark_closed(record, "client")
            return False
        return True

    async def _write(
        self, stream: trio.SocketStream, conn: h11.Connection, record: ConnectionRecord, plan: _Plan
    ) -> bool:
        buf: list[bytes] = []
        size = 0
        if plan.send_head:
            buf.append(
                conn.send(
                    h11.Response(
                        status_code=plan.status, headers=plan.headers, reason=_reason(plan.status)
                    )
                )
                or b""
            )
            if plan.body is not None:
                if plan.truncate is None:
                    buf.append(conn.send(h11.Data(data=plan.body)) or b"")
                else:
                    buf.append(plan.body[: plan.truncate])
        # Chunk framing by hand (h11 would do the same, one call per frame);
        # HTTP/1.0 peers get a close-delimited body, as h11 chose in the headers.
        version = conn.their_http_version
        chunked = version is not None and version >= b"1.1"
        due = trio.current_time()
        for gap, frame in plan.frames:
            if gap > 0:
                # Deadlines accumulate from the start, so a loaded server
                # keeps the scripted rate by coalescing frames that are late.
                due += gap
                if due > trio.current_time():
                    if buf:
                        if not await self._send(stream, record, b"".join(buf)):
                            return False
                        buf = []
                        size = 0
                    await trio.sleep_until(due)
            if chunked:
                if not frame:
                    continue  # an empty chunk would end the body there
                frame = b"%x\r\n%b\r\n" % (len(frame), frame)
            buf.append(frame)
            size += len(frame)
            if size >= _FLUSH_BYTES:
                if not await self._send(stream, record, b"".join(buf)):
                    return False
                buf = []
                size = 0
        if plan.tail_wait > 0:
            if buf and not await self._send(stream, record, b"".join(buf)):
                return False
            buf = []
            await trio.sleep(plan.tail_wait)
        if plan.end == "eom":
            buf.append(conn.send(h11.EndOfMessage()) or b"")
            return await self._send(stream, record, b"".join(buf))
        if buf and not await self._send(stream, record, b"".join(buf)):
            return False
        if plan.end == "reset":
            # SO_LINGER 0 turns close() into an RST, like a crashed upstream.
            stream.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._mark_closed(record, "server")
        await trio.aclose_forcefully(stream)
        return False


_STEP_TYPES = (
    TextReply,
    ToolCallReply,
    ErrorReply,
    ErrorFrame,
    Stall,
    Drop,
    RefuseStream,
    JSONInsteadOfStream,
    RawReply,
)


def _check_step(step: object) -> None:
    # Fail in the test that scripted it, not later inside the server task.
    if not isinstance(step, _STEP_TYPES):
        raise TypeError(f"not a script step: {step!r}")


class _InvalidJSON:
    pass


_INVALID_JSON: Any = _InvalidJSON()


def _stream_plan(frames: list[tuple[float, bytes]]) -> _Plan:
    return _Plan(
        status=200,
        headers=[(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
        frames=frames,
        has_waits=any(gap > 0 for gap, _ in frames),
    )


def _raw_plan(step: RawReply) -> _Plan:
    pieces = step.pieces()
    headers = [(b"content-type", step.content_type.encode("latin-1"))]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in step.headers.items()]
    plan = _Plan(
        status=step.status,
        headers=headers,
        frames=[(step.delay if i else 0.0, piece) for i, piece in enumerate(pieces)],
        has_waits=step.delay > 0 or step.hold > 0,
    )
    if step.hold:
        plan.tail_wait = step.hold
        plan.end = "close"
    return plan


@asynccontextmanager
async def open_scripted_server(
    script: Iterable[Step] = (), **kwargs: Any
) -> AsyncIterator[ScriptedModelServer]:
    """Serve a :class:`ScriptedModelServer` for the duration of the block."""
    server = ScriptedModelServer(script, **kwargs)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
