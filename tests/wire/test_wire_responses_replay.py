"""replay_output: the output a stream had built, from any prefix of its events."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_trio.events import (
    MessageChunk,
    MessageStop,
    ReasoningChunk,
    StreamEvent,
    ToolCallChunk,
    ToolCallFinished,
    TurnFinished,
)
from hermes_trio.wire.responses_out import ResponseBuilder
from hermes_trio.wire.responses_replay import output_text, replay_output

text = st.text(min_size=1, max_size=8)
turn_event = st.one_of(
    st.builds(MessageChunk, text),
    st.builds(ReasoningChunk, text),
    st.builds(MessageStop, st.booleans()),
    st.builds(
        ToolCallChunk,
        tool_name=st.sampled_from(["read_file", "terminal"]),
        preview=st.just(""),
        args=st.dictionaries(st.sampled_from(["path", "command"]), text, max_size=2),
        index=st.just(0),
        call_id=st.sampled_from(["", "call_1", "call_2"]),
    ),
    st.builds(
        ToolCallFinished,
        tool_name=st.sampled_from(["read_file", "terminal"]),
        duration=st.just(0.1),
        ok=st.booleans(),
        index=st.just(0),
        call_id=st.sampled_from(["", "call_1", "call_2"]),
        result=text,
    ),
)


def as_left_open(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A builder's snapshot output with open items as recovery marks them."""
    return [
        dict(item, status="incomplete") if item["status"] == "in_progress" else item
        for item in output
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(turn_event, max_size=12), st.booleans())
def test_every_prefix_replays_to_what_the_builder_had(
    turn: list[StreamEvent], finish: bool
) -> None:
    builder = ResponseBuilder("resp_1", created_at=1, model="m")
    events = [e.payload() for e in builder.start()]
    checkpoints = [(len(events), as_left_open(builder.snapshot()["output"]))]
    for item in [*turn, TurnFinished("done", None, "stop")] if finish else turn:
        events += [e.payload() for e in builder.feed(item)]
        checkpoints.append((len(events), as_left_open(builder.snapshot()["output"])))
    for cut, expected in checkpoints:
        assert replay_output(events[:cut]) == expected
    # Deltas of items already done may be left out.
    done = {e["output_index"] for e in events if e["type"] == "response.output_item.done"}
    sparse = [e for e in events if not ("delta" in e and e["output_index"] in done)]
    assert replay_output(sparse) == checkpoints[-1][1]


def test_output_text_joins_the_message_items() -> None:
    builder = ResponseBuilder("resp_1", created_at=1, model="m")
    events = builder.start() + builder.feed(ReasoningChunk("hmm"))
    events += builder.feed(MessageChunk("Hello, "))
    events += builder.feed(MessageStop(final=False))
    events += builder.feed(MessageChunk("world"))
    output = replay_output(e.payload() for e in events)
    assert [item["type"] for item in output] == ["reasoning", "message", "message"]
    assert [item["status"] for item in output] == ["completed", "completed", "incomplete"]
    assert output_text(output) == "Hello, world" == builder.output_text


def test_events_without_an_index_or_unknown_are_ignored() -> None:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {}},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "orphan"},
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "other"}},
        {"type": "response.something.delta", "output_index": 0, "delta": "x"},
    ]
    assert replay_output(events) == [{"type": "other", "status": "incomplete"}]
