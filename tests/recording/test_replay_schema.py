"""A recording is checked whole before it replays (recording/schema.py):
whatever one node of a real recording is changed to, the file is refused
in one line naming where, or it replays to a result — a match or a
difference — without raising and without crashing the replayed turn."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hermes_trio.recording.schema import MAX_DEPTH, check_document, read_json
from hermes_trio.recording.tape import RecordingError, parse
from hermes_trio.testing import Recording, replay

FIXTURE = Path(__file__).parent / "tool_call_turn.json"
DOCUMENT = json.loads(FIXTURE.read_text(encoding="utf-8"))


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*path, index))
    return found


# Every node but the document itself (format and version are checked first).
PATHS = [p for p in _paths(DOCUMENT) if p and p[0] not in ("format", "version")]

_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([-1, 0, 1, 2**31, 2**63, 10**30, 99999])
    | st.floats()
    | st.sampled_from([-0.5, 0.0, 1e7, 1e300])
    | st.text(max_size=12)
    | st.sampled_from(["", "eom", "closed", "error", "MessageChunk", "http://[::1", "abc="])
)
json_values = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _mutated(path: tuple[Any, ...], value: Any, drop: bool) -> dict[str, Any]:
    document = copy.deepcopy(DOCUMENT)
    node: Any = document
    for key in path[:-1]:
        node = node[key]
    if drop:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return document


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.sampled_from(PATHS), json_values, st.booleans())
# Found by hand: each crashed the replayed turn (or hung it) once.
@example(("turn", "settings", "agent", "think_tags", 0), "", False)
@example(("tools", 0, "duration"), float("inf"), False)
@example(("exchanges", 0, "url"), "http://[::1", False)
@example(("exchanges", 0, "headers", 0), ["content-type"], False)
@example(("exchanges", 0, "pieces", 0), {"after": 0, "base64": "abc"}, False)
def test_a_changed_node_is_named_or_the_turn_replays(
    path: tuple[Any, ...], value: Any, drop: bool
) -> None:
    text = json.dumps(_mutated(path, value, drop))
    try:
        document = parse(text, where="mutated.json")
    except RecordingError as exc:
        message = str(exc)
        assert message.startswith("mutated.json: ") and "\n" not in message, message
        return
    result = replay(Recording(document, "mutated.json"))
    # A match or a difference, never a turn that crashed on what the file held.
    crashed = [
        e.event for e in result.events if getattr(e.event, "error_code", None) == "internal_error"
    ]
    assert crashed == [], crashed
    assert result.difference is None or str(result.difference)


def test_the_real_recording_passes_and_replays() -> None:
    document = parse(FIXTURE.read_bytes(), where=str(FIXTURE))
    assert replay(Recording(document, str(FIXTURE))).matches


@pytest.mark.parametrize(
    ("path", "value", "problem"),
    [
        (
            ("exchanges", 1, "pieces", 2, "after"),
            "x",
            "exchanges[1].pieces[2].after: expected a number, got a string",
        ),
        (
            ("exchanges", 0, "end", "how"),
            "eof",
            'exchanges[0].end.how: expected one of "eom", "closed", "error", got "eof"',
        ),
        (
            ("exchanges", 0, "status"),
            700,
            "exchanges[0].status: expected a number from 100 to 599, got 700",
        ),
        (
            ("turn", "messages", 0, "role"),
            "robot",
            "turn.messages[0].role: expected one of "
            '"system", "user", "assistant", "tool", got "robot"',
        ),
        (
            ("turn", "settings", "agent", "max_iterations"),
            0,
            "turn.settings.agent.max_iterations: expected an integer of at least 1",
        ),
        (("turn", "options", "odd key"), 1, 'turn.options["odd key"]: unknown field'),
        (
            ("events", 7, "data", "usage", "prompt_tokens"),
            None,
            "events[7].data.usage.prompt_tokens: expected an integer, got null",
        ),
        (
            ("tools", 0, "index"),
            -1,
            "tools[0].index: expected a number from 0 to 2147483647, got -1",
        ),
    ],
)
def test_the_line_names_the_place_and_the_problem(
    path: tuple[Any, ...], value: Any, problem: str
) -> None:
    with pytest.raises(RecordingError) as caught:
        parse(json.dumps(_mutated(path, value, drop=False)), where="f.json")
    assert str(caught.value) == f"f.json: {problem}"


def test_a_document_edited_after_loading_is_checked_before_it_replays() -> None:
    recording = Recording.load(FIXTURE)
    recording.document["tools"][0]["duration"] = float("inf")
    with pytest.raises(RecordingError, match=r"tools\[0\]\.duration: expected a finite number"):
        replay(recording)


def test_nesting_is_bounded_before_anything_recurses() -> None:
    assert read_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    with pytest.raises(ValueError, match=r"\[0\]…: arrays and objects nested deeper than 100"):
        read_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    with pytest.raises(ValueError, match="line 1 column 101: arrays and objects nested deeper"):
        read_json("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ValueError, match="top level: expected an object, got an array"):
        check_document([])


def test_a_header_past_ascii_replays_as_the_live_client_read_it() -> None:
    # httpx decodes a server's UTF-8 (or Latin-1) header bytes to text; the
    # recording keeps that text, and the replay must not refuse to send it.
    document = _mutated(("exchanges", 0, "headers", 4), ["x-served-by", "café ☕"], drop=False)
    result = replay(Recording(parse(json.dumps(document)), "utf8-header.json"))
    assert result.matches, result.difference
