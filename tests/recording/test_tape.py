"""The recording format, sans-IO: round trips, secrets, the virtual clock,
and how two timelines are compared."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.events import LongToolHint, MessageChunk, ToolCallFinished, TurnFinished, Usage
from hermes_trio.recording.tape import (
    RecordingError,
    VirtualClock,
    event_record,
    first_difference,
    parse,
    piece_from_json,
    piece_to_json,
    scrub,
    serialize,
    timeline_lines,
)
from hermes_trio.redaction import REDACTED, register_secret

SECRET = "sk-tape-secret-abcdefghijklmnop"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(st.binary(max_size=200))
def test_a_body_piece_round_trips_whatever_its_bytes(data: bytes) -> None:
    piece = piece_to_json(data)
    assert piece_from_json(json.loads(json.dumps(piece))) == data


@given(json_values, st.lists(st.text(max_size=30), max_size=5))
def test_a_document_round_trips(params: object, texts: list[str]) -> None:
    events = [event_record(i * 0.25, MessageChunk(t)) for i, t in enumerate(texts)]
    # Open JSON where the document has some: the client's sampling parameters.
    turn = {"messages": [], "options": {"params": {"p": params}}}
    document = {"turn": turn, "exchanges": [], "tools": [], "events": events}
    back = parse(serialize(document))
    # It comes back as written: scrubbed, and equal to what was recorded
    # once both sides are (as a replay compares them).
    assert back["events"] == scrub(events)
    assert back["turn"] == scrub(turn)
    assert first_difference(events, back["events"]) is None


def test_secrets_and_credentials_never_reach_the_text() -> None:
    register_secret(SECRET)
    document = {
        "turn": {SECRET: [f"key {SECRET}", {"Authorization": "Bearer abcdefghijkl"}]},
        "exchanges": [{"body": 'x-api-key: zzzzzzzzzz "api_key": "unknown-key-123"'}],
        "tools": [],
        "events": [],
    }
    text = serialize(document)
    for leaked in (SECRET, "abcdefghijkl", "zzzzzzzzzz", "unknown-key-123"):
        assert leaked not in text
    assert json.loads(text)["turn"] == {REDACTED: [f"key {REDACTED}", {"Authorization": REDACTED}]}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("nope", "not JSON"),
        ("{}", "not a hermes-trio recording"),
        ('{"format": "hermes-trio-recording", "version": 99}', "version 99"),
        ('{"format": "hermes-trio-recording", "version": 1, "truncated": true}', "max_file_bytes"),
        ('{"format": "hermes-trio-recording", "version": 1, "turn": {}}', "exchanges: missing"),
    ],
)
def test_a_file_that_is_not_a_recording_is_named(text: str, problem: str) -> None:
    with pytest.raises(RecordingError, match=problem):
        parse(text, where="f.json")


def test_the_virtual_clock_counts_waits_not_work() -> None:
    clock = VirtualClock(live=100.0)
    # A request sent at live 100.010 (10 ms of work: free), answered 0.5 s later.
    assert clock.waited(0.0, 100.010, 100.510) == pytest.approx(0.5)
    # A tool started after 3 ms more of work ran 2 s.
    assert clock.waited(clock.now, 100.513, 102.513) == pytest.approx(2.5)
    # A client left 0.25 s after that.
    assert clock.external(102.763) == pytest.approx(2.75)
    # The turn closed an answer 2 ms after its last piece: its reaction,
    # no time; 60 ms after the next one: a timer, which counts.
    assert clock.waited(clock.now, 102.763, 103.763) == pytest.approx(3.75)
    assert clock.reacted(2.75, 102.763, 103.765) == pytest.approx(3.75)
    assert clock.reacted(2.75, 102.763, 103.825) == pytest.approx(3.812)


def test_timelines_match_to_the_millisecond_and_name_the_first_difference() -> None:
    usage = Usage()
    recorded = [
        event_record(0.1, MessageChunk("Hi")),
        event_record(3.0, LongToolHint("terminal", 3.0)),
        event_record(4.0, ToolCallFinished("terminal", 2.5, True, 0, "c", "out")),
        event_record(4.0, TurnFinished("Hi", usage, "stop")),
    ]
    replayed = [
        event_record(0.1002, MessageChunk("Hi")),
        event_record(3.7, LongToolHint("terminal", 3.7)),  # a timer's time is not compared
        event_record(4.0, ToolCallFinished("terminal", 2.5001, True, 0, "c", "out")),
        event_record(4.0, TurnFinished("Hi", usage, "stop")),
    ]
    assert first_difference(recorded, replayed) is None
    # A field a later version added does not fail an older recording.
    newer = [{**r, "data": {**r["data"], "added_later": 1}} for r in replayed]
    assert first_difference(recorded, newer) is None
    assert first_difference(newer, replayed) is not None
    late = [*replayed[:3], event_record(4.002, TurnFinished("Hi", usage, "stop"))]
    difference = first_difference(recorded, late, causes=["", "", "", "tool call 1 (terminal)"])
    assert difference is not None and difference.index == 3
    assert "event 4 differs (just after tool call 1 (terminal))" in str(difference)
    assert "at 4.000 s" in str(difference) and "at 4.002 s" in str(difference)
    short = first_difference(recorded, replayed[:2])
    assert short is not None and "ended before event 3" in str(short)
    lines = timeline_lines(recorded)
    assert lines[2].split() == ["4.000", "ToolCallFinished", "ok", "in", "2.500", "s:", "out"]
