"""Whatever a model server sends, the wire layer answers with a result or a
ChunkError / ProviderError / SSEError naming what was wrong, never with an
unexpected exception; and what it passes on is safe to encode again (no lone
surrogates, no numbers our own JSON encoder refuses)."""

from __future__ import annotations

import copy
import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_trio.events import Usage
from hermes_trio.wire.chat_chunks import (
    AssistantMessage,
    ChatChunkAccumulator,
    ChunkDelta,
    message_from_completion,
)
from hermes_trio.wire.responses_stream import ResponsesStreamAccumulator, message_from_response
from hermes_trio.wire.sse import SSEDecoder, SSEError, SSEEvent
from hermes_trio.wire.upstream_fields import ChunkError, ProviderError
from hermes_trio.wire.upstream_json import loads_upstream

EXPECTED = (ChunkError, ProviderError)

# Text with lone surrogates in it now and then.
_text = st.text(
    alphabet=st.characters(codec=None, exclude_categories=())
    | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    max_size=8,
)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # unbounded: far past 64 bits
    | st.floats()  # nan and the infinities included
    | _text
)
_values = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(_text | st.sampled_from(["type", "index", "text", "delta"]), children)
    ),
    max_leaves=12,
)


def _deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


# Values worth trying in every field, besides the random ones.
_nasty = st.sampled_from(
    [_deep(300), _deep(1100), 2**64, -(2**70), 10**400, float("inf"), "\ud800", {"a": _deep(300)}]
)
_anything = _values | _nasty


def _encodable(value: object) -> None:
    """What the wire layer hands on must survive our own orjson encoding."""
    orjson.dumps(value, default=lambda o: o.__dict__ if hasattr(o, "__dict__") else repr(o))


def _check_delta(delta: ChunkDelta) -> None:
    assert isinstance(delta, ChunkDelta)
    _encodable([delta.content, delta.reasoning, delta.finish_reason])
    for call in delta.tool_calls:
        _encodable([getattr(call, "id", ""), getattr(call, "name", ""), getattr(call, "text", "")])


def _check_message(message: AssistantMessage, usage: Usage | None) -> None:
    _encodable([message.content, message.reasoning, message.finish_reason])
    _encodable([call.to_message() for call in message.tool_calls])
    if usage is not None:
        counts = [
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens,
            usage.reasoning_tokens,
            usage.cached_tokens,
        ]
        assert all(isinstance(n, int) and 0 <= n < 2**53 for n in counts), counts


# -- Chat Completions chunks -----------------------------------------------------

_CHUNK = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "model": "m",
    "choices": [
        {
            "index": 0,
            "delta": {
                "role": "assistant",
                "content": "hi",
                "reasoning_content": "hmm",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    }
                ],
            },
            "finish_reason": None,
        }
    ],
    "usage": {
        "prompt_tokens": 1,
        "completion_tokens": 2,
        "total_tokens": 3,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    },
}

_CHUNK_PATHS: list[tuple[Any, ...]] = [
    (),
    ("id",),
    ("model",),
    ("error",),
    ("usage",),
    ("usage", "prompt_tokens"),
    ("usage", "total_tokens"),
    ("usage", "prompt_tokens_details"),
    ("usage", "completion_tokens_details", "reasoning_tokens"),
    ("choices",),
    ("choices", 0),
    ("choices", 0, "index"),
    ("choices", 0, "finish_reason"),
    ("choices", 0, "delta"),
    ("choices", 0, "delta", "content"),
    ("choices", 0, "delta", "reasoning_content"),
    ("choices", 0, "delta", "reasoning"),
    ("choices", 0, "delta", "tool_calls"),
    ("choices", 0, "delta", "tool_calls", 0),
    ("choices", 0, "delta", "tool_calls", 0, "index"),
    ("choices", 0, "delta", "tool_calls", 0, "id"),
    ("choices", 0, "delta", "tool_calls", 0, "type"),
    ("choices", 0, "delta", "tool_calls", 0, "function"),
    ("choices", 0, "delta", "tool_calls", 0, "function", "name"),
    ("choices", 0, "delta", "tool_calls", 0, "function", "arguments"),
]


def _replace(template: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    out = copy.deepcopy(template)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def _dumps(value: Any, ascii_only: bool) -> str:
    """JSON text as a server might write it (Infinity and NaN included)."""
    try:
        return json.dumps(value, ensure_ascii=ascii_only)
    except (RecursionError, ValueError):
        return "[" * 5000 + "]" * 5000


def _feed_chat(text: str | None, value: Any) -> None:
    acc = ChatChunkAccumulator()
    for _ in range(2):
        try:
            delta = acc.feed_json(text) if text is not None else acc.feed(value)
        except EXPECTED:
            continue
        if text is not None:
            _check_delta(delta)
    message = acc.result()
    if text is not None:
        _check_message(message, acc.usage)


@settings(max_examples=200, deadline=None)
@given(path=st.sampled_from(_CHUNK_PATHS), value=_anything, ascii_only=st.booleans())
def test_any_value_in_any_chunk_field_is_a_result_or_a_chunk_error(
    path: tuple[Any, ...], value: Any, ascii_only: bool
) -> None:
    chunk = _replace(_CHUNK, path, value)
    _feed_chat(None, chunk)
    _feed_chat(_dumps(chunk, ascii_only), None)


@settings(max_examples=100, deadline=None)
@given(body=_anything, path=st.sampled_from(_CHUNK_PATHS), value=_anything)
def test_any_completion_body_is_a_result_or_a_chunk_error(
    body: Any, path: tuple[Any, ...], value: Any
) -> None:
    whole = _replace(_CHUNK, path, value)
    if isinstance(whole, dict) and isinstance(whole.get("choices"), list):
        for choice in whole["choices"]:
            if isinstance(choice, dict) and "delta" in choice:
                choice["message"] = choice.pop("delta")
    for candidate in (body, whole):
        try:
            message, usage = message_from_completion(candidate)
        except EXPECTED:
            continue
        try:
            # Parsed from text the way the client does, the result is clean.
            parsed = loads_upstream(_dumps(candidate, True))
        except ValueError:
            continue
        try:
            message, usage = message_from_completion(parsed)
        except EXPECTED:
            continue
        _check_message(message, usage)


@pytest.mark.parametrize("depth", [200, 256, 1000, 1100, 100_000])
def test_deep_nesting_anywhere_is_a_chunk_error_or_ignored(depth: int) -> None:
    deep = "[" * depth + "]" * depth
    for raw in (
        deep,
        '{"choices":' + deep + "}",
        '{"choices":[{"index":0,"delta":' + deep + "}]}",
        '{"choices":[{"index":0,"delta":{"content":' + deep + "}}]}",
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":'
        '{"name":"f","arguments":' + deep + "}}]}}]}",
        '{"error":' + deep + "}",
        '{"usage":{"prompt_tokens":' + deep + "}}",
    ):
        _feed_chat(raw, None)


def test_lone_surrogates_become_replacement_characters() -> None:
    acc = ChatChunkAccumulator()
    raw = (
        '{"choices":[{"index":0,"delta":{"content":"a\\ud800b\\udc00c\\ud83d\\ude00d\\\\ud800",'
        '"tool_calls":[{"index":0,"id":"x\\udfff","function":{"name":"f","arguments":"\\ud800"}}]}}]}'
    )
    delta = acc.feed_json(raw)
    # A proper pair stays a pair; an escaped backslash is not an escape.
    assert delta.content == "a\ufffdb\ufffdc\U0001f600d\\ud800"
    message = acc.result()
    assert message.tool_calls[0].id == "x\ufffd"
    assert message.tool_calls[0].arguments == "\ufffd"


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        ('{"usage":{"prompt_tokens":1e400}}', "not valid JSON"),
        ('{"usage":{"total_tokens":-1e400}}', "infinity"),
        ("{'single': 'quotes'}", "not valid JSON"),
    ],
)
def test_numbers_json_cannot_hold_are_named_in_the_error(raw: str, detail: str) -> None:
    with pytest.raises(ChunkError, match=detail):
        ChatChunkAccumulator().feed_json(raw)


def test_huge_counts_in_usage_are_not_passed_on() -> None:
    acc = ChatChunkAccumulator()
    acc.feed({"choices": [], "usage": {"prompt_tokens": 2**80, "completion_tokens": 1e300}})
    assert acc.usage is not None
    assert acc.usage.prompt_tokens == 0 and acc.usage.completion_tokens == 0


# -- Responses API events -----------------------------------------------------------

_EVENT_TYPES = [
    "response.created",
    "response.output_text.delta",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_part.added",
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
    "message",
]
_EVENT = {
    "type": "response.output_text.delta",
    "item_id": "msg_1",
    "output_index": 0,
    "delta": "hi",
    "arguments": "{}",
    "item": {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "f",
        "arguments": "{}",
        "content": [{"type": "output_text", "text": "hi"}],
    },
    "response": {
        "id": "resp_1",
        "model": "m",
        "status": "completed",
        "usage": {"input_tokens": 1, "output_tokens": 2},
        "output": [
            {"type": "message", "content": [{"type": "output_text", "text": "whole"}]},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "why"}]},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        ],
        "incomplete_details": {"reason": "content_filter"},
        "error": None,
    },
}
_EVENT_PATHS: list[tuple[Any, ...]] = [
    (),
    ("type",),
    ("item_id",),
    ("output_index",),
    ("delta",),
    ("arguments",),
    ("item",),
    ("item", "type"),
    ("item", "id"),
    ("item", "call_id"),
    ("item", "name"),
    ("item", "arguments"),
    ("item", "content"),
    ("response",),
    ("response", "id"),
    ("response", "usage"),
    ("response", "usage", "input_tokens"),
    ("response", "output"),
    ("response", "output", 0),
    ("response", "output", 0, "content"),
    ("response", "output", 1, "summary"),
    ("response", "output", 2, "arguments"),
    ("response", "incomplete_details"),
    ("response", "error"),
    ("response", "status"),
    ("error",),
    ("message",),
    ("code",),
]


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(_EVENT_TYPES),
    path=st.sampled_from(_EVENT_PATHS),
    value=_anything,
    ascii_only=st.booleans(),
)
def test_any_value_in_any_responses_event_is_a_result_or_a_chunk_error(
    kind: str, path: tuple[Any, ...], value: Any, ascii_only: bool
) -> None:
    data = _replace(_EVENT, path, value)
    for use_text in (False, True):
        acc = ResponsesStreamAccumulator()
        for _ in range(2):
            try:
                if use_text:
                    delta = acc.feed_json(kind, _dumps(data, ascii_only))
                    _check_delta(delta)
                else:
                    acc.feed_event(kind, data)
            except EXPECTED:
                continue
        message = acc.result()
        if use_text:
            _check_message(message, acc.usage)
    try:
        message_from_response(data.get("response") if isinstance(data, dict) else data)
    except EXPECTED:
        pass


# -- SSE ---------------------------------------------------------------------------


def test_a_line_that_never_ends_is_an_error_once_it_passes_the_limit() -> None:
    decoder = SSEDecoder(max_buffer=1000)
    assert decoder.feed(b"data: " + b"x" * 500) == []
    assert decoder.feed(b"x" * 400) == []
    with pytest.raises(SSEError, match="1000 characters"):
        decoder.feed(b"x" * 200)


def test_an_event_that_never_ends_is_an_error_once_it_passes_the_limit() -> None:
    decoder = SSEDecoder(max_buffer=1000)
    assert decoder.feed(b"data: " + b"y" * 300 + b"\n") == []
    assert decoder.feed(b"data: " + b"y" * 300 + b"\n") == []
    with pytest.raises(SSEError, match="1000 characters"):
        decoder.feed(b"data: " + b"y" * 500 + b"\n")


def test_events_under_the_limit_flow_however_many_there_are() -> None:
    decoder = SSEDecoder(max_buffer=1000)
    frame = b"data: " + b"z" * 900 + b"\n\n"
    for _ in range(50):
        (event,) = decoder.feed(frame)
        assert isinstance(event, SSEEvent) and len(event.data) == 900
    # Split anywhere, still fine: only what is pending counts.
    events = []
    for i in range(0, len(frame) * 3, 7):
        events += decoder.feed((frame * 3)[i : i + 7])
    assert len(events) == 3


# -- lone surrogate escapes: repaired exactly, and cheaply ----------------------

# Pieces of JSON string content, each valid on its own, so any sequence is
# valid JSON text: escapes of each kind, backslash runs that make the letters
# after them no escape, a proper pair, an escape split from its partner.
_STRING_PIECES = [
    "a",
    "é",
    "u",
    "d800",
    "\\\\",
    '\\"',
    "\\n",
    "\\u0041",
    "\\ud800",
    "\\uDBFF",
    "\\udc00",
    "\\uDFFF",
    "\\ud83d\\ude00",
    "\\\\ud800",
    "\\\\\\ud800",
]


def _without_lone_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    return value


@settings(max_examples=400, deadline=None)
@given(
    key=st.lists(st.sampled_from(_STRING_PIECES)),
    value=st.lists(st.sampled_from(_STRING_PIECES)),
)
def test_lone_surrogate_escapes_become_replacement_characters_and_nothing_else_changes(
    key: list[str], value: list[str]
) -> None:
    text = '{"' + "".join(key) + '": "' + "".join(value) + '", "n": 1}'
    # Python's own parser keeps lone surrogates: the reference is its
    # result with exactly those replaced.
    expected = _without_lone_surrogates(json.loads(text))
    assert loads_upstream(text) == expected
    assert loads_upstream(text.encode()) == expected


def test_repairing_one_lone_surrogate_in_a_big_body_costs_about_a_parse() -> None:
    import time

    words = b"word \\\\ " * 1_000_000  # 8 MB, with escaped backslashes throughout
    # The same result, parsed without repair.
    good = b'{"content": "' + words + b'\\ufffd"}'
    lone = b'{"content": "' + words + b'\\ud800"}'

    def best(raw: bytes) -> float:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            loads_upstream(raw)
            times.append(time.perf_counter() - start)
        return min(times)

    plain, repaired = best(good), best(lone)
    assert loads_upstream(lone) == loads_upstream(good)
    # The refused parse, the repair and the parse: about three parses. A
    # regular expression over the whole text cost 30-40.
    assert repaired < 6 * plain + 0.02, (plain, repaired)


def test_bodies_orjson_refuses_for_other_reasons_keep_its_reason() -> None:
    # Truncated, with backslashes in it: no repair can help.
    body = '{"content": "' + "a\\\\b" * 10 + "\\ud800"
    with pytest.raises(ValueError, match="unexpected end of data"):
        loads_upstream(body)
    with pytest.raises(ValueError):
        loads_upstream(b'{"a": "\xff\\ud800", ')
    assert loads_upstream(b'{"a": "\xff\\ud800"}') == {"a": "\ufffd\ufffd"}
