"""Building Chat Completions responses and stream chunks.

The per-token chunk is the hot path of every stream, so ``content_frame``
fills a prebuilt byte template around the JSON-escaped text instead of
encoding a whole dict per token; ``tests/wire`` checks it parses to exactly
what the dict form would be.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from typing import TYPE_CHECKING

import orjson

from ..events import Usage
from .approval_events import ApprovalEventFields
from .chat_types import (
    ChatChunkDelta,
    ChatChunkToolCall,
    ChatCompletion,
    ChatCompletionMessage,
    ChatUsage,
)
from .context_events import ContextCompactedFields
from .messages import ChatToolCall
from .sse import encode_event
from .tool_events import ToolEventFields

if TYPE_CHECKING:
    # The type only: importing ``listener`` at run time would load trio.
    from ..listener.errors import ErrorBody

__all__ = [
    "ChatStreamFrames",
    "completion_body",
    "error_frame",
    "new_completion_id",
    "usage_dict",
]

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

# The finish reasons Chat Completions clients know; a turn's other endings
# (an interruption) would break their parsers, and still ended the answer.
_FINISH_REASONS = frozenset({"stop", "length", "tool_calls"})


def _finish_reason(reason: str) -> str:
    return reason if reason in _FINISH_REASONS else "stop"


def new_completion_id() -> str:
    return "chatcmpl-" + secrets.token_hex(12)


def usage_dict(usage: Usage) -> ChatUsage:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


class ChatStreamFrames:
    """The SSE frames of one ``chat.completion.chunk`` stream.

    Keeps the invariants: same ``id``/``created`` everywhere, ``role`` only in
    the first delta, exactly one ``finish_reason``, ``usage: null`` on every
    chunk when ``include_usage`` (and the separate usage chunk at the end).
    """

    def __init__(self, id: str, created: int, model: str, *, include_usage: bool) -> None:
        self.id = id
        self.created = created
        self.model = model
        self.include_usage = include_usage
        self._started = False
        self._finished = False
        # Every frame carries an SSE id (its position) so a client can tell
        # exactly which chunk it saw last.
        self._seq = 0
        head = {"id": id, "object": "chat.completion.chunk", "created": created, "model": model}
        # '{"id":…,"model":"m"' without the closing brace, reused for every chunk.
        self._head = _dumps(head)[:-1]
        self._usage_null = ',"usage":null' if include_usage else ""
        tail = ',"logprobs":null,"finish_reason":null}]' + self._usage_null + "}"
        choices = ',"choices":[{"index":0,"delta":{"content":'
        self._content_prefix = ("\ndata: " + self._head + choices).encode()
        self._content_suffix = ("}" + tail + "\n\n").encode()

    @property
    def started(self) -> bool:
        return self._started

    @property
    def finished(self) -> bool:
        """A terminal frame (the finish or an error) was made."""
        return self._finished

    def _chunk(self, delta: ChatChunkDelta, finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return self._frame(f',"choices":[{_dumps(choice)}]' + self._usage_null)

    def _frame(self, rest: str) -> bytes:
        """One chunk: the shared head (encoded once), then ``rest``."""
        self._seq += 1
        return encode_event(self._head + rest + "}", id=str(self._seq))

    def start(self) -> bytes:
        """The first chunk: the role, with empty content as OpenAI sends it."""
        if self._started:
            return b""
        self._started = True
        return self._chunk({"role": "assistant", "content": ""})

    def content(self, text: str) -> bytes:
        # JSON escapes CR and LF, so the template stays one data line.
        prefix = self.start() if not self._started else b""
        self._seq += 1
        return b"".join(
            (
                prefix,
                b"id: %d" % self._seq,
                self._content_prefix,
                orjson.dumps(text),
                self._content_suffix,
            )
        )

    def reasoning(self, text: str) -> bytes:
        prefix = self.start() if not self._started else b""
        return prefix + self._chunk({"reasoning_content": text})

    def tool_call_delta(
        self, index: int, arguments: str, *, call_id: str = "", name: str = ""
    ) -> bytes:
        """One piece of a client-side tool call as the model writes it: with
        ``name`` the call's first fragment (id, type and name, empty
        arguments), then ``arguments`` as a fragment of its own."""
        out = [self.start()]
        if name:
            first: ChatChunkToolCall = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
            out.append(self._chunk({"tool_calls": [first]}))
        if arguments:
            piece: ChatChunkToolCall = {"index": index, "function": {"arguments": arguments}}
            out.append(self._chunk({"tool_calls": [piece]}))
        return b"".join(out)

    def finish(self, reason: str, usage: Usage | None = None) -> bytes:
        """The finish chunk, the usage chunk when asked for, and ``[DONE]``;
        a ``reason`` Chat Completions does not know is sent as ``stop``."""
        if self._finished:
            return b""
        self._finished = True
        out = [self.start(), self._chunk({}, finish_reason=_finish_reason(reason))]
        if self.include_usage:
            out.append(self._frame(f',"choices":[],"usage":{_dumps(usage_dict(usage or Usage()))}'))
        self._seq += 1
        out.append(f"id: {self._seq}\ndata: [DONE]\n\n".encode())
        return b"".join(out)

    def error(self, message: str, *, type: str = "server_error", code: str | None = None) -> bytes:
        """An ``{"error": …}`` frame, numbered like every other frame."""
        self._finished = True
        self._seq += 1
        return error_frame(message, type=type, code=code, id=str(self._seq))

    def extension(
        self, event: str, fields: ToolEventFields | ApprovalEventFields | ContextCompactedFields
    ) -> bytes:
        """A named event of our documented stream extension (opt-in only):
        its ``type`` and ``fields``."""
        self._seq += 1
        return encode_event(_dumps({"type": event, **fields}), event=event, id=str(self._seq))


def error_frame(
    message: str, *, type: str = "server_error", code: str | None = None, id: str | None = None
) -> bytes:
    body: ErrorBody = {"error": {"message": message, "type": type, "param": None, "code": code}}
    return encode_event(_dumps(body), id=id)


def completion_body(
    *,
    id: str,
    created: int,
    model: str,
    content: str | None,
    finish_reason: str,
    usage: Usage,
    tool_calls: Iterable[ChatToolCall] = (),
    reasoning: str | None = None,
) -> ChatCompletion:
    """A non-streaming ``chat.completion`` object; a ``finish_reason`` Chat
    Completions does not know is sent as ``stop``."""
    message: ChatCompletionMessage = {"role": "assistant", "content": content, "refusal": None}
    calls = list(tool_calls)
    if calls:
        message["tool_calls"] = calls
    if reasoning:
        message["reasoning_content"] = reasoning
    return {
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _finish_reason(finish_reason),
            }
        ],
        "usage": usage_dict(usage),
    }
