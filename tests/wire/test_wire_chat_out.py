"""The outgoing Chat Completions chunks: the byte template equals the dict form."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.events import Usage
from hermes_trio.wire.chat_out import ChatStreamFrames, completion_body
from hermes_trio.wire.sse import SSEDecoder, SSEEvent


def decode(data: bytes) -> list[SSEEvent]:
    events = SSEDecoder().feed(data)
    assert all(isinstance(e, SSEEvent) for e in events)
    return events  # type: ignore[return-value]


@given(st.text(), st.booleans())
def test_content_template_matches_the_dict_form(text: str, include_usage: bool) -> None:
    frames = ChatStreamFrames("chatcmpl-1", 123, 'm"odel', include_usage=include_usage)
    frames.start()
    events = decode(frames.content(text))
    assert len(events) == 1
    chunk = json.loads(events[0].data)
    expected = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 123,
        "model": 'm"odel',
        "choices": [
            {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}
        ],
    }
    if include_usage:
        expected["usage"] = None
    assert chunk == expected


def test_a_whole_stream_keeps_the_invariants() -> None:
    frames = ChatStreamFrames("chatcmpl-x", 7, "m", include_usage=True)
    data = (
        frames.content("Hel")
        + frames.content("lo")
        + frames.tool_call_delta(0, "", call_id="call_1", name="f")
        + frames.tool_call_delta(0, '{"a"')
        + frames.tool_call_delta(0, ": 1}")
        + frames.finish("tool_calls", Usage(1, 2, 3))
    )
    events = decode(data)
    assert events[-1].data == "[DONE]"
    chunks = [json.loads(e.data) for e in events[:-1]]
    ids = [int(e.id or 0) for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert {c["id"] for c in chunks} == {"chatcmpl-x"} and {c["created"] for c in chunks} == {7}
    with_role = [c for c in chunks if c["choices"] and "role" in c["choices"][0]["delta"]]
    assert with_role == [chunks[0]]
    finishes = [
        c["choices"][0]["finish_reason"]
        for c in chunks
        if c["choices"] and c["choices"][0]["finish_reason"]
    ]
    assert finishes == ["tool_calls"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 3
    assert all(c["usage"] is None for c in chunks[:-1])
    calls = [
        tc for c in chunks if c["choices"] for tc in c["choices"][0]["delta"].get("tool_calls", [])
    ]
    assert calls[0]["id"] == "call_1" and calls[0]["function"]["name"] == "f"
    assert all("id" not in tc for tc in calls[1:])
    assert "".join(tc["function"]["arguments"] for tc in calls) == '{"a": 1}'
    # finish is idempotent: a second call writes nothing.
    assert frames.finish("stop") == b""


def test_completion_body_shape() -> None:
    body = completion_body(
        id="c", created=1, model="m", content="hi", finish_reason="stop", usage=Usage(1, 1, 2)
    )
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "hi", "refusal": None}
    assert body["usage"]["total_tokens"] == 2
