"""When the model client gives up on a stream, and when it does not need
to wait any longer: on MockClock with the default timeouts (first token
120 s, silence 60 s), against an in-memory upstream."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing
from timed_upstream import Timed, TimedUpstream, chunk, sse

from hermes_trio.config import TimeoutsConfig
from hermes_trio.llm import ModelError, ModelRequest
from hermes_trio.wire.chat_chunks import ChunkDelta

REQUEST = ModelRequest([{"role": "user", "content": "hi"}])


async def _complete(upstream: TimedUpstream, **model: object) -> tuple[float, object]:
    """(seconds the request took, its ModelResponse or ModelError)."""
    client, http = upstream.client(**model)
    deltas: list[ChunkDelta] = []

    async def on_delta(delta: ChunkDelta) -> None:
        deltas.append(delta)

    start = trio.current_time()
    async with http:
        try:
            outcome: object = await client.complete(REQUEST, stream=True, on_delta=on_delta)
        except ModelError as exc:
            outcome = exc
    return trio.current_time() - start, outcome


@pytest.mark.parametrize("first_at", [0.0, 5.0])
async def test_silence_mid_answer_is_caught_after_the_idle_limit(
    autojump_clock: trio.testing.MockClock, first_at: float
) -> None:
    # The role chunk comes after the watchdog started (at 0.0 it could beat it).
    pieces = [(min(first_at, 1.0), chunk(role="assistant")), (first_at, chunk("Hello"))]
    upstream = TimedUpstream([Timed(pieces, hang=True)])
    took, outcome = await _complete(upstream)
    assert isinstance(outcome, ModelError)
    assert took == first_at + 60.0
    assert outcome.code == "model_timeout"
    assert "went silent for 60 s" in outcome.message


async def test_a_late_first_token_then_silence_is_caught_60_s_after_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    upstream = TimedUpstream([Timed([(100.0, chunk("Hello"))], hang=True)])
    took, outcome = await _complete(upstream)
    assert isinstance(outcome, ModelError)
    assert took == 160.0
    assert "went silent for 60 s" in outcome.message


async def test_no_first_token_is_caught_at_the_first_token_limit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Headers, the role chunk and empty chunks are not an answer.
    pieces = [(0.0, chunk(role="assistant"))]
    pieces += [(10.0 * n, sse({"choices": []})) for n in range(1, 30)]
    upstream = TimedUpstream([Timed(pieces, hang=True)])
    took, outcome = await _complete(upstream)
    assert isinstance(outcome, ModelError)
    assert took == 120.0
    assert outcome.code == "model_timeout"
    assert "within 120 s" in outcome.message


async def test_steady_tokens_are_never_cut_off(autojump_clock: trio.testing.MockClock) -> None:
    # 50 s between tokens for 10 minutes: always under the idle limit.
    pieces = [(50.0 * n, chunk(f"t{n} ")) for n in range(12)]
    pieces.append((50.0 * 12, chunk(finish="stop") + b"data: [DONE]\n\n"))
    took, outcome = await _complete(TimedUpstream([Timed(pieces)]))
    assert not isinstance(outcome, ModelError), outcome
    assert took == 600.0


# -- an answer that is complete before its stream ends ---------------------


async def test_finish_reason_without_done_is_a_complete_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    pieces = [
        (0.0, chunk("Hello", role="assistant")),
        (1.0, chunk(" there")),
        (2.0, chunk(finish="stop")),
        (2.0, sse(usage)),
    ]
    upstream = TimedUpstream([Timed(pieces, hang=True)])
    took, outcome = await _complete(upstream)
    assert not isinstance(outcome, ModelError), outcome
    assert outcome.message.content == "Hello there"  # type: ignore[attr-defined]
    assert outcome.message.finish_reason == "stop"  # type: ignore[attr-defined]
    assert outcome.usage.total_tokens == 5  # type: ignore[attr-defined]
    # Only the short drain after the usage chunk, and the body is closed.
    assert 2.0 < took <= 2.1
    assert upstream.closed


async def test_finish_reason_without_usage_waits_a_short_grace_for_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pieces = [(0.0, chunk("Hi", role="assistant")), (1.0, chunk(finish="stop"))]
    upstream = TimedUpstream([Timed(pieces, hang=True)])
    took, outcome = await _complete(upstream)
    assert not isinstance(outcome, ModelError), outcome
    assert outcome.message.content == "Hi"  # type: ignore[attr-defined]
    assert 1.0 < took <= 1.0 + 2.0


async def test_responses_completed_without_the_stream_ending_is_complete(
    autojump_clock: trio.testing.MockClock,
) -> None:
    response = {"id": "resp_1", "status": "completed", "output": [], "usage": None}
    whole = {
        **response,
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "adopted"}],
            }
        ],
    }
    pieces = [
        (0.0, b"event: response.created\n" + sse({"response": response})),
        # A server that streams no deltas: the answer comes whole at the end.
        (3.0, b"event: response.completed\n" + sse({"response": whole})),
    ]
    upstream = TimedUpstream([Timed(pieces, hang=True)])
    took, outcome = await _complete(upstream, api_mode="responses")
    assert not isinstance(outcome, ModelError), outcome
    assert outcome.message.content == "adopted"  # type: ignore[attr-defined]
    assert 3.0 < took <= 3.1


@pytest.mark.parametrize("api_mode", ["chat_completions", "responses"])
async def test_a_stream_that_ends_before_its_answer_is_an_error(
    autojump_clock: trio.testing.MockClock, api_mode: str
) -> None:
    if api_mode == "responses":
        delta = {"type": "response.output_text.delta", "delta": "half an"}
        pieces = [(0.0, sse({"type": "response.created", "response": {}})), (1.0, sse(delta))]
    else:
        pieces = [(0.0, chunk("half an", role="assistant"))]
    took, outcome = await _complete(TimedUpstream([Timed(pieces)]), api_mode=api_mode)
    assert isinstance(outcome, ModelError)
    assert "ended the stream before finishing" in outcome.message


async def test_named_events_and_comments_in_a_chat_stream_are_not_chunks(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pieces = [
        (0.0, b": keep-alive\n\n" + b"event: ping\ndata: ping\n\n"),
        (1.0, chunk("Hi", role="assistant")),
        (2.0, b"event: hermes.tool.started\ndata: {\"tool\": \"x\"}\n\n"),
        (3.0, chunk(finish="stop") + b"data: [DONE]\n\n"),
    ]
    took, outcome = await _complete(TimedUpstream([Timed(pieces)]))
    assert not isinstance(outcome, ModelError), outcome
    assert outcome.message.content == "Hi"  # type: ignore[attr-defined]


async def test_an_error_event_in_a_chat_stream_is_still_an_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pieces = [
        (0.0, chunk("Hi", role="assistant")),
        (1.0, b'event: error\ndata: {"error": {"message": "overloaded"}}\n\n'),
    ]
    took, outcome = await _complete(TimedUpstream([Timed(pieces)]))
    assert isinstance(outcome, ModelError) and "overloaded" in outcome.message


async def test_only_keep_alive_comments_are_no_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pieces = [(5.0 * n, b": keep-alive\n\n") for n in range(100)]
    took, outcome = await _complete(TimedUpstream([Timed(pieces, hang=True)]))
    assert isinstance(outcome, ModelError) and took == 120.0


async def test_done_ends_a_responses_stream_too(autojump_clock: trio.testing.MockClock) -> None:
    delta = {"type": "response.output_text.delta", "delta": "text"}
    completed = {"type": "response.completed", "response": {"status": "completed"}}
    pieces = [(0.0, sse(delta)), (1.0, sse(completed)), (1.0, b"data: [DONE]\n\n")]
    took, outcome = await _complete(TimedUpstream([Timed(pieces)]), api_mode="responses")
    assert not isinstance(outcome, ModelError), outcome
    # And [DONE] without response.completed is an early end, not garbage.
    pieces = [(0.0, sse(delta)), (1.0, b"data: [DONE]\n\n")]
    took, outcome = await _complete(TimedUpstream([Timed(pieces)]), api_mode="responses")
    assert isinstance(outcome, ModelError)
    assert "ended the stream before finishing" in outcome.message


# -- a finish_reason is "probably done", not the end --------------------------


async def test_finish_reason_on_every_chunk_does_not_cut_the_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Proxies that put finish_reason on every chunk (one-api before Gemini,
    # litellm, Open WebUI's Ollama proxy), tokens 2.5 s apart.
    pieces = [
        (0.0, chunk("Hello", "stop")),
        (2.5, chunk(" world", "stop")),
        (5.0, chunk(" again", "stop")),
        (7.5, b"data: [DONE]\n\n"),
    ]
    took, outcome = await _complete(TimedUpstream([Timed(pieces, hang=True)]))
    assert not isinstance(outcome, ModelError), outcome
    assert outcome.message.content == "Hello world again"  # type: ignore[attr-defined]
    assert 7.5 <= took <= 7.6  # [DONE], then a short wait for the body's end


async def test_a_reasoning_chunk_with_finish_reason_is_not_the_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pieces = [
        (0.0, chunk(reasoning_content="thinking...", finish="stop")),
        (2.5, chunk("The answer is 42")),
        (5.0, chunk(finish="stop")),
        (7.5, b"data: [DONE]\n\n"),
    ]
    took, outcome = await _complete(TimedUpstream([Timed(pieces, hang=True)]))
    assert not isinstance(outcome, ModelError), outcome
    assert outcome.message.content == "The answer is 42"  # type: ignore[attr-defined]
    assert outcome.message.reasoning == "thinking..."  # type: ignore[attr-defined]
    assert 7.5 <= took <= 7.6  # [DONE], then a short wait for the body's end


async def test_an_answer_after_an_empty_finish_chunk_is_read_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The finish chunk looked final, then more of the answer came within the
    # grace: from then on the stream is read as usual until it ends.
    pieces = [
        (0.0, chunk("Hello")),
        (1.0, chunk(finish="stop")),
        (2.0, chunk(" world")),
        (4.5, chunk(" again", "stop")),
        (7.0, b"data: [DONE]\n\n"),
    ]
    took, outcome = await _complete(TimedUpstream([Timed(pieces, hang=True)]))
    assert not isinstance(outcome, ModelError), outcome
    assert outcome.message.content == "Hello world again"  # type: ignore[attr-defined]
    assert 7.0 <= took <= 7.1


async def test_a_finish_reason_with_text_then_silence_is_a_complete_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Text and finish_reason in one chunk may be followed by more text, so
    # only the idle limit says it was the end; the answer is complete, not
    # an error.
    pieces = [(0.0, chunk("Hello", "stop"))]
    upstream = TimedUpstream([Timed(pieces, hang=True)])
    took, outcome = await _complete(upstream)
    assert not isinstance(outcome, ModelError), outcome
    assert outcome.message.content == "Hello"  # type: ignore[attr-defined]
    assert took == 60.0
    assert upstream.closed


async def test_a_usage_chunk_after_a_finish_with_text_ends_the_answer_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    pieces = [(0.0, chunk("Hello", "stop")), (1.0, sse(usage))]
    took, outcome = await _complete(TimedUpstream([Timed(pieces, hang=True)]))
    assert not isinstance(outcome, ModelError), outcome
    assert outcome.usage.total_tokens == 4  # type: ignore[attr-defined]
    assert 1.0 < took <= 1.1


async def test_usage_that_never_comes_is_logged_once(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hermes_trio.llm")
    pieces = [(0.0, chunk("Hi")), (1.0, chunk(finish="stop"))]
    upstream = TimedUpstream([Timed(pieces, hang=True), Timed(pieces, hang=True)])
    client, http = upstream.client()

    async def on_delta(delta: ChunkDelta) -> None:
        pass

    async with http:
        for _ in range(2):
            response = await client.complete(REQUEST, stream=True, on_delta=on_delta)
            assert response.message.content == "Hi" and response.usage is None
    said = [r.getMessage() for r in caplog.records if "usage" in r.getMessage()]
    assert len(said) == 1, said
    assert "2 s" in said[0] and "http://upstream.test/v1" in said[0]


# -- bounds on a whole streamed answer ------------------------------------------


async def test_an_endless_steady_stream_is_cut_off_at_the_total_limit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pieces = [(30.0 * n, chunk(f"t{n} ")) for n in range(200)]
    took, outcome = await _complete(TimedUpstream([Timed(pieces, hang=True)]))
    assert isinstance(outcome, ModelError)
    assert took == 1800.0
    assert outcome.code == "model_timeout"
    assert "model.timeouts.total" in outcome.message and "1800 s" in outcome.message


async def test_the_total_limit_is_configurable(autojump_clock: trio.testing.MockClock) -> None:
    pieces = [(1.0 * n, chunk(f"t{n} ")) for n in range(200)]
    upstream = TimedUpstream([Timed(pieces, hang=True)])
    took, outcome = await _complete(upstream, timeouts=TimeoutsConfig(total=30))
    assert isinstance(outcome, ModelError) and took == 30.0
    assert "model.timeouts.total" in outcome.message


async def test_a_streamed_answer_beyond_max_answer_bytes_is_cut_off(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pieces = [(0.01 * n, chunk("x" * 1000)) for n in range(100)]
    upstream = TimedUpstream([Timed(pieces, hang=True)])
    took, outcome = await _complete(upstream, max_answer_bytes=20_000)
    assert isinstance(outcome, ModelError)
    assert "model.max_answer_bytes" in outcome.message and "20000" in outcome.message
    assert took < 0.5
