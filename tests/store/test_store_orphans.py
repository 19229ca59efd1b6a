"""How an orphaned response ends (store/orphans.py), without a database."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.store.orphans import orphan_end
from hermes_trio.wire.interrupted import INTERRUPTED_MARK, interrupted_answer

RESPONSE = {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}
MESSAGES = [{"role": "user", "content": "Tell me a story"}]


def _message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def test_it_ends_incomplete_with_what_was_built_and_the_answer_marked() -> None:
    output = [_message("Once upon")]
    end = orphan_end(RESPONSE, output, MESSAGES, last_event=7, reservation=None)
    assert end.response["status"] == "incomplete"
    assert end.response["incomplete_details"] == {"reason": None}
    assert end.response["output"] == output and end.response["output_text"] == "Once upon"
    assert end.messages == [*MESSAGES, {"role": "assistant", "content": "Once upon [interrupted]"}]
    assert end.seq == 8
    assert end.event == {
        "type": "response.incomplete",
        "response": end.response,
        "sequence_number": 8,
    }


def test_nothing_shown_leaves_the_mark_alone() -> None:
    end = orphan_end(RESPONSE, [], MESSAGES, last_event=None, reservation=None)
    assert end.messages[-1] == {"role": "assistant", "content": INTERRUPTED_MARK}
    assert end.seq == 0


def test_the_agent_and_the_store_word_it_the_same() -> None:
    end = orphan_end(RESPONSE, [_message("Half")], MESSAGES, last_event=1, reservation=None)
    assert end.messages[-1] == interrupted_answer("Half")


@given(
    last=st.none() | st.integers(min_value=0, max_value=10**6),
    reserved=st.none() | st.integers(min_value=0, max_value=10**6),
)
def test_the_closing_event_comes_after_anything_a_client_may_have_seen(
    last: int | None, reserved: int | None
) -> None:
    response, messages = copy.deepcopy(RESPONSE), copy.deepcopy(MESSAGES)
    end = orphan_end(response, [], messages, last_event=last, reservation=reserved)
    seen = [n for n in (last, reserved) if n is not None]
    assert end.seq == (max(seen) + 1 if seen else 0)
    assert end.event["sequence_number"] == end.seq
    # The rows it was read from are not changed.
    assert (response, messages) == (RESPONSE, MESSAGES)
