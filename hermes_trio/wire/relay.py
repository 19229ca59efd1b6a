"""What the plain model relay passes on from the model server, decided
without IO (the relay itself is ``hermes_trio.server.relay.route``).

A relayed Chat Completions stream goes through :class:`RelayedStream` one
read at a time: events are passed on whole (a frame is never cut between
two writes), comments too; an error the model server sends — an
``{"error": …}`` frame or an ``event: error`` — is redacted on its way (a
server that refuses a key tends to quote it, and that key is ours); and the
stream counts what it cost: the usage the model server reported, where it
sent one, else one token per chunk that said something. A stream that ends
without ``[DONE]`` or an error gets :meth:`RelayedStream.end`'s error frame,
so a client never takes a cut answer for a whole one.

:func:`redacted_json` and :func:`completion_tokens` do the same for a
whole (non-streamed) answer.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..redaction import redact
from .chat_out import error_frame
from .sse import SSEComment, SSEDecoder, SSEEvent, encode_comment, encode_event

__all__ = ["CUT_CODE", "RelayedStream", "completion_tokens", "error_message", "redacted_json"]

CUT_CODE = "upstream_stream_cut"
"""The code of the error frame that ends a stream the model server cut."""

_DONE = "[DONE]"
# About four characters a token, for an answer that came without its usage.
_CHARS_PER_TOKEN = 4
_SAYS = ("content", "reasoning_content", "reasoning", "tool_calls", "refusal")


class RelayedStream:
    """One relayed stream: feed it the model server's bytes, pass on what
    :meth:`feed` returns, and at the upstream's end what :meth:`end` does.

    ``max_event`` bounds one unfinished event (``SSEError`` beyond it).
    """

    def __init__(self, *, max_event: int | None = None) -> None:
        self._decoder = SSEDecoder(comments=True, max_buffer=max_event)
        self._last_id: str | None = None
        self.chunks = 0
        """Chunks that said something (content, reasoning, a tool call)."""
        self.reported: int | None = None
        """``usage.completion_tokens`` as the model server reported it."""
        self.finished = False
        """``[DONE]`` or an error came: the stream has its end."""

    @property
    def spent(self) -> int:
        """The completion tokens the stream cost, as far as it went."""
        return self.reported if self.reported is not None else self.chunks

    def feed(self, data: bytes) -> bytes:
        """The whole events and comments ``data`` completed, as they go on."""
        out: list[bytes] = []
        for item in self._decoder.feed(data):
            if isinstance(item, SSEComment):
                out.append(encode_comment(item.text))
            else:
                out.append(self._pass(item))
        return b"".join(out)

    def end(self, message: str, *, code: str = CUT_CODE) -> bytes:
        """The last bytes of a stream whose upstream ended (or failed) here:
        nothing when it had its end, else an error frame saying
        ``message``."""
        if self.finished:
            return b""
        self.finished = True
        return error_frame(redact(message), type="server_error", code=code)

    def _pass(self, event: SSEEvent) -> bytes:
        data = event.data
        kind = None if event.event == "message" else event.event
        new_id = event.id if event.id != self._last_id else None
        self._last_id = event.id
        if data == _DONE:
            self.finished = True
        elif kind == "error":
            self.finished = True
            data = redact(data)
        else:
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError:
                # Not a chunk: whatever it is, it may quote the key.
                data = redact(data)
            else:
                if isinstance(chunk, dict):
                    if "error" in chunk:
                        self.finished = True
                        data = redact(data)
                    else:
                        self._count(chunk)
        return encode_event(data, event=kind, id=new_id)

    def _count(self, chunk: dict[str, object]) -> None:
        reported = _reported(chunk.get("usage"))
        if reported is not None:
            self.reported = reported
        choices = chunk.get("choices")
        if isinstance(choices, list) and any(
            isinstance(c, dict) and isinstance(c.get("delta"), dict) and _says(c["delta"])
            for c in choices
        ):
            self.chunks += 1


def _reported(usage: object) -> int | None:
    """``usage.completion_tokens`` when the model server reported a count."""
    if isinstance(usage, dict):
        value = usage.get("completion_tokens")
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _says(part: dict[str, object]) -> bool:
    return any(part.get(name) for name in _SAYS)


def redacted_json(raw: bytes) -> Any | None:
    """A whole answer's JSON with every secret redacted; None when it is
    not JSON."""
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return None
    try:
        return orjson.loads(redact(text))
    except orjson.JSONDecodeError:
        return None


def error_message(body: Any) -> str | None:
    """The message of an OpenAI-style error body, if it has one."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return None


def completion_tokens(answer: Any) -> int:
    """What a whole ``chat.completion`` cost: its ``usage.completion_tokens``,
    else an estimate from the length of what its choices said."""
    if not isinstance(answer, dict):
        return 0
    reported = _reported(answer.get("usage"))
    if reported is not None:
        return reported
    said = 0
    choices = answer.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict):
            said += sum(
                len(message[name]) if isinstance(message.get(name), str) else 0 for name in _SAYS
            )
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                said += len(orjson.dumps(calls))
    return -(-said // _CHARS_PER_TOKEN)
