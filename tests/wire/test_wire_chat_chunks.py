from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.events import Usage
from hermes_trio.wire import (
    AssistantMessage,
    ChatChunkAccumulator,
    ChunkDelta,
    ChunkError,
    ProviderError,
    ToolCall,
    ToolCallArgs,
    ToolCallStart,
    message_from_completion,
)


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
        "usage": None,
        **extra,
    }


def tool_fragment(index: int | None, args: str, id: str | None = None, name: str | None = None):
    fragment: dict[str, Any] = {"function": {"arguments": args}}
    if index is not None:
        fragment["index"] = index
    if id is not None:
        fragment["id"] = id
        fragment["type"] = "function"
    if name is not None:
        fragment["function"]["name"] = name
    return fragment


def test_content_concatenates() -> None:
    acc = ChatChunkAccumulator()
    assert acc.feed(chunk({"role": "assistant", "content": ""})) == ChunkDelta()
    assert acc.feed(chunk({"content": "Hel"})) == ChunkDelta(content="Hel")
    assert acc.feed(chunk({"content": "lo"})) == ChunkDelta(content="lo")
    assert acc.feed(chunk({}, "stop")) == ChunkDelta(finish_reason="stop")
    assert acc.result() == AssistantMessage("Hello", "", (), "stop")
    assert acc.model == "m"
    assert acc.id == "chatcmpl-1"
    assert acc.usage is None


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_field_names(field: str) -> None:
    acc = ChatChunkAccumulator()
    assert acc.feed(chunk({field: "hmm"})) == ChunkDelta(reasoning="hmm")
    acc.feed(chunk({field: None, "content": "ok"}))
    assert acc.result().reasoning == "hmm"
    assert acc.result().content == "ok"


def test_reasoning_sent_under_both_names_counts_once() -> None:
    acc = ChatChunkAccumulator()
    acc.feed(chunk({"reasoning_content": "x", "reasoning": "x"}))
    assert acc.result().reasoning == "x"


def test_list_content_parts() -> None:
    acc = ChatChunkAccumulator()
    assert acc.feed(chunk({"content": [{"type": "text", "text": "a"}, "b"]})).content == "ab"


def test_two_parallel_tool_calls_across_chunks() -> None:
    acc = ChatChunkAccumulator()
    d1 = acc.feed(chunk({"tool_calls": [tool_fragment(0, "", id="call_a", name="read")]}))
    assert d1.tool_calls == (ToolCallStart(0, "call_a", "read"),)
    d2 = acc.feed(chunk({"tool_calls": [tool_fragment(0, '{"pa')]}))
    assert d2.tool_calls == (ToolCallArgs(0, '{"pa'),)
    d3 = acc.feed(chunk({"tool_calls": [tool_fragment(1, '{"q"', id="call_b", name="grep")]}))
    assert d3.tool_calls == (ToolCallStart(1, "call_b", "grep"), ToolCallArgs(1, '{"q"'))
    acc.feed(chunk({"tool_calls": [tool_fragment(0, 'th": 1}'), tool_fragment(1, ": 2}")]}))
    acc.feed(chunk({}, "tool_calls"))
    result = acc.result()
    assert result.tool_calls == (
        ToolCall("call_a", "read", '{"path": 1}'),
        ToolCall("call_b", "grep", '{"q": 2}'),
    )
    assert result.finish_reason == "tool_calls"
    assert result.to_message() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path": 1}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "grep", "arguments": '{"q": 2}'},
            },
        ],
    }


def test_index_reused_with_new_id_gets_a_new_slot() -> None:
    acc = ChatChunkAccumulator()
    acc.feed(chunk({"tool_calls": [tool_fragment(0, "{}", id="a", name="x")]}))
    delta = acc.feed(chunk({"tool_calls": [tool_fragment(0, "{", id="b", name="y")]}))
    assert delta.tool_calls == (ToolCallStart(1, "b", "y"), ToolCallArgs(1, "{"))
    acc.feed(chunk({"tool_calls": [tool_fragment(0, "}")]}))
    assert acc.result().tool_calls == (ToolCall("a", "x", "{}"), ToolCall("b", "y", "{}"))


def test_repeated_same_id_and_name_stay_in_one_slot() -> None:
    acc = ChatChunkAccumulator()
    acc.feed(chunk({"tool_calls": [tool_fragment(0, "{", id="a", name="x")]}))
    acc.feed(chunk({"tool_calls": [tool_fragment(0, "}", id="a", name="x")]}))
    assert acc.result().tool_calls == (ToolCall("a", "x", "{}"),)


def test_missing_index_continues_the_last_slot() -> None:
    acc = ChatChunkAccumulator()
    acc.feed(chunk({"tool_calls": [tool_fragment(None, '{"a"', id="a", name="x")]}))
    acc.feed(chunk({"tool_calls": [tool_fragment(None, ": 1}")]}))
    acc.feed(chunk({"tool_calls": [tool_fragment(1, "{}", id="b", name="y")]}))
    acc.feed(chunk({"tool_calls": [tool_fragment(None, "")]}))
    assert acc.result().tool_calls == (ToolCall("a", "x", '{"a": 1}'), ToolCall("b", "y", "{}"))


def test_missing_name_and_id_do_not_crash() -> None:
    acc = ChatChunkAccumulator()
    delta = acc.feed(chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}))
    assert delta.tool_calls == (ToolCallStart(0, "call_0", ""), ToolCallArgs(0, "{}"))
    assert acc.result().tool_calls == (ToolCall("call_0", "", "{}"),)


def test_late_name_and_id_are_taken() -> None:
    acc = ChatChunkAccumulator()
    acc.feed(chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]}))
    acc.feed(chunk({"tool_calls": [tool_fragment(0, "}", id="real", name="x")]}))
    assert acc.result().tool_calls == (ToolCall("real", "x", "{}"),)


def test_parsed_arguments_object_is_serialised() -> None:
    acc = ChatChunkAccumulator()
    acc.feed(
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "a", "function": {"name": "x", "arguments": {"k": 1}}}
                ]
            }
        )
    )
    assert json.loads(acc.result().tool_calls[0].arguments) == {"k": 1}


def test_finish_reason_last_non_null_wins() -> None:
    acc = ChatChunkAccumulator()
    acc.feed(chunk({}, "length"))
    acc.feed(chunk({}, None))
    assert acc.result().finish_reason == "length"
    acc.feed(chunk({}, "stop"))
    assert acc.result().finish_reason == "stop"


def test_include_usage_chunk() -> None:
    acc = ChatChunkAccumulator()
    acc.feed(chunk({"content": "hi"}, "stop"))
    usage_chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "total_tokens": 15,
            "prompt_tokens_details": {"cached_tokens": 4},
            "completion_tokens_details": {"reasoning_tokens": 2},
        },
    }
    assert acc.feed_json(json.dumps(usage_chunk)) == ChunkDelta()
    assert acc.usage == Usage(10, 5, 15, 2, 4)
    assert acc.result().content == "hi"


def test_usage_on_an_ordinary_chunk_last_wins() -> None:
    acc = ChatChunkAccumulator()
    acc.feed(chunk({"content": "a"}, usage={"prompt_tokens": 1, "completion_tokens": 1}))
    acc.feed(chunk({"content": "b"}, usage={"prompt_tokens": 1, "completion_tokens": 2}))
    assert acc.usage == Usage(1, 2, 3)


def test_other_choices_are_ignored() -> None:
    acc = ChatChunkAccumulator()
    acc.feed(
        {
            "choices": [
                {"index": 1, "delta": {"content": "no"}},
                {"index": 0, "delta": {"content": "yes"}},
            ]
        }
    )
    acc.feed({"choices": [{"index": 1, "delta": {"content": "no"}, "finish_reason": "stop"}]})
    assert acc.result() == AssistantMessage("yes", "", (), None)


def test_error_frame_raises_provider_error() -> None:
    acc = ChatChunkAccumulator()
    acc.feed(chunk({"content": "partial"}))
    frame = {"error": {"message": "upstream overloaded", "type": "server_error", "code": 503}}
    with pytest.raises(ProviderError) as info:
        acc.feed_json(json.dumps(frame))
    assert info.value.message == "upstream overloaded"
    assert str(info.value) == "upstream overloaded"
    assert info.value.type == "server_error"
    assert info.value.code == 503
    assert info.value.raw == frame


def test_error_frame_with_string_error() -> None:
    with pytest.raises(ProviderError, match="boom"):
        ChatChunkAccumulator().feed({"error": "boom"})


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"choices": {"index": 0}}', "choices is not a list"),
        ('{"choices": [7]}', "choice is not an object"),
        ('{"choices": [{"index": 0, "delta": "hi"}]}', "delta is not an object"),
        ('{"choices": [{"index": 0, "delta": {"tool_calls": {}}}]}', "tool_calls is not a list"),
        ('{"choices": [{"index": 0, "delta": {"content": 5}}]}', "content"),
    ],
)
def test_malformed_chunk_raises_chunk_error_quoting_it(raw: str, reason: str) -> None:
    with pytest.raises(ChunkError) as info:
        ChatChunkAccumulator().feed_json(raw)
    assert reason in str(info.value)
    assert raw in str(info.value)


def test_chunk_error_quote_is_truncated() -> None:
    raw = json.dumps({"choices": "x" * 5000})
    with pytest.raises(ChunkError) as info:
        ChatChunkAccumulator().feed_json(raw)
    assert 300 <= len(str(info.value)) < 400


def test_assistant_message_to_message() -> None:
    assert AssistantMessage("hi", "r", (), "stop").to_message() == {
        "role": "assistant",
        "content": "hi",
    }
    assert AssistantMessage("", "", (), "stop").to_message() == {"role": "assistant", "content": ""}
    call = ToolCall("c", "n", "{}")
    assert AssistantMessage("x", "", (call,), None).to_message()["content"] == "x"


def test_message_from_completion() -> None:
    body = {
        "id": "chatcmpl-9",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "reasoning_content": "think",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }
    message, usage = message_from_completion(body)
    assert message == AssistantMessage("", "think", (ToolCall("c1", "f", "{}"),), "tool_calls")
    assert usage == Usage(3, 4, 7)


def test_message_from_completion_without_usage() -> None:
    body = {"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}
    assert message_from_completion(body) == (AssistantMessage("hi", "", (), "stop"), None)


def test_message_from_completion_errors() -> None:
    with pytest.raises(ProviderError, match="bad key"):
        message_from_completion({"error": {"message": "bad key", "code": "invalid_api_key"}})
    with pytest.raises(ChunkError, match="no choices"):
        message_from_completion({"object": "chat.completion"})
    with pytest.raises(ChunkError, match="message"):
        message_from_completion({"choices": [{"index": 0}]})


# -- property -----------------------------------------------------------------

_json_text = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
).map(lambda value: json.dumps(value, ensure_ascii=False))


def _fragments(text: str) -> st.SearchStrategy[list[str]]:
    return st.lists(st.integers(0, len(text)), max_size=6).map(
        lambda cuts: [
            text[a:b] for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(text)], strict=True)
        ]
    )


@given(arguments=st.lists(_json_text, min_size=1, max_size=3), data=st.data())
def test_fragmented_arguments_accumulate_to_the_original(
    arguments: list[str], data: st.DataObject
) -> None:
    # (slot, fragment) pairs: each call's fragments in order, calls interleaved.
    pending = [data.draw(_fragments(text)) for text in arguments]
    acc = ChatChunkAccumulator()
    for slot in range(len(arguments)):
        acc.feed(chunk({"tool_calls": [tool_fragment(slot, "", id=f"id{slot}", name=f"f{slot}")]}))
    seen: list[list[str]] = [[] for _ in arguments]
    while any(pending):
        slot = data.draw(st.sampled_from([n for n, rest in enumerate(pending) if rest]))
        piece = pending[slot].pop(0)
        delta = acc.feed(chunk({"tool_calls": [tool_fragment(slot, piece)]}))
        for event in delta.tool_calls:
            assert isinstance(event, ToolCallArgs)
            seen[event.slot].append(event.text)
    result = acc.result()
    assert [call.arguments for call in result.tool_calls] == arguments
    assert ["".join(parts) for parts in seen] == arguments
    assert [call.id for call in result.tool_calls] == [f"id{n}" for n in range(len(arguments))]


def test_merge_deltas_keeps_everything_in_order() -> None:
    from hermes_trio.wire.chat_chunks import ChunkDelta, ToolCallArgs, ToolCallStart, merge_deltas

    one = ChunkDelta(content="a", reasoning="r1", tool_calls=(ToolCallStart(0, "c", "f"),))
    two = ChunkDelta(content="b", tool_calls=(ToolCallArgs(0, "{}"),), finish_reason="stop")
    merged = merge_deltas([one, two])
    assert merged == ChunkDelta(
        "ab", "r1", (ToolCallStart(0, "c", "f"), ToolCallArgs(0, "{}")), "stop", tokens=2
    )
    assert merge_deltas([one]) is one
    # Only deltas with text are the model's tokens.
    assert merge_deltas([one, ChunkDelta(reasoning="r2")]).tokens == 1
