"""ResponseBuilder: turn events → Responses stream events and objects.

Every event and object is validated against the official SDK's pydantic
models, and whole streams are replayed through the SDK's own stream
accumulator (the code behind ``client.responses.stream()``).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai._models import construct_type
from openai._types import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from hermes_trio.events import (
    Commentary,
    GatewayNotice,
    LongToolHint,
    MessageChunk,
    MessageStop,
    ReasoningChunk,
    StreamEvent,
    ToolCallChunk,
    ToolCallDelta,
    ToolCallFinished,
    TurnFinished,
    Usage,
)
from hermes_trio.wire.responses_out import (
    TERMINAL_TYPES,
    ResponseBuilder,
    ResponseEvent,
    new_item_id,
    new_response_id,
    response_usage,
)
from hermes_trio.wire.sse import SSEDecoder, SSEEvent

EVENT = TypeAdapter(ResponseStreamEvent)
USAGE = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15, reasoning_tokens=2)


def builder(**kwargs: Any) -> ResponseBuilder:
    counter = itertools.count()
    kwargs.setdefault("created_at", 1_700_000_000)
    kwargs.setdefault("model", "hermes-agent")
    return ResponseBuilder("resp_test", new_id=lambda p: f"{p}_{next(counter)}", **kwargs)


def run(events: list[StreamEvent], **kwargs: Any) -> tuple[ResponseBuilder, list[ResponseEvent]]:
    b = builder(**kwargs)
    out = b.start() + b.feed_all(events)
    return b, out


def check_stream(b: ResponseBuilder, out: list[ResponseEvent]) -> list[dict[str, Any]]:
    """Everything a client relies on, for any stream."""
    data = [e.payload() for e in out]
    for event, payload in zip(out, data, strict=True):
        if not event.type.startswith("hermes."):
            # Our own (opt-in) tool events are not the SDK's to know.
            EVENT.validate_python(payload)
        assert payload["type"] == event.type
        assert payload["sequence_number"] == event.sequence_number
    assert [e.sequence_number for e in out] == list(range(len(out)))
    Response.model_validate(b.snapshot())
    # Every item that was added is done exactly once, at its own index.
    added = [d["output_index"] for d in data if d["type"] == "response.output_item.added"]
    done = [d["output_index"] for d in data if d["type"] == "response.output_item.done"]
    assert added == list(range(len(added)))
    if b.ended:
        assert sorted(done) == added
        assert sum(d["type"] in TERMINAL_TYPES for d in data) == 1
        assert data[-1]["type"] in TERMINAL_TYPES
    return data


def sdk_replay(out: list[ResponseEvent]) -> Any:
    """Feed the stream to the SDK's accumulator; return its final response."""
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    for event in out:
        raw = construct_type(type_=ResponseStreamEvent, value=event.payload())
        state.handle_event(raw)
    return state._completed_response


def types(out: list[ResponseEvent]) -> list[str]:
    return [e.type for e in out]


def text_deltas(out: list[ResponseEvent]) -> str:
    return "".join(e.payload()["delta"] for e in out if e.type == "response.output_text.delta")


def test_ids() -> None:
    assert new_response_id().startswith("resp_") and len(new_response_id()) > 40
    assert new_item_id("msg").startswith("msg_")
    assert new_item_id("msg") != new_item_id("msg")


def test_usage_shape() -> None:
    assert response_usage(USAGE) == {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 2},
        "total_tokens": 15,
    }
    assert response_usage(Usage(prompt_tokens=3, completion_tokens=4))["total_tokens"] == 7


def test_frames_carry_event_and_id() -> None:
    b = builder()
    out = b.start()
    decoder = SSEDecoder()
    decoded = [e for e in decoder.feed(b"".join(e.frame for e in out)) if isinstance(e, SSEEvent)]
    assert [(d.event, d.id) for d in decoded] == [
        ("response.created", "0"),
        ("response.in_progress", "1"),
    ]
    assert [json.loads(d.data) for d in decoded] == [e.payload() for e in out]
    assert ResponseEvent.make(5, "x", "{}").frame == b"event: x\nid: 5\ndata: {}\n\n"


def test_text_answer_in_design_order() -> None:
    b, out = run(
        [
            MessageChunk("Hello"),
            MessageChunk(" world"),
            MessageStop(final=True),
            TurnFinished("Hello world", USAGE, "stop"),
        ],
        clock=lambda: 1_700_000_005.7,
    )
    check_stream(b, out)
    assert types(out) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    final = out[-1].payload()["response"]
    assert final["status"] == "completed"
    assert final["output_text"] == "Hello world"
    assert final["completed_at"] == 1_700_000_005
    assert final["usage"] == response_usage(USAGE)
    assert final["output"] == [
        {
            "id": "msg_0",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": "Hello world", "annotations": [], "logprobs": []}
            ],
            "phase": "final_answer",
        }
    ]
    added = out[2].payload()["item"]
    assert added["status"] == "in_progress" and added["content"] == []
    assert out[6].payload()["text"] == "Hello world"
    assert sdk_replay(out).output_text == "Hello world"


def test_created_snapshot_and_echo() -> None:
    echo = {
        "instructions": "Be brief.",
        "previous_response_id": "resp_prev",
        "tools": [{"type": "function", "name": "f", "parameters": None, "strict": None}],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "temperature": 0.2,
        "top_p": 0.9,
        "max_output_tokens": 100,
        "metadata": {"k": "v"},
        "store": False,
        "background": True,
        "user": "u1",
    }
    b = builder(echo=echo)
    created = b.start()[0].payload()["response"]
    Response.model_validate(created)
    for key, value in echo.items():
        assert created[key] == value, key
    assert created["status"] == "in_progress" and created["output"] == []
    assert "usage" not in created and created["completed_at"] is None
    assert created["object"] == "response" and created["model"] == "hermes-agent"
    defaults = builder().snapshot()
    assert defaults["tool_choice"] == "auto" and defaults["parallel_tool_calls"] is True
    assert defaults["store"] is True and defaults["background"] is False
    assert defaults["text"] == {"format": {"type": "text"}}
    assert defaults["truncation"] == "disabled" and defaults["tools"] == []


def test_start_is_idempotent_and_feed_starts() -> None:
    b = builder()
    first = b.feed(MessageChunk("x"))
    assert types(first)[:2] == ["response.created", "response.in_progress"]
    assert b.start() == []


_OWN_TOOLS: list[StreamEvent] = [
    MessageChunk("Let me check."),
    Commentary("Let me check."),
    MessageStop(final=False),
    ToolCallChunk("terminal", "ls", {"command": "ls"}, 0, "call_a"),
    ToolCallChunk("read_file", "x.txt", {"path": "x.txt"}, 1, "call_b"),
    LongToolHint("terminal", 5.0),
    ToolCallFinished("read_file", 0.1, True, 1, "call_b", "file text"),
    ToolCallFinished("terminal", 0.2, False, 0, "call_a", "exit 1"),
    MessageChunk("Done."),
    MessageStop(final=True),
    TurnFinished("Done.", USAGE, "stop"),
]


def test_server_side_tool_calls_are_not_output_items() -> None:
    """Agent frameworks run every function_call item they see; the agent
    already ran these."""
    b, out = run(_OWN_TOOLS)
    data = check_stream(b, out)
    output = b.snapshot()["output"]
    assert [(i["type"], i["phase"]) for i in output] == [
        ("message", "commentary"),
        ("message", "final_answer"),
    ]
    assert not any("function_call" in d["type"] or d["type"].startswith("hermes.") for d in data)
    final = sdk_replay(out)
    assert [i.type for i in final.output] == ["message", "message"]
    assert final.output_text == "Let me check.Done."


def test_tool_events_show_the_agents_tools_as_named_events() -> None:
    b, out = run(_OWN_TOOLS, tool_events=True)
    data = check_stream(b, out)
    tools = [d for d in data if d["type"].startswith("hermes.tool.")]
    assert tools == [
        {
            "type": "hermes.tool.started",
            "tool": "terminal",
            "preview": "ls",
            "index": 0,
            "call_id": "call_a",
            "sequence_number": tools[0]["sequence_number"],
        },
        {
            "type": "hermes.tool.started",
            "tool": "read_file",
            "preview": "x.txt",
            "index": 1,
            "call_id": "call_b",
            "sequence_number": tools[1]["sequence_number"],
        },
        {
            "type": "hermes.tool.running",
            "tool": "terminal",
            "duration": 5.0,
            "sequence_number": tools[2]["sequence_number"],
        },
        {
            "type": "hermes.tool.finished",
            "tool": "read_file",
            "index": 1,
            "call_id": "call_b",
            "ok": True,
            "duration": 0.1,
            "sequence_number": tools[3]["sequence_number"],
        },
        {
            "type": "hermes.tool.finished",
            "tool": "terminal",
            "index": 0,
            "call_id": "call_a",
            "ok": False,
            "duration": 0.2,
            "sequence_number": tools[4]["sequence_number"],
        },
    ]
    # The event name is the type, and the output is the same as without them.
    assert [e.type for e in out if e.type.startswith("hermes.")] == [t["type"] for t in tools]
    assert [i["type"] for i in b.snapshot()["output"]] == ["message", "message"]
    # The SDK's stream helper passes them through and still completes.
    assert sdk_replay(out).output_text == "Let me check.Done."


def _call_payloads(data: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """The stream's function-call events as (type, what they carry)."""
    out: list[tuple[str, Any]] = []
    for d in data:
        if d["type"] == "response.output_item.added" and d["item"]["type"] == "function_call":
            out.append(("added", (d["item"]["name"], d["item"]["call_id"], d["item"]["arguments"])))
        elif d["type"] == "response.function_call_arguments.delta":
            out.append(("delta", d["delta"]))
        elif d["type"] == "response.function_call_arguments.done":
            out.append(("done", d["arguments"]))
        elif d["type"] == "response.output_item.done" and d["item"]["type"] == "function_call":
            out.append(("item", d["item"]["status"]))
    return out


def test_client_tool_calls_stream_as_written() -> None:
    calls = (
        {"id": "call_w", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
        {"id": "call_t", "type": "function",
         "function": {"name": "get_time", "arguments": "{}"}},
    )
    b, out = run(
        [
            MessageChunk("Checking."),
            ToolCallDelta(0, "", "call_w", "get_weather"),
            ToolCallDelta(0, '{"city":'),
            ToolCallDelta(1, "{}", "call_t", "get_time"),
            ToolCallDelta(0, '"Paris"}'),
            Commentary("Checking."),
            MessageStop(final=False),
            TurnFinished("Checking.", USAGE, "tool_calls", tool_calls=calls),
        ]
    )
    data = check_stream(b, out)
    assert _call_payloads(data) == [
        ("added", ("get_weather", "call_w", "")),
        ("delta", '{"city":'),
        ("added", ("get_time", "call_t", "")),
        ("delta", "{}"),
        ("delta", '"Paris"}'),
        ("done", '{"city":"Paris"}'),
        ("item", "completed"),
        ("done", "{}"),
        ("item", "completed"),
    ]
    # The text before the calls ended when the first call began.
    kinds = [d["type"] for d in data]
    first_delta = kinds.index("response.function_call_arguments.delta")
    assert kinds.index("response.output_item.done") < first_delta
    output = b.snapshot()["output"]
    assert [(i["type"], i.get("call_id")) for i in output] == [
        ("message", None),
        ("function_call", "call_w"),
        ("function_call", "call_t"),
    ]
    assert output[1]["arguments"] == '{"city":"Paris"}'
    parsed = sdk_replay(out)
    assert [getattr(i, "arguments", None) for i in parsed.output[1:]] == ['{"city":"Paris"}', "{}"]


def test_the_ending_adds_no_calls_of_its_own() -> None:
    # The agent announces every client call as ToolCallDelta events (whole at
    # the end if it could not stream it); TurnFinished.tool_calls repeats them.
    calls = (
        {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "call_b", "type": "function", "function": {"name": "g", "arguments": "[1]"}},
    )
    b, out = run(
        [
            ToolCallDelta(0, "{}", "call_a", "f"),
            ToolCallDelta(1, "[1]", "call_b", "g"),
            TurnFinished("", USAGE, "tool_calls", tool_calls=calls),
        ]
    )
    data = check_stream(b, out)
    assert [c for c in _call_payloads(data) if c[0] == "added"] == [
        ("added", ("f", "call_a", "")),
        ("added", ("g", "call_b", "")),
    ]
    assert [i["arguments"] for i in b.snapshot()["output"]] == ["{}", "[1]"]


def test_failure_while_a_call_is_written_leaves_it_incomplete() -> None:
    b, out = run(
        [
            ToolCallDelta(0, '{"a', "call_a", "f"),
            TurnFinished("", USAGE, "error", error="boom", error_code="model_error"),
        ]
    )
    data = check_stream(b, out)
    assert _call_payloads(data)[-1] == ("item", "incomplete")
    assert b.status == "failed"


def test_client_side_tool_calls_end_the_turn() -> None:
    calls = (
        {
            "id": "call_w",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        },
    )
    b, out = run(
        [
            ToolCallDelta(0, '{"city":"Paris"}', "call_w", "get_weather"),
            MessageStop(final=False),
            TurnFinished("", USAGE, "tool_calls", tool_calls=calls),
        ]
    )
    check_stream(b, out)
    output = b.snapshot()["output"]
    assert output == [
        {
            "id": "fc_0",
            "type": "function_call",
            "status": "completed",
            "call_id": "call_w",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        }
    ]
    assert b.status == "completed"
    parsed = sdk_replay(out)
    assert parsed.output[0].call_id == "call_w"


def test_reasoning_item_then_message() -> None:
    b, out = run(
        [
            ReasoningChunk("Think"),
            ReasoningChunk("ing."),
            MessageChunk("42"),
            MessageStop(final=True),
            TurnFinished("42", USAGE, "stop"),
        ]
    )
    check_stream(b, out)
    assert types(out)[2:6] == [
        "response.output_item.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
    ]
    output = b.snapshot()["output"]
    assert output[0]["type"] == "reasoning"
    assert output[0]["content"] == [{"type": "reasoning_text", "text": "Thinking."}]
    assert output[0]["summary"] == []
    assert b.output_text == "42"


def test_empty_answer_still_has_a_message() -> None:
    b, out = run([MessageStop(final=True), TurnFinished("", USAGE, "stop")])
    check_stream(b, out)
    assert [i["type"] for i in b.snapshot()["output"]] == ["message"]
    assert b.output_text == "" and sdk_replay(out).output_text == ""


def test_final_text_without_chunks_becomes_the_message() -> None:
    # A non-streamed model step may deliver no chunks; the turn's text counts.
    b, out = run([TurnFinished("Whole answer.", USAGE, "stop")])
    check_stream(b, out)
    assert b.output_text == "Whole answer." and text_deltas(out) == "Whole answer."


def test_text_after_tools_without_final_segment() -> None:
    b, out = run(
        [
            ToolCallChunk("terminal", "x", {}, 0, "c1"),
            ToolCallFinished("terminal", 0.1, True, 0, "c1", "r"),
            TurnFinished("After tools.", USAGE, "stop"),
        ]
    )
    check_stream(b, out)
    assert b.snapshot()["output"][-1]["content"][0]["text"] == "After tools."


def test_length_limit_is_incomplete() -> None:
    b, out = run([MessageChunk("cut"), TurnFinished("cut", USAGE, "length")])
    check_stream(b, out)
    assert out[-1].type == "response.incomplete"
    final = out[-1].payload()["response"]
    assert final["status"] == "incomplete"
    assert final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["completed_at"] is None


def test_model_error_ends_with_error_and_failed() -> None:
    b, out = run(
        [
            MessageChunk("partial"),
            MessageStop(final=True),
            TurnFinished(
                "partial", USAGE, "error", error="model on fire", error_code="model_error"
            ),
        ]
    )
    check_stream(b, out)
    assert types(out)[-2:] == ["error", "response.failed"]
    error = out[-2].payload()
    assert error["message"] == "model on fire" and error["code"] == "model_error"
    final = out[-1].payload()["response"]
    assert final["status"] == "failed"
    assert final["error"] == {"code": "server_error", "message": "model on fire"}
    assert b.error_code == "model_error"
    assert final["output"][0]["content"][0]["text"] == "partial"


def test_failure_mid_item_closes_it_incomplete() -> None:
    b = builder()
    out = b.start() + b.feed(MessageChunk("half"))
    out += b.fail("tool exploded", None)
    check_stream(b, out)
    item = b.snapshot()["output"][0]
    assert item["status"] == "incomplete" and item["content"][0]["text"] == "half"
    assert out[-2].payload()["code"] == "server_error"
    assert b.fail("again") == [] and b.interrupt() == [] and b.cancel() == []


def test_interrupt_and_interrupted_finish() -> None:
    b = builder()
    out = b.start() + b.feed_all([ReasoningChunk("hmm"), MessageChunk("so far")])
    snapshot = b.snapshot()
    # In progress, the open items show what they have so far.
    assert snapshot["status"] == "in_progress"
    assert snapshot["output"][1]["content"][0]["text"] == "so far"
    assert snapshot["output"][1]["status"] == "in_progress"
    out += b.interrupt()
    check_stream(b, out)
    final = out[-1].payload()["response"]
    assert out[-1].type == "response.incomplete"
    assert final["incomplete_details"] == {"reason": None}
    assert [i["status"] for i in final["output"]] == ["completed", "incomplete"]
    assert b.feed(MessageChunk("late")) == []

    b2, out2 = run([MessageChunk("x"), TurnFinished("x", USAGE, "interrupted")])
    check_stream(b2, out2)
    assert b2.status == "incomplete"


def test_cancel_is_cancelled_status() -> None:
    b = builder(echo={"background": True})
    out = b.start() + b.feed(MessageChunk("part")) + b.cancel()
    check_stream(b, out)
    final = out[-1].payload()["response"]
    assert out[-1].type == "response.incomplete"
    assert final["status"] == "cancelled" and final["incomplete_details"] is None


def test_ignored_events_and_empty_chunks() -> None:
    b = builder()
    b.start()
    assert b.feed(GatewayNotice("restart", "x")) == []
    assert b.feed(LongToolHint("terminal", 3.0)) == []
    assert b.feed(Commentary("said")) == []
    assert b.feed(MessageChunk("")) == []
    assert b.feed(ReasoningChunk("")) == []
    assert b.feed(MessageStop(final=True)) == []


def test_unicode_and_newlines_survive() -> None:
    text = 'line one\nline "two" — ünïcödé 🎉\r\n'
    b, out = run([MessageChunk(text), TurnFinished(text, USAGE, "stop")])
    check_stream(b, out)
    decoder = SSEDecoder()
    decoded = [e for e in decoder.feed(b"".join(e.frame for e in out)) if isinstance(e, SSEEvent)]
    deltas = [json.loads(d.data) for d in decoded if d.event == "response.output_text.delta"]
    assert "".join(d["delta"] for d in deltas) == text


# -- properties -----------------------------------------------------------------

_texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)
_step = st.one_of(
    _texts.map(MessageChunk),
    _texts.map(ReasoningChunk),
    st.booleans().map(MessageStop),
    _texts.map(Commentary),
    st.integers(0, 3).map(lambda i: ("call", i)),
    st.integers(0, 3).map(lambda i: ("result", i)),
    st.tuples(st.integers(0, 2), _texts, st.booleans()).map(lambda t: ("client", *t)),
)
_ending = st.sampled_from(["stop", "length", "error", "tool_calls", "interrupt", "cancel", None])


def _events(steps: list[Any]) -> list[StreamEvent]:
    """The steps as the agent sends them: a client call starts (with an id
    no other call has) before any more of it comes."""
    events: list[StreamEvent] = []
    started: set[int] = set()
    for step in steps:
        if isinstance(step, tuple) and step[0] == "client":
            _, i, piece, starts = step
            if starts or i not in started:
                started.add(i)
                events.append(ToolCallDelta(i, piece, f"client_{len(events)}", "f"))
            else:
                events.append(ToolCallDelta(i, piece))
        elif isinstance(step, tuple):
            kind, i = step
            if kind == "call":
                events.append(ToolCallChunk("tool", "p", {"i": i}, i, f"c{i}"))
            else:
                events.append(ToolCallFinished("tool", 0.1, True, i, f"c{i}", f"r{i}"))
        else:
            events.append(step)
    return events


@settings(max_examples=200, deadline=None)
@given(st.lists(_step, max_size=12), _ending, _texts, st.booleans())
def test_any_turn_gives_a_valid_stream(
    steps: list[Any], ending: str | None, final: str, tool_events: bool
) -> None:
    b = builder(clock=lambda: 1_700_000_001, tool_events=tool_events)
    out = b.start() + b.feed_all(_events(steps))
    if ending in ("stop", "length"):
        out += b.feed(TurnFinished(final, USAGE, ending))
    elif ending == "error":
        out += b.feed(TurnFinished(final, USAGE, "error", error="boom", error_code="model_error"))
    elif ending == "tool_calls":
        call = {"id": "client_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        out += b.feed(TurnFinished(final, USAGE, "tool_calls", tool_calls=(call,)))
    elif ending == "interrupt":
        out += b.interrupt()
    elif ending == "cancel":
        out += b.cancel()
    check_stream(b, out)
    # The deltas add up to each message's text, and the final object says the same.
    assert text_deltas(out) == b.output_text
    for payload in (e.payload() for e in out):
        if payload["type"] == "response.output_item.done" and payload["item"]["type"] == "message":
            assert payload["item"]["content"][0]["text"] == next(
                i.text for i in b.items if i.id == payload["item"]["id"]
            )
    if b.status == "completed":
        parsed = sdk_replay(out)
        assert parsed.output_text == b.output_text
        assert [i.id for i in parsed.output] == [i["id"] for i in b.snapshot()["output"]]
    if ending is None:
        assert not b.ended and out[-1].type not in TERMINAL_TYPES


@pytest.mark.parametrize("count", [0, 1, 3])
def test_consecutive_calls_keep_output_indexes(count: int) -> None:
    events: list[StreamEvent] = []
    for i in range(count):
        events.append(ToolCallChunk("t", "", {}, i, f"c{i}"))
    for i in range(count):
        events.append(ToolCallFinished("t", 0.0, True, i, f"c{i}", "ok"))
    events.append(TurnFinished("fin", USAGE, "stop"))
    b, out = run(events)
    check_stream(b, out)
    assert [i.kind for i in b.items] == ["message"]
