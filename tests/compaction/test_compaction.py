"""Compaction between model calls, on trio's MockClock against the
in-process model double: when a turn compacts, what the model sees, and
what an interrupt, a slow summary, a refused request or a huge message do.
Every time asserted is exact virtual time."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import trio
from support import agent_on_double
from trio.testing import MockClock

from hermes_trio.config import CompactionConfig
from hermes_trio.events import ContextCompacted, MessageChunk, StreamEvent, TurnFinished
from hermes_trio.testing import ErrorReply, ModelDouble, RecordedRequest, Stall, TextReply
from hermes_trio.wire.context import SUMMARY_MARK, is_summary
from hermes_trio.wire.messages import Message

WINDOW = 2000
SECTIONS: dict[str, Any] = {
    "compaction": CompactionConfig(summary_max_tokens=100, summary_timeout=30.0),
}
# No built-in tools: their definitions would take most of a small window.
NO_TOOLS: dict[str, Any] = {"tools": []}
SLOW: dict[str, Any] = {"timeouts": {"request": 1000.0, "first_token": 1000.0}}


def chat(exchanges: int) -> list[Message]:
    messages: list[Message] = []
    for i in range(exchanges):
        messages.append({"role": "user", "content": f"question {i} " + "q" * 90})
        messages.append({"role": "assistant", "content": f"answer {i} " + "a" * 390})
    return messages


def summary_asked(request: RecordedRequest) -> bool:
    body = request.json
    return str(body["messages"][0]["content"]).startswith("You write the memory")


async def run(agent: Any, messages: list[Message]) -> list[tuple[float, StreamEvent]]:
    send, receive = trio.open_memory_channel[StreamEvent](64)
    seen: list[tuple[float, StreamEvent]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.run_turn, messages, send)
        async with receive:
            async for event in receive:
                seen.append((trio.current_time(), event))
    return seen


async def test_a_conversation_past_the_threshold_is_summarised_before_the_request(
    autojump_clock: MockClock,
) -> None:
    async def summary_in_two_seconds(_request: RecordedRequest) -> TextReply:
        await trio.sleep(2)
        return TextReply("the summary")

    script = [summary_in_two_seconds, TextReply("Hi there", first_token_delay=1)]
    async with agent_on_double(
        script, model={"context_window": WINDOW}, agent=NO_TOOLS, **SECTIONS
    ) as (
        agent,
        double,
    ):
        messages = [*chat(12), {"role": "user", "content": "and now?"}]
        seen = await run(agent, messages)
    summary, answer = double.model_requests
    assert summary_asked(summary)
    assert not summary.stream and summary.json["max_tokens"] == 100
    assert "question 0" in summary.json["messages"][1]["content"]
    sent = answer.json["messages"]
    assert sent[0]["role"] == "system"
    assert sent[1]["content"] == SUMMARY_MARK + "the summary"
    assert sent[-1] == {"role": "user", "content": "and now?"}
    # The newest exchanges went as they were; the older ones were folded.
    assert sent[2]["role"] == "user" and sent[2:-1] == messages[1:-2]
    events = [e for _, e in seen]
    compacted = next(e for e in events if isinstance(e, ContextCompacted))
    assert compacted.how == "summary" and compacted.window == WINDOW
    assert compacted.tokens_after < WINDOW * 0.75 < compacted.tokens_before
    assert compacted.folded == 25 - len(sent[2:])
    # The event comes at the summary's end, before the answer's first token.
    at = next(t for t, e in seen if isinstance(e, ContextCompacted))
    first = next(t for t, e in seen if isinstance(e, MessageChunk))
    assert (at, first) == (2.0, 3.0)
    assert is_summary(messages[0]) and messages[-1]["content"] == "Hi there"


async def test_an_interrupt_during_the_summary_leaves_the_conversation_as_it_was(
    autojump_clock: MockClock,
) -> None:
    script = [Stall(60)]
    model = {"context_window": WINDOW, **SLOW}
    async with agent_on_double(script, model=model, agent=NO_TOOLS, **SECTIONS) as (
        agent,
        double,
    ):
        messages = [*chat(20), {"role": "user", "content": "and now?"}]
        before = copy.deepcopy(messages)
        send, receive = trio.open_memory_channel[StreamEvent](64)
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent.run_turn, messages, send)
                await double.wait_request(1)
                await trio.sleep(5)
                scope.cancel()
        closed = await double.wait_connection_closed(1)
        receive.close()
    assert summary_asked(double.model_requests[0])
    assert (closed.closed_at, closed.closed_by) == (5.0, "client")
    # The interrupt note follows the untouched conversation.
    assert messages[: len(before)] == before
    assert not any(is_summary(m) for m in messages)


async def test_a_summary_that_times_out_falls_back_to_dropping_the_oldest(
    autojump_clock: MockClock,
) -> None:
    script = [Stall(600), TextReply("fine")]
    model = {"context_window": WINDOW, **SLOW}
    async with agent_on_double(script, model=model, agent=NO_TOOLS, **SECTIONS) as (
        agent,
        double,
    ):
        messages = [*chat(20), {"role": "user", "content": "and now?"}]
        seen = await run(agent, messages)
    compacted = next((t, e) for t, e in seen if isinstance(e, ContextCompacted))
    at, event = compacted
    assert at == 30.0
    assert event.how == "truncation" and "longer than 30 s" in event.reason
    answer = double.model_requests[1].json["messages"]
    assert answer[1]["content"].startswith(SUMMARY_MARK + "(The earlier part")
    assert answer[-1] == {"role": "user", "content": "and now?"}
    end = seen[-1][1]
    assert isinstance(end, TurnFinished) and end.text == "fine"


def answering(*main: Any) -> Any:
    """Summary requests get a short summary; the others, ``main`` in turn."""
    steps = list(main)

    def reply(request: RecordedRequest) -> Any:
        if summary_asked(request):
            return TextReply("short summary")
        return steps.pop(0) if len(steps) > 1 else steps[0]

    return reply


REFUSAL = ErrorReply(
    400,
    "This model's maximum context length is 900 tokens. However, your messages "
    "resulted in 1200 tokens.",
    code="context_length_exceeded",
)


async def test_a_refused_request_is_compacted_and_asked_once_more(
    autojump_clock: MockClock,
) -> None:
    # The window is not known here: the default is far too big, and the
    # server's refusal teaches it.
    double = ModelDouble(default=answering(REFUSAL, TextReply("Answer once")))
    unknown = {"context_window": None}
    async with agent_on_double(double, model=unknown, agent=NO_TOOLS, **SECTIONS) as (agent, _):
        messages = [*chat(6), {"role": "user", "content": "and now?"}]
        seen = await run(agent, messages)
    first, *summaries, again = double.model_requests
    assert not summary_asked(first) and summaries and all(map(summary_asked, summaries))
    assert again.json["messages"][1]["content"] == SUMMARY_MARK + "short summary"
    assert again.json["messages"][-1] == {"role": "user", "content": "and now?"}
    text = "".join(e.text for _, e in seen if isinstance(e, MessageChunk))
    assert text == "Answer once"
    compacted = [e for _, e in seen if isinstance(e, ContextCompacted)]
    assert len(compacted) == 1 and compacted[0].window == 900


async def test_a_second_refusal_is_the_answer(autojump_clock: MockClock) -> None:
    double = ModelDouble(default=answering(REFUSAL))
    unknown = {"context_window": None}
    async with agent_on_double(double, model=unknown, agent=NO_TOOLS, **SECTIONS) as (agent, _):
        seen = await run(agent, [*chat(6), {"role": "user", "content": "and now?"}])
    end = seen[-1][1]
    assert isinstance(end, TurnFinished) and end.finish_reason == "error"
    assert end.error_code == "context_length_exceeded"
    asked = [r for r in double.model_requests if not summary_asked(r)]
    assert len(asked) == 2


async def test_an_older_part_larger_than_the_window_is_summarised_in_pieces(
    autojump_clock: MockClock,
) -> None:
    pieces = (f"notes {n}" for n in itertools.count())
    double = ModelDouble(
        default=lambda r: TextReply(next(pieces)) if summary_asked(r) else TextReply("ok")
    )
    model = {"context_window": 1000}
    async with agent_on_double(double, model=model, agent=NO_TOOLS, **SECTIONS) as (agent, _):
        messages = [*chat(20), {"role": "user", "content": "and now?"}]
        await run(agent, messages)
    summaries = [r for r in double.model_requests if summary_asked(r)]
    assert len(summaries) >= 2
    # Each piece folds the summary of the pieces before it.
    for before, request in itertools.pairwise(summaries):
        said = before.json["messages"][1]["content"]
        assert "Summary of what came before" in request.json["messages"][1]["content"]
        assert said not in request.json["messages"][1]["content"]
    last = double.model_requests[-1].json["messages"]
    assert last[1]["content"].startswith(SUMMARY_MARK) and "notes" in last[1]["content"]
    assert sum(1 for m in last if is_summary(m)) == 1


async def test_a_message_larger_than_the_window_is_answered_clearly(
    autojump_clock: MockClock,
) -> None:
    async with agent_on_double(
        [], model={"context_window": WINDOW}, agent=NO_TOOLS, **SECTIONS
    ) as (
        agent,
        double,
    ):
        huge: Message = {"role": "user", "content": "word " * 4000}
        seen = await run(agent, [*chat(2), huge])
    assert double.model_requests == []
    end = seen[-1][1]
    assert isinstance(end, TurnFinished) and end.finish_reason == "error"
    assert end.error_code == "context_length_exceeded"
    assert end.error is not None
    assert "5,004 tokens" in end.error and "2,000 tokens" in end.error


async def test_requests_of_one_chat_repeat_the_last_ones_prefix_byte_for_byte(
    autojump_clock: MockClock,
) -> None:
    """Between compactions each request only appends to the one before (the
    system prompt, the summary and earlier messages byte-identical), so a
    provider's prompt cache keeps hitting; a compaction starts a new base."""
    double = ModelDouble(
        default=lambda r: TextReply("notes") if summary_asked(r) else TextReply("b" * 300)
    )
    model = {"context_window": WINDOW}
    async with agent_on_double(double, model=model, agent=NO_TOOLS, **SECTIONS) as (agent, _):
        messages: list[Message] = []
        compactions = 0
        for turn in range(40):
            messages.append({"role": "user", "content": f"turn {turn} " + "q" * 200})
            seen = await run(agent, messages)
            compactions += sum(1 for _, e in seen if isinstance(e, ContextCompacted))
    asked = [r for r in double.model_requests if not summary_asked(r)]
    bases = 0
    for before, after in itertools.pairwise(asked):
        end = before.body.rindex(b'],"stream"')
        if after.body.startswith(before.body[:end]):
            assert after.json["messages"][: len(before.json["messages"])] == before.json["messages"]
            continue
        # Only a compaction starts anew, and it starts with a summary.
        bases += 1
        assert after.json["messages"][1]["content"].startswith(SUMMARY_MARK)
    assert compactions >= 3 and bases == compactions


async def test_a_message_larger_than_an_assumed_window_is_sent_for_the_server_to_judge(
    autojump_clock: MockClock,
) -> None:
    # Nothing says the window: the default is a guess, no ground to refuse.
    unknown = {"context_window": None}
    async with agent_on_double(
        [TextReply("read it")], model=unknown, agent=NO_TOOLS, **SECTIONS
    ) as (agent, double):
        huge: Message = {"role": "user", "content": "word " * 40_000}
        seen = await run(agent, [huge])
    end = seen[-1][1]
    assert isinstance(end, TurnFinished) and end.text == "read it"
    assert len(double.model_requests) == 1


async def test_a_small_window_with_tools_compacts_short_messages_instead_of_refusing_them(
    autojump_clock: MockClock,
) -> None:
    """Found trying serve against a 1,200-token model: the default summary
    length (1,024 tokens) and the tool definitions left no room, so every
    short message was refused as "larger than the window"."""
    double = ModelDouble(
        default=lambda r: TextReply("notes") if summary_asked(r) else TextReply("w " * 60),
        context_window=1200,
    )
    # The default summary length, as a user has it.
    defaults = CompactionConfig()
    async with agent_on_double(double, model={"context_window": 1200}, compaction=defaults) as (
        agent,
        _,
    ):
        messages: list[Message] = []
        ends = []
        for turn in range(40):
            messages.append({"role": "user", "content": f"turn {turn} tell me more of the story"})
            seen = await run(agent, messages)
            ends.append(seen[-1][1])
    assert all(isinstance(e, TurnFinished) and e.finish_reason == "stop" for e in ends)
    assert any(summary_asked(r) for r in double.model_requests)


async def test_a_window_the_tools_alone_fill_is_named_as_such(autojump_clock: MockClock) -> None:
    async with agent_on_double([], model={"context_window": 600}, **SECTIONS) as (agent, double):
        seen = await run(agent, [*chat(2), {"role": "user", "content": "hi"}])
    end = seen[-1][1]
    assert isinstance(end, TurnFinished) and end.error_code == "context_length_exceeded"
    assert end.error is not None and "system prompt and tool definitions" in end.error
    assert double.model_requests == []
