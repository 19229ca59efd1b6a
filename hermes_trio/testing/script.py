"""Script steps for :class:`~hermes_trio.testing.ScriptedModelServer`.

Each step describes how the server answers one model request. Steps are
frozen dataclasses so a script can be built once and shared between tests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "Drop",
    "ErrorFrame",
    "ErrorReply",
    "JSONInsteadOfStream",
    "RawReply",
    "RefuseStream",
    "Stall",
    "Step",
    "TextReply",
    "ToolCallReply",
    "split_tokens",
]

_TOKEN_RE = re.compile(r"\s*\S+|\s+")


def split_tokens(text: str) -> list[str]:
    """Split text into word-ish tokens that keep their leading whitespace.

    Joining the result gives back ``text`` exactly, which is what a client
    accumulating deltas must reconstruct.
    """
    return _TOKEN_RE.findall(text)


@dataclass(frozen=True)
class TextReply:
    """A normal assistant answer, streamed token by token when asked to."""

    text: str = "Hello from the scripted model."
    tokens: Sequence[str] | None = None
    delay: float = 0.0
    first_token_delay: float = 0.0
    reasoning: str = ""
    usage: dict[str, Any] | None = None
    finish_reason: str = "stop"
    #: Seconds to keep the connection open after the answer, with no
    #: ``data: [DONE]`` and no end of the body (Responses: after
    #: ``response.completed``); then the server closes it. 0: a normal end.
    hold: float = 0.0

    def token_list(self) -> list[str]:
        return list(self.tokens) if self.tokens is not None else split_tokens(self.text)


@dataclass(frozen=True)
class ToolCallReply:
    """An assistant turn that calls tools (optionally after some text).

    ``finish_delay`` is silence after the last argument fragment, before the
    stream says the calls are finished: a client that shows nothing until then does
    not stream tool calls as they arrive.
    """

    calls: Sequence[tuple[str, dict[str, Any] | str]]
    text: str = ""
    fragment_size: int = 4
    delay: float = 0.0
    finish_delay: float = 0.0

    def __post_init__(self) -> None:
        if self.fragment_size < 1:
            raise ValueError("fragment_size must be >= 1")


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error status with an OpenAI error body, before any body byte.

    ``type``/``code`` default to what OpenAI uses for ``status``.
    """

    status: int = 500
    message: str = "scripted failure"
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    type: str | None = None
    code: str | None = None


@dataclass(frozen=True)
class ErrorFrame:
    """A stream that starts normally, then carries an error frame and ends."""

    text: str = "partial answer"
    message: str = "upstream exploded"


@dataclass(frozen=True)
class Stall:
    """Send headers (and ``text`` tokens), then nothing for ``seconds``, then close."""

    text: str = ""
    seconds: float = 3600.0


@dataclass(frozen=True)
class Drop:
    """Send ``text`` tokens, then close the TCP connection mid-response.

    ``text=""`` closes before any response byte. ``reset=True`` makes the
    close an RST (SO_LINGER 0) instead of a FIN, like a crashed upstream.
    """

    text: str = ""
    reset: bool = False


@dataclass(frozen=True)
class RefuseStream:
    """A server without streaming support.

    A ``stream: true`` request gets a 400 "streaming is not supported" and the
    step stays at the head of the script, so the client's non-streaming
    fallback request gets ``reply`` as plain JSON (and consumes the step).
    """

    reply: TextReply | ToolCallReply = TextReply()


@dataclass(frozen=True)
class JSONInsteadOfStream:
    """A server that ignores ``stream: true`` and answers with plain JSON."""

    reply: TextReply = TextReply()


@dataclass(frozen=True)
class RawReply:
    """Exactly these bytes as the response body, for misbehaviour no other
    step scripts: garbage or deeply nested chunks, an HTML page with status
    200, a line that never ends, a compressed body.

    ``body`` is one piece or several, with ``delay`` seconds before each
    piece after the first. ``hold`` > 0 keeps the connection open that long
    after the last piece, then closes it without ending the body. Streaming
    and non-streaming requests get the same answer.
    """

    body: bytes | Sequence[bytes] = b""
    status: int = 200
    content_type: str = "text/event-stream"
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    delay: float = 0.0
    hold: float = 0.0

    def pieces(self) -> list[bytes]:
        return [self.body] if isinstance(self.body, bytes) else list(self.body)


Step = (
    TextReply
    | ToolCallReply
    | ErrorReply
    | ErrorFrame
    | Stall
    | Drop
    | RefuseStream
    | JSONInsteadOfStream
    | RawReply
)
