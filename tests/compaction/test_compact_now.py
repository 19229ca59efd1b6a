"""``Agent.compact`` and ``Agent.context_size``: what a person's
``/compact`` and ``/context`` ask of the agent, against the model double."""

from __future__ import annotations

from typing import Any

import pytest
from support import agent_on_double
from trio.testing import MockClock

from hermes_trio.config import CompactionConfig
from hermes_trio.llm import ModelError
from hermes_trio.testing import ErrorReply, TextReply
from hermes_trio.wire.context import SUMMARY_MARK, is_summary
from hermes_trio.wire.messages import Message

SECTIONS: dict[str, Any] = {
    "compaction": CompactionConfig(summary_max_tokens=100, summary_timeout=30.0),
    "agent": {"tools": []},
    "model": {"context_window": 100_000},
}


def chat(exchanges: int) -> list[Message]:
    messages: list[Message] = []
    for i in range(exchanges):
        messages.append({"role": "user", "content": f"question {i}"})
        messages.append({"role": "assistant", "content": f"answer {i}"})
    return messages


async def test_compact_summarises_all_but_the_newest_exchange_far_below_the_threshold(
    autojump_clock: MockClock,
) -> None:
    async with agent_on_double([TextReply("the summary")], **SECTIONS) as (agent, double):
        messages = chat(3)
        before, window = await agent.context_size(messages)
        assert window == 100_000 and 0 < before < 1000
        event = await agent.compact(messages)
        after, _ = await agent.context_size(messages)
    assert event is not None and event.how == "summary" and event.folded == 4
    assert (event.tokens_before, event.tokens_after, event.window) == (before, after, 100_000)
    assert messages[0]["content"] == SUMMARY_MARK + "the summary"
    assert messages[1:] == chat(3)[4:]
    (request,) = double.model_requests
    assert "question 0" in request.json["messages"][1]["content"]


async def test_compact_with_nothing_before_the_newest_exchange_asks_nothing(
    autojump_clock: MockClock,
) -> None:
    async with agent_on_double([TextReply("the summary")], **SECTIONS) as (agent, double):
        messages = chat(1)
        assert await agent.compact(messages) is None
        assert await agent.compact([]) is None
        # Once compacted, a summary and one exchange: nothing more to fold.
        two = chat(2)
        assert await agent.compact(two) is not None
        assert is_summary(two[0]) and await agent.compact(two) is None
    assert messages == chat(1)
    assert len(double.model_requests) == 1


async def test_a_failed_compact_raises_and_leaves_the_conversation(
    autojump_clock: MockClock,
) -> None:
    async with agent_on_double([ErrorReply(400, "boom")], **SECTIONS) as (agent, _double):
        messages = chat(3)
        with pytest.raises(ModelError):
            await agent.compact(messages)
    assert messages == chat(3)
