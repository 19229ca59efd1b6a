"""ClientCallStream: a step's tool-call fragments → ToolCallDelta events for
the client's calls only."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_trio.events import ToolCallDelta
from hermes_trio.wire.chat_chunks import ToolCall, ToolCallArgs, ToolCallStart
from hermes_trio.wire.client_calls import ClientCallStream

CLIENT = frozenset({"get_weather", "get_time"})


def test_client_calls_stream_and_own_calls_stay_hidden() -> None:
    stream = ClientCallStream(CLIENT)
    assert not stream.started
    out = stream.feed([ToolCallStart(0, "call_r", "read_file"), ToolCallArgs(0, '{"path"')])
    assert out == [] and not stream.started
    out = stream.feed(
        [
            ToolCallArgs(0, ': "x"}'),
            ToolCallStart(1, "call_w", "get_weather"),
            ToolCallArgs(1, '{"ci'),
            ToolCallArgs(1, 'ty": "Paris"}'),
        ]
    )
    # Pieces that arrived together go out as one delta.
    assert out == [ToolCallDelta(0, '{"city": "Paris"}', "call_w", "get_weather")]
    assert out[0].starts and stream.started
    assert stream.feed([ToolCallStart(2, "call_t", "get_time")]) == [
        ToolCallDelta(1, "", "call_t", "get_time")
    ]
    assert stream.feed([ToolCallArgs(2, "{}"), ToolCallArgs(1, "")]) == [ToolCallDelta(1, "{}")]
    calls = [
        ToolCall("call_r", "read_file", '{"path": "x"}'),
        ToolCall("call_w", "get_weather", '{"city": "Paris"}'),
        ToolCall("call_t", "get_time", "{}"),
    ]
    late, fixed, theirs = stream.finish(calls)
    assert late == [] and fixed == calls and theirs == calls[1:]


def test_a_whole_answer_is_announced_once_at_the_end() -> None:
    stream = ClientCallStream(CLIENT)
    calls = [
        ToolCall("call_t", "get_time", "{}"),
        ToolCall("call_r", "read_file", "{}"),
        ToolCall("call_w", "get_weather", '{"city": "Oslo"}'),
    ]
    late, fixed, theirs = stream.finish(calls)
    assert late == [
        ToolCallDelta(0, "{}", "call_t", "get_time"),
        ToolCallDelta(1, '{"city": "Oslo"}', "call_w", "get_weather"),
    ]
    assert fixed == calls and theirs == [calls[0], calls[2]]


def test_a_name_that_arrives_late_is_announced_at_the_end() -> None:
    stream = ClientCallStream(CLIENT)
    assert stream.feed([ToolCallStart(0, "call_a", "get_time")]) != []
    # The server sent this call's name only after its first fragment.
    assert stream.feed([ToolCallStart(1, "call_b", ""), ToolCallArgs(1, "{}")]) == []
    late, _, theirs = stream.finish(
        [ToolCall("call_a", "get_time", ""), ToolCall("call_b", "get_weather", "{}")]
    )
    assert late == [ToolCallDelta(1, "{}", "call_b", "get_weather")]
    assert [c.id for c in theirs] == ["call_a", "call_b"]


def test_an_id_that_arrives_late_does_not_replace_the_one_shown() -> None:
    stream = ClientCallStream(CLIENT)
    # No id in the first fragment: the accumulator's stand-in is shown.
    stream.feed([ToolCallStart(0, "call_0", "get_time")])
    late, fixed, theirs = stream.finish([ToolCall("real_id", "get_time", "{}", "function")])
    assert late == [] and fixed == theirs == [ToolCall("call_0", "get_time", "{}", "function")]


_call = st.tuples(
    st.sampled_from(["get_weather", "get_time", "read_file", "terminal"]),
    st.text(max_size=12),
    st.booleans(),  # the name arrives with the first fragment
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_call, max_size=5), st.data())
def test_every_client_call_reaches_the_client_once_and_whole(
    calls: list[tuple[str, str, bool]], data: Any
) -> None:
    """However the fragments of a step's calls interleave, the client gets
    each of its calls once, with all of its arguments, and none of ours."""
    # Fragments per call, then a random interleaving that keeps each call's order.
    queues: list[list[ToolCallStart | ToolCallArgs]] = []
    for slot, (name, args, named) in enumerate(calls):
        cuts = sorted(data.draw(st.sets(st.integers(0, len(args)), max_size=3)))
        pieces = [args[a:b] for a, b in zip([0, *cuts], [*cuts, len(args)], strict=True)]
        start = ToolCallStart(slot, f"call_{slot}", name if named else "")
        queues.append([start, *(ToolCallArgs(slot, p) for p in pieces if p)])
    stream = ClientCallStream(CLIENT)
    deltas: list[ToolCallDelta] = []
    while any(queues):
        live = [q for q in queues if q]
        queue = data.draw(st.sampled_from(live))
        take = data.draw(st.integers(1, len(queue)))
        batch, queue[:] = queue[:take], queue[take:]
        deltas += stream.feed(batch)
    whole = [ToolCall(f"call_{slot}", name, args) for slot, (name, args, _) in enumerate(calls)]
    late, fixed, theirs = stream.finish(whole)
    deltas += late
    assert fixed == whole
    # The client's calls, in the order they were announced.
    assert sorted(theirs, key=whole.index) == [c for c in whole if c.name in CLIENT]
    # Each client call starts once, before its arguments, at its index.
    starts = [d for d in deltas if d.starts]
    assert [(d.index, d.call_id, d.name) for d in starts] == [
        (i, c.id, c.name) for i, c in enumerate(theirs)
    ]
    for index, call in enumerate(theirs):
        mine = [d for d in deltas if d.index == index]
        assert mine[0].starts
        assert "".join(d.arguments for d in mine) == call.arguments


def test_repeated_ids_are_made_unique_before_anyone_sees_them() -> None:
    stream = ClientCallStream(CLIENT)
    out = stream.feed(
        [
            ToolCallStart(0, "dup", "get_weather"),
            ToolCallStart(1, "dup", "read_file"),
            ToolCallStart(2, "dup", "get_time"),
        ]
    )
    assert [(d.index, d.call_id) for d in out] == [(0, "dup"), (1, "dup_2")]
    calls = [
        ToolCall("dup", "get_weather", "{}"),
        ToolCall("dup", "read_file", "{}"),
        ToolCall("dup", "get_time", "{}"),
        ToolCall("dup", "get_weather", "[]"),
    ]
    late, fixed, theirs = stream.finish(calls)
    # Announced whole at the end: unique too.
    assert [(d.index, d.call_id) for d in late] == [(2, "dup_3")]
    # The conversation keeps the ids as shown; our own call gets one no
    # other call has, so its result matches it alone.
    assert [c.id for c in fixed] == ["dup", "dup_4", "dup_2", "dup_3"]
    assert [c.id for c in theirs] == ["dup", "dup_2", "dup_3"]


@given(st.lists(st.sampled_from(["a", "b", "a_2", ""]), max_size=6))
def test_every_call_of_a_step_ends_with_an_id_of_its_own(ids: list[str]) -> None:
    names = ["get_weather", "read_file"]
    stream = ClientCallStream(CLIENT)
    calls = [ToolCall(call_id, names[n % 2], "{}") for n, call_id in enumerate(ids)]
    shown = stream.feed(
        [ToolCallStart(n, c.id or f"call_{n}", c.name) for n, c in enumerate(calls)]
    )
    late, fixed, theirs = stream.finish(calls)
    assert late == []
    assert len({c.id for c in fixed}) == len(fixed)
    assert [d.call_id for d in shown] == [c.id for c in theirs]
