"""Agent turns against the scripted model server over real loopback sockets."""

from __future__ import annotations

import json
import socket

import trio
from support import make_config, run_turn

from hermes_trio.agent import open_agent
from hermes_trio.config import FallbackModel
from hermes_trio.events import (
    Commentary,
    MessageChunk,
    MessageStop,
    ReasoningChunk,
    ToolCallChunk,
    ToolCallFinished,
    TurnFinished,
)
from hermes_trio.testing import (
    Drop,
    ErrorFrame,
    ErrorReply,
    JSONInsteadOfStream,
    RawReply,
    RefuseStream,
    TextReply,
    ToolCallReply,
    open_scripted_server,
)


def texts(events: list) -> list[str]:
    return [e.text for e in events if isinstance(e, MessageChunk)]


async def test_streamed_text_arrives_as_events_in_order() -> None:
    tokens = ["Hello", ",", " world", "!", " How", " are", " you?"]
    async with open_scripted_server([TextReply(tokens=tokens)]) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            events, result = await run_turn(agent, "hi")
    assert texts(events) == tokens
    assert isinstance(events[-2], MessageStop) and events[-2].final
    assert isinstance(events[-1], TurnFinished)
    assert events[-1].text == "Hello, world! How are you?"
    assert events[-1].finish_reason == "stop"
    assert events[-1].usage.total_tokens > 0
    body = server.requests[0].json
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][-1] == {"role": "user", "content": "hi"}
    assert server.requests[0].headers["authorization"] == "Bearer test-key"


async def test_include_usage_can_be_turned_off() -> None:
    async with open_scripted_server([TextReply("ok")]) as server:
        config = make_config(server.base_url, model={"include_usage": False})
        async with open_agent(config) as agent:
            await run_turn(agent, "hi")
    assert "stream_options" not in server.requests[0].json


async def test_think_blocks_become_reasoning_never_text() -> None:
    tokens = ["<thi", "nk>secret ", "plan</th", "ink>", "The ", "answer"]
    async with open_scripted_server([TextReply(tokens=tokens, reasoning="native")]) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            events, result = await run_turn(agent, "q")
    shown = "".join(texts(events))
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningChunk))
    assert shown == "The answer"
    assert "secret plan" in reasoning and "native" in reasoning
    assert result.text == "The answer"


async def test_tool_call_fragments_become_one_call_and_the_tool_runs() -> None:
    script = [
        ToolCallReply(
            calls=[("terminal", {"command": "echo hermes-$((6*7))"})],
            text="Let me check.",
            fragment_size=3,
        ),
        TextReply("It printed hermes-42."),
    ]
    async with open_scripted_server(script) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            messages = [{"role": "user", "content": "run it"}]
            events, result = await run_turn(agent, messages)
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("Commentary") < kinds.index("ToolCallChunk")
    commentary = next(e for e in events if isinstance(e, Commentary))
    assert commentary.text == "Let me check."
    stop = next(e for e in events if isinstance(e, MessageStop))
    assert stop.final is False
    started = next(e for e in events if isinstance(e, ToolCallChunk))
    assert started.tool_name == "terminal"
    assert started.args == {"command": "echo hermes-$((6*7))"}
    finished = next(e for e in events if isinstance(e, ToolCallFinished))
    assert finished.ok and "hermes-42" in finished.result
    assert result.text == "It printed hermes-42."
    # The second request carries the assistant call and the tool result.
    second = server.requests[1].json["messages"]
    call = second[-2]["tool_calls"][0]
    assert call["function"]["name"] == "terminal"
    assert json.loads(call["function"]["arguments"]) == {"command": "echo hermes-$((6*7))"}
    assert second[-1]["role"] == "tool" and "hermes-42" in second[-1]["content"]
    assert second[-1]["tool_call_id"] == call["id"]
    # The conversation list grew by the turn's messages, in order.
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]


async def test_parallel_tool_calls_keep_call_order() -> None:
    script = [
        ToolCallReply(
            calls=[
                ("terminal", {"command": "sleep 0.2; echo first"}),
                ("terminal", {"command": "echo second"}),
            ]
        ),
        TextReply("done"),
    ]
    async with open_scripted_server(script) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            events, _ = await run_turn(agent, "go")
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    # The short command finishes first, but results go back in call order.
    assert [e.index for e in finished] == [1, 0]
    tool_messages = [m for m in server.requests[1].json["messages"] if m["role"] == "tool"]
    assert "first" in tool_messages[0]["content"] and "second" in tool_messages[1]["content"]


async def test_invented_tool_and_bad_json_are_errors_for_the_model() -> None:
    script = [
        ToolCallReply(calls=[("no_such_tool", {}), ("terminal", "{not json")]),
        TextReply("sorry"),
    ]
    async with open_scripted_server(script) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            events, result = await run_turn(agent, "go")
    finished = sorted((e for e in events if isinstance(e, ToolCallFinished)), key=lambda e: e.index)
    assert [e.ok for e in finished] == [False, False]
    tool_messages = [m for m in server.requests[1].json["messages"] if m["role"] == "tool"]
    assert "unknown tool" in tool_messages[0]["content"]
    assert "not valid JSON" in tool_messages[1]["content"]
    assert result.finish_reason == "stop"


async def test_max_iterations_ends_with_length_and_a_note() -> None:
    script = [ToolCallReply(calls=[("terminal", {"command": "true"})])] * 2
    async with open_scripted_server(script) as server:
        config = make_config(server.base_url, agent={"max_iterations": 2})
        async with open_agent(config) as agent:
            events, result = await run_turn(agent, "loop")
    assert result.finish_reason == "length"
    assert "max_iterations" in result.text
    assert isinstance(events[-1], TurnFinished) and events[-1].finish_reason == "length"
    assert len(server.requests) == 2


async def test_streaming_off_sends_plain_requests() -> None:
    async with open_scripted_server([TextReply("whole answer")]) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            events, result = await run_turn(agent, "q", stream=False)
    assert "stream" not in server.requests[0].json
    assert texts(events) == ["whole answer"]
    assert result.text == "whole answer"


async def test_fallback_when_the_server_refuses_stream() -> None:
    script = [RefuseStream(reply=TextReply("plain reply")), TextReply("second")]
    async with open_scripted_server(script) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            events, result = await run_turn(agent, "q")
            assert texts(events) == ["plain reply"]
            assert result.finish_reason == "stop" and result.error is None
            # Remembered: the next turn goes straight to non-streaming.
            events, _ = await run_turn(agent, "again")
    assert [r.stream for r in server.requests] == [True, False, False]
    assert texts(events) == ["second"]


async def test_fallback_when_the_server_answers_json_to_a_stream_request() -> None:
    async with open_scripted_server([JSONInsteadOfStream(TextReply("json body"))]) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            events, result = await run_turn(agent, "q")
    assert texts(events) == ["json body"]
    assert result.error is None and len(server.requests) == 1


async def test_a_stream_dropped_before_its_first_byte_is_retried_as_a_stream() -> None:
    # A stale pooled connection, a restarting server: nothing says the
    # server cannot stream, so the retry streams too, and nothing is remembered.
    script = [Drop(text=""), TextReply("recovered"), TextReply("still streamed")]
    async with open_scripted_server(script) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            events, result = await run_turn(agent, "q")
            later, _ = await run_turn(agent, "again")
    assert texts(events) == ["recovered"]
    assert texts(later) == ["still", " streamed"]
    assert [r.stream for r in server.requests] == [True, True, True]


async def test_a_stream_that_ends_before_its_first_event_is_retried_as_a_stream() -> None:
    script = [RawReply(b""), TextReply("recovered")]
    async with open_scripted_server(script) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            events, result = await run_turn(agent, "q")
    assert texts(events) == ["recovered"]
    assert [r.stream for r in server.requests] == [True, True]


async def test_a_stream_dropped_before_its_first_byte_without_retries_is_an_error() -> None:
    async with open_scripted_server([Drop(text=""), TextReply("never")]) as server:
        config = make_config(server.base_url, model={"max_retries": 0})
        async with open_agent(config) as agent:
            events, result = await run_turn(agent, "q")
    assert result.finish_reason == "error"
    assert "broke before the answer started" in (result.error or "")
    assert [r.stream for r in server.requests] == [True]


async def test_client_errors_are_not_retried() -> None:
    async with open_scripted_server([ErrorReply(status=401, message="bad key")]) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            events, result = await run_turn(agent, "q")
    assert result.finish_reason == "error"
    assert "401" in (result.error or "") and "bad key" in (result.error or "")
    assert len(server.requests) == 1


async def test_no_retry_after_the_first_token() -> None:
    async with open_scripted_server([Drop(text="partial text here"), TextReply("x")]) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            events, result = await run_turn(agent, "q")
    assert "".join(texts(events)) == "partial text here"
    assert len(server.requests) == 1
    end = events[-1]
    assert isinstance(end, TurnFinished) and end.finish_reason == "error"
    assert end.text == "partial text here"
    assert "dropped" in (end.error or "")


async def test_error_frame_mid_stream_names_the_providers_message() -> None:
    script = [ErrorFrame(text="half an answer", message="upstream exploded")]
    async with open_scripted_server(script) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            events, result = await run_turn(agent, "q")
    assert "".join(texts(events)) == "half an answer"
    assert result.finish_reason == "error"
    assert "upstream exploded" in (result.error or "")
    assert len(server.requests) == 1


async def test_connect_timeout() -> None:
    # A listener whose accept queue is full: the kernel drops further SYNs,
    # so connecting hangs until the connect timeout fires.
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(3):
            sock = socket.socket()
            sock.setblocking(False)
            try:
                sock.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            fillers.append(sock)
        config = _timeouts(
            make_config(f"http://127.0.0.1:{port}/v1", model={"max_retries": 0}), connect=0.3
        )
        async with open_agent(config) as agent:
            events, result = await run_turn(agent, "q")
    finally:
        for sock in fillers:
            sock.close()
        listener.close()
    assert result.error_code == "model_unreachable"
    assert "cannot connect" in (result.error or "")


async def test_unreachable_server_is_a_clear_error() -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    async with open_agent(make_config(f"http://127.0.0.1:{port}/v1")) as agent:
        events, result = await run_turn(agent, "q")
    assert result.error_code == "model_unreachable"
    assert f"127.0.0.1:{port}" in (result.error or "")


async def test_fallback_model_chain() -> None:
    script = [ErrorReply(status=500, message="primary down"), TextReply("from backup")]
    async with open_scripted_server(script) as server:
        config = make_config(
            server.base_url,
            model={"max_retries": 0, "fallbacks": [FallbackModel(name="backup-model")]},
        )
        async with open_agent(config) as agent:
            events, result = await run_turn(agent, "q")
    assert "".join(texts(events)) == "from backup"
    assert [r.json["model"] for r in server.requests] == ["scripted-model", "backup-model"]


async def test_fallback_chain_reports_every_failure() -> None:
    script = [ErrorReply(status=500, message="one"), ErrorReply(status=500, message="two")]
    async with open_scripted_server(script) as server:
        config = make_config(
            server.base_url,
            model={"max_retries": 0, "fallbacks": [FallbackModel(name="backup-model")]},
        )
        async with open_agent(config) as agent:
            _, result = await run_turn(agent, "q")
    assert "one" in (result.error or "") and "two" in (result.error or "")


async def test_responses_api_upstream_mode() -> None:
    script = [
        ToolCallReply(calls=[("terminal", {"command": "echo via-responses"})]),
        TextReply(tokens=["Done", " via", " responses"]),
    ]
    async with open_scripted_server(script) as server:
        config = make_config(server.base_url, model={"api_mode": "responses"})
        async with open_agent(config) as agent:
            events, result = await run_turn(agent, "q")
    assert [r.path for r in server.requests] == ["/v1/responses", "/v1/responses"]
    assert texts(events) == ["Done", " via", " responses"]
    finished = next(e for e in events if isinstance(e, ToolCallFinished))
    assert "via-responses" in finished.result
    second_input = server.requests[1].json["input"]
    assert any(item.get("type") == "function_call_output" for item in second_input)
    assert result.usage.total_tokens > 0


def _timeouts(config, **changes):
    import dataclasses

    model = config.model
    return dataclasses.replace(
        config,
        model=dataclasses.replace(model, timeouts=dataclasses.replace(model.timeouts, **changes)),
    )


async def test_a_consumer_that_leaves_early_does_not_corrupt_the_history() -> None:
    async with open_scripted_server([TextReply(tokens=["a", "b", "c"])]) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            messages = [{"role": "user", "content": "q"}]
            send, receive = trio.open_memory_channel(0)
            async with trio.open_nursery() as nursery:
                results = []

                async def run() -> None:
                    results.append(await agent.run_turn(messages, send))

                nursery.start_soon(run)
                async with receive:
                    await receive.receive()  # take one event, then hang up
    assert results[0].finish_reason == "interrupted"
    roles = [m["role"] for m in messages]
    assert roles == ["user", "assistant"]
    # Whatever ending it recorded, there is exactly one assistant message.
    assert messages[-1]["content"].startswith("a")


async def test_without_a_model_name_the_first_listed_model_is_used() -> None:
    async with open_scripted_server([TextReply("a"), TextReply("b")], model="listed-one") as server:
        async with open_agent(make_config(server.base_url, model={"name": None})) as agent:
            await run_turn(agent, "q")
            await run_turn(agent, "q")
    assert [r.path for r in server.requests] == [
        "/v1/models", "/v1/chat/completions", "/v1/chat/completions"
    ]
    assert server.requests[1].json["model"] == "listed-one"


async def test_ask_returns_the_final_text_or_raises() -> None:
    from hermes_trio.llm import ModelError

    async with open_scripted_server([TextReply("forty-two"), ErrorReply(status=401)]) as server:
        async with open_agent(make_config(server.base_url)) as agent:
            assert await agent.ask("q") == "forty-two"
            try:
                await agent.ask("q")
            except ModelError as exc:
                assert "401" in exc.message
            else:  # pragma: no cover
                raise AssertionError("a model error must raise")
