"""Server-sent events: an incremental decoder and the encoders.

The decoder follows the WHATWG EventSource parsing rules
(https://html.spec.whatwg.org/multipage/server-sent-events.html). It never
touches a socket: feed it bytes as they arrive, in pieces of any size, and it
returns the events those bytes completed.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

__all__ = [
    "KEEPALIVE",
    "SSEComment",
    "SSEDecoder",
    "SSEError",
    "SSEEvent",
    "encode_comment",
    "encode_event",
]

_BOM = "\ufeff"


class SSEError(ValueError):
    """The stream broke a limit the decoder was given."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event.

    ``id`` is the stream's last event id at dispatch time: per the spec it
    persists across events until an ``id:`` field changes it (``""`` resets
    it). ``retry`` is the value of a ``retry:`` field seen since the previous
    dispatched event, if any.
    """

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


@dataclass(frozen=True, slots=True)
class SSEComment:
    """A ``:`` line; only reported by ``SSEDecoder(comments=True)``."""

    text: str


class SSEDecoder:
    """Incremental ``text/event-stream`` parser.

    Bytes may be split anywhere, including inside a UTF-8 character or between
    the CR and LF of a CRLF.

    ``max_buffer`` bounds what may wait for its end: the characters of the
    unfinished line plus the data of the unfinished event. A stream that
    passes it (a line that never ends) raises :class:`SSEError` instead of
    growing without bound.
    """

    __slots__ = (
        "_after_cr",
        "_at_start",
        "_closed",
        "_comments",
        "_data",
        "_data_size",
        "_event",
        "_last_id",
        "_max",
        "_partial",
        "_partial_size",
        "_retry",
        "_utf8",
    )

    def __init__(self, *, comments: bool = False, max_buffer: int | None = None) -> None:
        self._comments = comments
        self._max = max_buffer
        # Invalid bytes become U+FFFD, as the spec's "UTF-8 decode" does.
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._at_start = True
        # A CR ended the previous feed: an LF opening the next one belongs to it.
        self._after_cr = False
        # Pieces of the current, not yet terminated line. A list, so that a
        # long line arriving in many small feeds is joined once, not re-copied.
        self._partial: list[str] = []
        self._partial_size = 0
        self._data: list[str] = []
        self._data_size = 0
        self._event = ""
        self._last_id: str | None = None
        self._retry: int | None = None
        self._closed = False

    def feed(self, data: bytes) -> list[SSEEvent | SSEComment]:
        """Consume ``data``; return the events and comments it completed."""
        if self._closed:
            raise RuntimeError("SSEDecoder.feed() called after close()")
        text = self._utf8.decode(data)
        if not text:
            return []
        if self._at_start:
            self._at_start = False
            if text[0] == _BOM:
                text = text[1:]
                if not text:
                    return []
        if self._after_cr:
            self._after_cr = False
            if text[0] == "\n":
                text = text[1:]
                if not text:
                    return []
        if "\r" in text:
            self._after_cr = text[-1] == "\r"
            # A lone CR at the end is already a complete line end; normalising
            # it to LF keeps the split below uniform.
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" not in text:
            self._partial.append(text)
            self._partial_size += len(text)
            if self._max is not None and self._partial_size + self._data_size > self._max:
                self._overflow()
            return []
        lines = text.split("\n")
        if self._partial:
            self._partial.append(lines[0])
            lines[0] = "".join(self._partial)
            self._partial.clear()
        rest = lines.pop()
        self._partial_size = len(rest)
        if rest:
            self._partial.append(rest)
        out = self._process(lines)
        if self._max is not None and self._partial_size + self._data_size > self._max:
            self._overflow()
        return out

    def _overflow(self) -> None:
        raise SSEError(f"an event is longer than {self._max} characters and still not complete")

    def close(self) -> list[SSEEvent | SSEComment]:
        """End of stream.

        Every complete event was already returned by :meth:`feed`; an event
        without its terminating blank line is dropped, as the spec says, so
        this returns an empty list. Further feeding is an error.
        """
        self._utf8.decode(b"", final=True)
        self._closed = True
        self._partial.clear()
        self._partial_size = 0
        self._data = []
        self._data_size = 0
        self._event = ""
        return []

    def _process(self, lines: list[str]) -> list[SSEEvent | SSEComment]:
        out: list[SSEEvent | SSEComment] = []
        for line in lines:
            if not line:
                if self._data:
                    out.append(
                        SSEEvent(
                            "\n".join(self._data),
                            self._event or "message",
                            self._last_id,
                            self._retry,
                        )
                    )
                    self._data = []
                    self._data_size = 0
                    self._retry = None
                # Per spec the event type resets even when nothing dispatches.
                self._event = ""
                continue
            if line[0] == ":":
                if self._comments:
                    out.append(SSEComment(line[2:] if line[1:2] == " " else line[1:]))
                continue
            name, _, value = line.partition(":")
            if value[:1] == " ":
                value = value[1:]
            if name == "data":
                self._data.append(value)
                self._data_size += len(value) + 1
            elif name == "event":
                self._event = value
            elif name == "id":
                if "\0" not in value:
                    self._last_id = value
            elif name == "retry":
                if value.isascii() and value.isdigit():
                    self._retry = int(value)
        return out


def _single_line(field: str, value: str) -> str:
    if "\n" in value or "\r" in value:
        raise ValueError(f"SSE {field} must not contain a line break: {value!r}")
    return value


def encode_event(
    data: str,
    *,
    event: str | None = None,
    id: str | None = None,
    retry: int | None = None,
) -> bytes:
    """Encode one event as UTF-8, ending with the blank line that dispatches it.

    Each line of ``data`` becomes its own ``data:`` line; CR, LF and CRLF all
    count as line breaks, so they decode back as LF.
    """
    if "\r" in data:
        data = data.replace("\r\n", "\n").replace("\r", "\n")
    body = "data: " + data.replace("\n", "\ndata: ") + "\n\n"
    if event is None and id is None and retry is None:
        return body.encode()
    head = []
    if event is not None:
        head.append(f"event: {_single_line('event', event)}\n")
    if id is not None:
        if "\0" in id:
            # A decoder ignores such an id; refuse rather than lose it silently.
            raise ValueError(f"SSE id must not contain NUL: {id!r}")
        head.append(f"id: {_single_line('id', id)}\n")
    if retry is not None:
        if isinstance(retry, bool) or not isinstance(retry, int) or retry < 0:
            raise ValueError(f"SSE retry must be a non-negative int: {retry!r}")
        head.append(f"retry: {retry}\n")
    head.append(body)
    return "".join(head).encode()


def encode_comment(text: str = "keep-alive") -> bytes:
    """Encode a comment block: clients ignore it, proxies see traffic."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return (": " + text.replace("\n", "\n: ") + "\n\n").encode()


# Sent on a silent stream so proxies and clients do not time it out as dead.
KEEPALIVE = encode_comment("keep-alive")
