from __future__ import annotations

import json
from typing import Any

import pytest

from hermes_trio.events import Usage
from hermes_trio.wire import (
    AssistantMessage,
    ChunkDelta,
    ChunkError,
    ProviderError,
    ResponsesStreamAccumulator,
    SSEDecoder,
    SSEEvent,
    ToolCall,
    ToolCallArgs,
    ToolCallStart,
    chat_messages_to_responses_input,
    chat_tools_to_responses_tools,
    encode_event,
    message_from_response,
)

_USAGE = {
    "input_tokens": 20,
    "input_tokens_details": {"cached_tokens": 8},
    "output_tokens": 12,
    "output_tokens_details": {"reasoning_tokens": 5},
    "total_tokens": 32,
}


def _response(status: str, output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "model": "m",
        "status": status,
        "output": output,
        "error": None,
        "usage": None,
        **extra,
    }


def _events(*pairs: tuple[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (kind, {"type": kind, "sequence_number": n, **data}) for n, (kind, data) in enumerate(pairs)
    ]


_MESSAGE_ITEM = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Hello world", "annotations": []}],
}

TEXT_STREAM = _events(
    ("response.created", {"response": _response("in_progress", [])}),
    ("response.in_progress", {"response": _response("in_progress", [])}),
    (
        "response.output_item.added",
        {"output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": []}},
    ),
    (
        "response.reasoning_summary_part.added",
        {"item_id": "rs_1", "output_index": 0, "summary_index": 0, "part": {}},
    ),
    (
        "response.reasoning_summary_text.delta",
        {"item_id": "rs_1", "output_index": 0, "summary_index": 0, "delta": "Plan."},
    ),
    (
        "response.reasoning_summary_part.added",
        {"item_id": "rs_1", "output_index": 0, "summary_index": 1, "part": {}},
    ),
    (
        "response.reasoning_summary_text.delta",
        {"item_id": "rs_1", "output_index": 0, "summary_index": 1, "delta": "Go."},
    ),
    (
        "response.output_item.added",
        {
            "output_index": 1,
            "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
        },
    ),
    (
        "response.content_part.added",
        {"item_id": "msg_1", "output_index": 1, "content_index": 0, "part": {}},
    ),
    (
        "response.output_text.delta",
        {"item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": "Hello"},
    ),
    (
        "response.output_text.delta",
        {"item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": " world"},
    ),
    (
        "response.output_text.done",
        {"item_id": "msg_1", "output_index": 1, "content_index": 0, "text": "Hello world"},
    ),
    ("response.output_item.done", {"output_index": 1, "item": _MESSAGE_ITEM}),
    (
        "response.completed",
        {"response": _response("completed", [_MESSAGE_ITEM], usage=_USAGE)},
    ),
)

_CALL_ITEM = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_abc",
    "name": "get_weather",
    "arguments": "",
    "status": "in_progress",
}

CALL_STREAM = _events(
    ("response.created", {"response": _response("in_progress", [])}),
    ("response.output_item.added", {"output_index": 0, "item": _CALL_ITEM}),
    (
        "response.function_call_arguments.delta",
        {"item_id": "fc_1", "output_index": 0, "delta": '{"city": '},
    ),
    (
        "response.function_call_arguments.delta",
        {"item_id": "fc_1", "output_index": 0, "delta": '"Paris"}'},
    ),
    (
        "response.function_call_arguments.done",
        {"item_id": "fc_1", "output_index": 0, "arguments": '{"city": "Paris"}'},
    ),
    (
        "response.output_item.done",
        {
            "output_index": 0,
            "item": {**_CALL_ITEM, "arguments": '{"city": "Paris"}', "status": "completed"},
        },
    ),
    ("response.completed", {"response": _response("completed", [], usage=_USAGE)}),
)


def feed_all(events: list[tuple[str, dict[str, Any]]]) -> tuple[ResponsesStreamAccumulator, list]:
    acc = ResponsesStreamAccumulator()
    deltas = [acc.feed_event(kind, data) for kind, data in events]
    return acc, [delta for delta in deltas if delta != ChunkDelta()]


def test_text_stream() -> None:
    acc, deltas = feed_all(TEXT_STREAM)
    assert deltas == [
        ChunkDelta(reasoning="Plan."),
        ChunkDelta(reasoning="\n\n"),
        ChunkDelta(reasoning="Go."),
        ChunkDelta(content="Hello"),
        ChunkDelta(content=" world"),
        ChunkDelta(finish_reason="stop"),
    ]
    assert acc.done
    assert acc.result() == AssistantMessage("Hello world", "Plan.\n\nGo.", (), "stop")
    assert acc.usage == Usage(20, 12, 32, 5, 8)
    assert acc.model == "m"
    assert acc.id == "resp_1"


def test_not_done_before_completed() -> None:
    acc, _ = feed_all(TEXT_STREAM[:-1])
    assert not acc.done
    assert acc.usage is None
    assert acc.result().finish_reason is None


def test_function_call_stream() -> None:
    acc, deltas = feed_all(CALL_STREAM)
    assert deltas == [
        ChunkDelta(tool_calls=(ToolCallStart(0, "call_abc", "get_weather"),)),
        ChunkDelta(tool_calls=(ToolCallArgs(0, '{"city": '),)),
        ChunkDelta(tool_calls=(ToolCallArgs(0, '"Paris"}'),)),
        ChunkDelta(finish_reason="tool_calls"),
    ]
    assert acc.result() == AssistantMessage(
        "", "", (ToolCall("call_abc", "get_weather", '{"city": "Paris"}'),), "tool_calls"
    )
    assert acc.usage == Usage(20, 12, 32, 5, 8)


def test_arguments_done_without_deltas() -> None:
    events = [e for e in CALL_STREAM if e[0] != "response.function_call_arguments.delta"]
    acc, deltas = feed_all(events)
    assert ChunkDelta(tool_calls=(ToolCallArgs(0, '{"city": "Paris"}'),)) in deltas
    assert acc.result().tool_calls == (ToolCall("call_abc", "get_weather", '{"city": "Paris"}'),)


def test_event_type_from_payload_when_sse_event_is_message() -> None:
    acc = ResponsesStreamAccumulator()
    for _kind, data in TEXT_STREAM:
        acc.feed_json("message", json.dumps(data))
    assert acc.result().content == "Hello world"
    assert acc.done


def test_through_sse_decoder() -> None:
    raw = b"".join(encode_event(json.dumps(data), event=kind) for kind, data in CALL_STREAM)
    acc = ResponsesStreamAccumulator()
    decoder = SSEDecoder()
    for n in range(0, len(raw), 7):
        for event in decoder.feed(raw[n : n + 7]):
            assert isinstance(event, SSEEvent)
            acc.feed_json(event.event, event.data)
    assert acc.done
    assert acc.result().tool_calls[0].arguments == '{"city": "Paris"}'


def test_incomplete_means_length() -> None:
    events = [
        *TEXT_STREAM[:-1],
        (
            "response.incomplete",
            {
                "response": _response(
                    "incomplete",
                    [],
                    usage=_USAGE,
                    incomplete_details={"reason": "max_output_tokens"},
                )
            },
        ),
    ]
    acc, deltas = feed_all(events)
    assert deltas[-1] == ChunkDelta(finish_reason="length")
    assert acc.done
    assert acc.result().finish_reason == "length"
    assert acc.usage == Usage(20, 12, 32, 5, 8)


def test_failed_raises_provider_error() -> None:
    acc = ResponsesStreamAccumulator()
    acc.feed_event("response.output_text.delta", {"delta": "par"})
    failed = _response("failed", [], error={"code": "server_error", "message": "The model crashed"})
    with pytest.raises(ProviderError) as info:
        acc.feed_event("response.failed", {"type": "response.failed", "response": failed})
    assert info.value.message == "The model crashed"
    assert info.value.code == "server_error"
    assert acc.done


def test_error_event_raises_provider_error() -> None:
    acc = ResponsesStreamAccumulator()
    with pytest.raises(ProviderError, match="Rate limit") as info:
        acc.feed_json(
            "error",
            '{"type": "error", "code": "rate_limit_exceeded", "message": "Rate limit"}',
        )
    assert info.value.code == "rate_limit_exceeded"


def test_unknown_events_are_ignored() -> None:
    acc = ResponsesStreamAccumulator()
    assert acc.feed_event("response.web_search_call.searching", {"x": 1}) == ChunkDelta()
    assert acc.feed_event("message", {"no": "type"}) == ChunkDelta()


def test_malformed_event_data() -> None:
    acc = ResponsesStreamAccumulator()
    with pytest.raises(ChunkError, match="not valid JSON"):
        acc.feed_json("response.output_text.delta", "{oops")
    with pytest.raises(ChunkError, match="not a JSON object"):
        acc.feed_json("response.output_text.delta", "[1]")


def test_message_item_without_text_deltas_is_used() -> None:
    acc = ResponsesStreamAccumulator()
    delta = acc.feed_event("response.output_item.done", {"output_index": 0, "item": _MESSAGE_ITEM})
    assert delta == ChunkDelta(content="Hello world")


def test_completed_with_no_deltas_adopts_the_output() -> None:
    acc = ResponsesStreamAccumulator()
    done = {**_CALL_ITEM, "arguments": "{}"}
    delta = acc.feed_event(
        "response.completed", {"response": _response("completed", [_MESSAGE_ITEM, done])}
    )
    assert delta == ChunkDelta(
        content="Hello world",
        tool_calls=(ToolCallStart(0, "call_abc", "get_weather"), ToolCallArgs(0, "{}")),
        finish_reason="tool_calls",
    )
    assert acc.result().content == "Hello world"


def test_two_function_calls_by_output_index() -> None:
    second = {**_CALL_ITEM, "id": "fc_2", "call_id": "call_2", "name": "other"}
    events = _events(
        ("response.output_item.added", {"output_index": 0, "item": _CALL_ITEM}),
        ("response.output_item.added", {"output_index": 1, "item": second}),
        ("response.function_call_arguments.delta", {"output_index": 1, "delta": "{}"}),
        ("response.function_call_arguments.delta", {"output_index": 0, "delta": "{"}),
        ("response.function_call_arguments.delta", {"output_index": 0, "delta": "}"}),
        ("response.completed", {"response": _response("completed", [])}),
    )
    acc, _ = feed_all(events)
    assert acc.result().tool_calls == (
        ToolCall("call_abc", "get_weather", "{}"),
        ToolCall("call_2", "other", "{}"),
    )


# -- non-streaming ------------------------------------------------------------


def test_message_from_response() -> None:
    body = _response(
        "completed",
        [
            {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "hm"}]},
            _MESSAGE_ITEM,
            {**_CALL_ITEM, "arguments": '{"a": 1}'},
        ],
        usage=_USAGE,
    )
    message, usage = message_from_response(body)
    assert message == AssistantMessage(
        "Hello world", "hm", (ToolCall("call_abc", "get_weather", '{"a": 1}'),), "tool_calls"
    )
    assert usage == Usage(20, 12, 32, 5, 8)


def test_message_from_response_incomplete_and_failed() -> None:
    message, usage = message_from_response(_response("incomplete", [_MESSAGE_ITEM]))
    assert message.finish_reason == "length"
    assert usage is None
    with pytest.raises(ProviderError, match="nope"):
        message_from_response(_response("failed", [], error={"message": "nope"}))
    with pytest.raises(ChunkError):
        message_from_response(_response("completed", "x"))  # type: ignore[arg-type]


# -- request translation ------------------------------------------------------


def test_chat_messages_to_responses_input() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
        {"role": "assistant", "content": None, "tool_calls": []},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "And this?"},
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
            ],
        },
        {"role": "system", "content": "Late note."},
    ]
    instructions, items = chat_messages_to_responses_input(messages)
    assert instructions == "Be brief."
    assert items == [
        {"type": "message", "role": "user", "content": "Weather in Paris?"},
        {"type": "message", "role": "assistant", "content": "Checking."},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "And this?"},
                {"type": "input_image", "image_url": "https://x/y.png", "detail": "auto"},
            ],
        },
        {"type": "message", "role": "system", "content": "Late note."},
    ]


def test_no_system_message_means_no_instructions() -> None:
    assert chat_messages_to_responses_input([{"role": "user", "content": "hi"}]) == (
        None,
        [{"type": "message", "role": "user", "content": "hi"}],
    )


def test_chat_tools_to_responses_tools() -> None:
    params = {"type": "object", "properties": {"city": {"type": "string"}}}
    tools = [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Weather.", "parameters": params},
        },
        {"type": "function", "function": {"name": "noop"}},
        {"type": "web_search"},
    ]
    assert chat_tools_to_responses_tools(tools) == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather.",
            "parameters": params,
        },
        {"type": "function", "name": "noop"},
        {"type": "web_search"},
    ]
