"""What the plain model relay passes on (sans-IO): whole events however the
bytes were cut, errors redacted, the cost counted, a cut stream ended with
an error frame."""

from __future__ import annotations

import json
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from hermes_trio import redaction
from hermes_trio.wire.relay import (
    CUT_CODE,
    RelayedStream,
    completion_tokens,
    error_message,
    redacted_json,
)
from hermes_trio.wire.sse import SSEDecoder, SSEEvent

SECRET = "sk-relay-unit-0123456789abcdef"
redaction.register_secret(SECRET)


def _chunk(**delta: object) -> bytes:
    body = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


STREAM = b"".join(
    [
        _chunk(role="assistant", content=""),
        b": keep-alive\n\n",
        _chunk(content="Hel"),
        _chunk(content="lo"),
        _chunk(reasoning_content="hm"),
        _chunk(tool_calls=[{"index": 0, "function": {"arguments": "{}"}}]),
        b'data: {"id":"c1","choices":[],"usage":{"completion_tokens":42}}\n\n',
        b"data: [DONE]\n\n",
    ]
)


def _events(data: bytes) -> list[SSEEvent]:
    return [e for e in SSEDecoder().feed(data) if isinstance(e, SSEEvent)]


def _relay(pieces: list[bytes]) -> tuple[RelayedStream, bytes]:
    stream = RelayedStream()
    return stream, b"".join(stream.feed(p) for p in pieces)


@given(st.lists(st.integers(0, len(STREAM)), max_size=12))
def test_events_pass_whole_and_the_same_however_the_bytes_were_cut(cuts: list[int]) -> None:
    edges = [0, *sorted(cuts), len(STREAM)]
    stream, out = _relay([STREAM[a:b] for a, b in pairwise(edges)])
    assert _events(out) == _events(STREAM)
    assert b": keep-alive\n\n" in out
    assert stream.finished and stream.end("cut") == b""
    assert stream.chunks == 4 and stream.reported == 42 and stream.spent == 42


def test_without_usage_the_chunks_that_said_something_are_counted() -> None:
    stream, _ = _relay([STREAM.replace(b'"usage":{"completion_tokens":42}', b'"usage":null')])
    assert stream.reported is None and stream.spent == 4


def test_an_error_frame_is_redacted_and_ends_the_stream() -> None:
    error = {"error": {"message": f"bad key {SECRET}", "type": "x", "code": None}}
    frame = b"data: " + json.dumps(error).encode() + b"\n\n"
    stream, out = _relay([_chunk(content="a"), frame[:20], frame[20:]])
    assert SECRET.encode() not in out and SECRET[:8].encode() not in out
    last = json.loads(_events(out)[-1].data)
    assert last["error"]["message"] == "bad key <redacted>"
    assert stream.finished and stream.end("cut") == b""


def test_named_error_events_and_text_that_is_not_json_are_redacted() -> None:
    stream, out = _relay([f"event: error\ndata: oops {SECRET}\n\n".encode()])
    assert _events(out) == [SSEEvent("oops <redacted>", "error")]
    assert stream.finished
    stream, out = _relay([f"data: plain {SECRET}\n\n".encode()])
    assert _events(out) == [SSEEvent("plain <redacted>")]
    assert not stream.finished


def test_a_stream_without_its_end_gets_an_error_frame() -> None:
    stream, out = _relay([_chunk(content="a"), _chunk(content="b")[:9]])
    tail = stream.end(f"cut off by {SECRET}")
    (event,) = _events(tail)
    error = json.loads(event.data)["error"]
    assert error == {
        "message": "cut off by <redacted>",
        "type": "server_error",
        "param": None,
        "code": CUT_CODE,
    }
    # Only once.
    assert stream.end("again") == b""
    assert stream.spent == 1


def test_whole_answers_redacted_and_counted() -> None:
    raw = json.dumps({"error": {"message": f"Incorrect API key provided: {SECRET}"}}).encode()
    body = redacted_json(raw)
    assert error_message(body) == "Incorrect API key provided: <redacted>"
    assert redacted_json(b"<html>") is None and redacted_json(b"\xff") is None
    assert error_message({"error": "plain"}) == "plain" and error_message([]) is None
    answer = {"choices": [{"message": {"content": "x" * 10}}], "usage": {"completion_tokens": 3}}
    assert completion_tokens(answer) == 3
    del answer["usage"]
    assert completion_tokens(answer) == 3  # 10 characters, about 4 a token
    assert completion_tokens("nonsense") == 0
