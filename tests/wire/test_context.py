"""The pure decisions of compaction (hermes_trio.wire.context): where a
conversation may be cut, what truncation drops, how a refusal is read,
and, over random conversations with tool calls, that every compacted
conversation is one the Chat Completions API accepts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from trio.testing import MockClock

from hermes_trio.compaction import ContextKeeper, ContextTooLarge
from hermes_trio.config import CompactionConfig, Config, ModelConfig
from hermes_trio.llm import ModelClient, ModelResponse
from hermes_trio.wire.chat_chunks import AssistantMessage
from hermes_trio.wire.context import (
    SUMMARY_MARK,
    Calibration,
    ContextPolicy,
    choose_cut,
    drop_oldest,
    exchange_starts,
    is_summary,
    message_tokens,
    overflow_of,
    summary_message,
    summary_request,
    transcript,
    unit_starts,
)
from hermes_trio.wire.messages import Message

# -- random conversations -----------------------------------------------------


@st.composite
def exchanges(draw: st.DrawFn, *, last: bool = False) -> list[Message]:
    """A user's message, some tool steps, and (unless it is still running)
    the answer."""
    n = draw(st.integers(0, 10_000))
    out: list[Message] = [{"role": "user", "content": "u" * draw(st.integers(1, 800)) + str(n)}]
    for step in range(draw(st.integers(0, 3))):
        calls = draw(st.integers(1, 3))
        ids = [f"call_{n}_{step}_{i}" for i in range(calls)]
        out.append(
            {
                "role": "assistant",
                "content": draw(st.sampled_from([None, "let me look"])),
                "tool_calls": [
                    {
                        "id": i,
                        "type": "function",
                        "function": {"name": "terminal", "arguments": '{"command": "ls"}'},
                    }
                    for i in ids
                ],
            }
        )
        for i in ids:
            out.append(
                {"role": "tool", "tool_call_id": i, "content": "r" * draw(st.integers(0, 3000))}
            )
    if not last or draw(st.booleans()):
        out.append({"role": "assistant", "content": "a" * draw(st.integers(1, 1200))})
    return out


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    older = draw(st.lists(exchanges(), min_size=0, max_size=12))
    newest = draw(exchanges(last=True))
    start: list[Message] = []
    if draw(st.booleans()):
        # A client's own system message leads some conversations.
        start.append({"role": "system", "content": "be brief " + "b" * draw(st.integers(0, 300))})
    if draw(st.booleans()):
        start = [summary_message("an earlier summary " + "s" * draw(st.integers(0, 500)))]
    return start + [m for e in older for m in e] + newest


def valid_for_chat_completions(messages: Sequence[Message]) -> None:
    """Each tool result right after the call that asked for it, each call
    answered, no conversation starting with a tool result or an answer
    to calls it no longer holds."""
    pending: list[str] = []
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            assert pending, f"message {i}: a tool result with no call before it"
            assert m["tool_call_id"] == pending.pop(0), f"message {i}: not the next call's result"
            continue
        assert not pending, f"message {i}: calls {pending} were not answered"
        if m["role"] == "assistant":
            pending = [c["id"] for c in m.get("tool_calls") or []]
    assert not pending, f"calls {pending} were not answered"


def newest_exchange(messages: Sequence[Message]) -> list[Message]:
    return list(messages[max(exchange_starts(messages), default=0) :])


# -- the cut --------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(conversations(), st.integers(50, 6000), st.integers(1, 4000))
def test_a_cut_keeps_a_valid_conversation_the_newest_exchange_and_the_room(
    messages: list[Message], room: int, keep: int
) -> None:
    sizes = [message_tokens(m) for m in messages]
    cut = choose_cut(messages, sizes, room=room, keep_recent=keep)
    newest = newest_exchange(messages)
    newest_size = sum(message_tokens(m) for m in newest)
    if cut is None:
        # Nothing before the newest step, or not even that step fits: the
        # caller says so.
        last = max(exchange_starts(messages), default=0)
        starts = [c for c in unit_starts(messages) if c > 0 and c >= last]
        assert all(sum(sizes[c:]) > room for c in starts)
        return
    compacted = [summary_message("notes"), *messages[cut:]]
    valid_for_chat_completions(compacted)
    assert 0 < cut and sum(sizes[cut:]) <= room
    if newest_size <= room and exchange_starts(messages[1:]):
        # The newest exchange goes whole, and the cut is at an exchange.
        assert compacted[-len(newest) :] == newest
        assert messages[cut]["role"] == "user"
    # At least keep_recent tokens stay whenever an exchange boundary allows it.
    target = min(keep, room)
    if any(target <= sum(sizes[c:]) <= room for c in exchange_starts(messages) if c > 0):
        assert sum(sizes[cut:]) >= target


@settings(max_examples=300, deadline=None)
@given(conversations(), st.integers(50, 6000))
def test_truncation_drops_whole_items_from_the_start(messages: list[Message], room: int) -> None:
    sizes = [message_tokens(m) for m in messages]
    drop = drop_oldest(messages, sizes, room=room)
    if drop is None:
        return
    kept = messages[drop:]
    valid_for_chat_completions(kept)
    assert sum(sizes[drop:]) <= room
    assert drop == 0 or kept[0]["role"] != "tool"


def test_a_summary_is_recognised_and_folded_into_the_next() -> None:
    first = summary_message("the user likes tea")
    assert is_summary(first) and first["content"].startswith(SUMMARY_MARK)
    assert not is_summary({"role": "user", "content": "the user likes tea"})
    asked = summary_request(
        [first, {"role": "user", "content": "and coffee"}], None, max_chars=10**6
    )
    text = str(asked[1]["content"])
    assert "Summary of what came before:\nthe user likes tea" in text
    assert "User: and coffee" in text and SUMMARY_MARK not in text


def test_a_long_transcript_keeps_its_newest_part() -> None:
    piece: list[Message] = [{"role": "user", "content": f"message {i}"} for i in range(100)]
    asked = summary_request(piece, None, max_chars=200)
    text = str(asked[1]["content"])
    assert "[…the start is cut]" in text and "message 99" in text and "message 0\n" not in text
    assert len(transcript(piece)) > 200


# -- reading refusals --------------------------------------------------------------


def test_refusals_of_each_kind_of_server_are_read() -> None:
    vllm = overflow_of(
        None,
        "This model's maximum context length is 4096 tokens. However, you requested "
        "5000 tokens (4000 in the messages, 1000 in the completion).",
        400,
    )
    assert vllm is not None and (vllm.window, vllm.requested) == (4096, 5000)
    openai = overflow_of(
        "context_length_exceeded",
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 130012 tokens.",
        400,
    )
    assert openai is not None and (openai.window, openai.requested) == (128000, 130012)
    llama = overflow_of(
        "exceed_context_size_error", "the request exceeds the available context size", 400
    )
    assert llama is not None and llama.window == 0
    assert overflow_of(None, "Invalid API key", 401) is None
    assert overflow_of(None, "context length exceeded", 500) is None
    assert overflow_of("model_error", "bad temperature", 400) is None


def test_the_calibration_learns_the_servers_count() -> None:
    calibration = Calibration()
    calibration.observe(1000, 1500)
    assert calibration.tokens(100) == 150
    calibration.observe(1000, 100_000)
    assert calibration.ratio == 4.0


# -- the keeper, over random conversations ----------------------------------------------


class _Notes(ModelClient):
    """A model client whose every answer is a short summary."""

    def __init__(self, config: Config) -> None:
        self.config = config.model

    async def complete(self, request: Any, **_: Any) -> ModelResponse:
        return ModelResponse(AssistantMessage("short notes", None, (), "stop"), None)


@settings(max_examples=150, deadline=None)
@given(conversations(), st.integers(2000, 20000), st.sampled_from(["compact", "truncate"]))
def test_every_compacted_conversation_is_valid_keeps_the_newest_exchange_and_fits(
    messages: list[Message], window: int, mode: str
) -> None:
    config = Config(
        model=ModelConfig(base_url="http://127.0.0.1:9/v1", context_window=window),
        compaction=CompactionConfig(summary_max_tokens=200),
    )
    keeper = ContextKeeper(_Notes(config), config)
    head: list[Message] = [{"role": "system", "content": "You are Hermes."}]
    newest = newest_exchange(messages)
    before = list(messages)
    policy = ContextPolicy(mode)  # type: ignore[arg-type]

    async def fit() -> None:
        try:
            event = await keeper.fit(messages, head=head, schemas=(), policy=policy)
        except ContextTooLarge:
            assert messages == before
            return
        limit = int(window * config.compaction.threshold)
        if event is None:
            assert keeper.estimate(head, messages, ()) <= limit
            return
        valid_for_chat_completions(messages)
        assert keeper.estimate(head, messages, ()) <= limit
        assert event.tokens_after == keeper.estimate(head, messages, ())
        lead = [m for m in before if m["role"] == "system"][:1]
        assert messages[: len(lead)] == lead
        if mode == "compact":
            assert is_summary(messages[len(lead)])
            assert sum(1 for m in messages if is_summary(m)) == 1
            newest_size = keeper.estimate([], newest, ())
            if newest_size <= limit - keeper.estimate(head, [], ()) - 216:
                assert messages[-len(newest) :] == newest

    trio.run(fit, clock=MockClock(autojump_threshold=0))
