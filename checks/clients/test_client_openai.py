"""Scenario 1: the official ``openai`` Python SDK, new (3.x, env ``py``) and
old (1.40, env ``pyold``), against the real server.

openai 1.40 predates the Responses API (``client.responses`` arrived in
1.66), so the Responses checks run with the new SDK only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clientcheck import Verdict, hermes, run_python

from hermes_trio.testing import TextReply, ToolCallReply

SDKS = ["py", "pyold"]

# Multi-byte characters, a code block, blank lines and trailing whitespace:
# the client must get back exactly this.
STORY = (
    "Once upon a time, in a kernel far away, a scheduler — «trio» — woke up. 🌙\n\n"
    "```python\nasync def main():\n    await trio.sleep(1)\n```\n\nThe end.  \n"
)
WEATHER_ARGS = {"city": "Paris", "unit": "celsius", "note": "streamed in small fragments"}


@pytest.mark.parametrize("sdk", SDKS)
async def test_chat_stream(sdk: str, tmp_path: Path) -> None:
    script = [TextReply(STORY, delay=0.005)]
    async with hermes(script, tmp_path) as stack:
        run = await run_python(sdk, "openai_client.py", "chat_stream", stack.client)
    v = Verdict(run)
    result = run.last("result")
    v.expect(
        result.get("text") == STORY,
        f"streamed text is not reassembled exactly: {result.get('text')!r} != {STORY!r}",
    )
    v.expect(result.get("deltas", 0) > 5, f"only {result.get('deltas')} content deltas")
    v.expect(result.get("finish") == ["stop"], f"finish reasons {result.get('finish')}")
    v.expect(result.get("ids") == 1, "chunks carry different ids")
    v.expect(result.get("usage"), "no usage chunk despite stream_options.include_usage")
    v.finish()


@pytest.mark.parametrize("sdk", SDKS)
async def test_chat_create(sdk: str, tmp_path: Path) -> None:
    async with hermes([TextReply(STORY)], tmp_path) as stack:
        run = await run_python(sdk, "openai_client.py", "chat_create", stack.client)
        sent = stack.model_messages(1) if stack.model.model_requests else []
    v = Verdict(run)
    result = run.last("result")
    v.expect(result.get("finish") == "stop", f"finish_reason {result.get('finish')!r}")
    v.expect(result.get("model") == "hermes-agent", f"model {result.get('model')!r}")
    v.expect(
        sent and sent[0]["role"] == "system" and sent[0]["content"].endswith("Be brief."),
        "the client's system message did not reach the model",
    )
    v.expect(
        result.get("text") == STORY,
        f"non-streamed content differs from the model's answer (issue 10 item 17): "
        f"{result.get('text')!r} != {STORY!r}",
    )
    v.finish()


@pytest.mark.parametrize("sdk", SDKS)
async def test_chat_client_tool_streamed(sdk: str, tmp_path: Path) -> None:
    script = [
        ToolCallReply([("get_weather", WEATHER_ARGS)], fragment_size=4, delay=0.02),
        TextReply("It is 21 °C and clear in Paris."),
    ]
    async with hermes(script, tmp_path) as stack:
        run = await run_python(sdk, "openai_client.py", "chat_tool", stack.client)
        follow_up = stack.model_messages(2) if len(stack.model.model_requests) >= 2 else []
    v = Verdict(run)
    calls = run.last("tool_calls").get("calls", [])
    v.expect(len(calls) == 1 and calls[0]["name"] == "get_weather", f"tool calls {calls}")
    if calls:
        v.expect(calls[0]["id"], "the tool call has no id")
        v.expect(
            json.loads(calls[0]["arguments"] or "null") == WEATHER_ARGS,
            f"arguments {calls[0]['arguments']!r}",
        )
    v.expect(
        run.last("tool_calls").get("finish") == ["tool_calls"],
        f"finish reasons {run.last('tool_calls').get('finish')}",
    )
    v.expect(
        run.last("answer").get("text") == "It is 21 °C and clear in Paris.",
        f"answer after the tool message: {run.last('answer').get('text')!r}",
    )
    tool_messages = [m for m in follow_up if m.get("role") == "tool"]
    v.expect(
        tool_messages and calls and tool_messages[-1]["tool_call_id"] == calls[0]["id"],
        "the tool result did not reach the model with the call's id",
    )
    # Item 16: the README promises fragments "streamed as they arrive". The
    # model sends ~20 fragments 20 ms apart; the client must see them spread
    # out, not all at once when the call is complete.
    fragments = run.of("fragment")
    spread = fragments[-1]["at"] - fragments[0]["at"] if fragments else 0.0
    v.expect(
        len(fragments) >= 3 and spread >= 0.1,
        f"tool-call arguments are not streamed (issue 10 item 16): {len(fragments)} "
        f"fragment(s) within {spread:.3f} s (the model sent them over ~0.4 s)",
    )
    v.finish()


@pytest.mark.parametrize("sdk", SDKS)
async def test_chat_session_header(sdk: str, tmp_path: Path) -> None:
    script = [TextReply("Nice to meet you, Ada."), TextReply("Your name is Ada.")]
    async with hermes(script, tmp_path) as stack:
        run = await run_python(
            sdk, "openai_client.py", "session", {**stack.client, "session_id": "check-session.1"}
        )
        second = stack.model_messages(2) if len(stack.model.model_requests) >= 2 else []
    v = Verdict(run)
    v.expect(run.last("first").get("text") == "Nice to meet you, Ada.", "first answer")
    v.expect(run.last("second").get("text") == "Your name is Ada.", "second answer")
    contents = [(m.get("role"), m.get("content")) for m in second]
    v.expect(
        ("user", "My name is Ada.") in contents
        and ("assistant", "Nice to meet you, Ada.") in contents,
        f"the session's history did not reach the model: {contents}",
    )
    v.finish()


@pytest.mark.clients("py")
async def test_responses_chain(tmp_path: Path) -> None:
    script = [
        TextReply("Nice to meet you, Ada."),
        TextReply(STORY, delay=0.005),
        TextReply("Your name is Ada.\n"),
    ]
    async with hermes(script, tmp_path) as stack:
        run = await run_python("py", "openai_client.py", "responses", stack.client)
        third = stack.model_messages(3) if len(stack.model.model_requests) >= 3 else []
    v = Verdict(run)
    first, second, last = run.last("first"), run.last("second"), run.last("third")
    v.expect(
        first.get("text") == "Nice to meet you, Ada." and first.get("status") == "completed",
        f"first response {first}",
    )
    v.expect(second.get("deltas") == STORY, f"streamed deltas {second.get('deltas')!r}")
    v.expect(second.get("text") == STORY, f"streamed final output_text {second.get('text')!r}")
    v.expect(second.get("n_deltas", 0) > 5, f"{second.get('n_deltas')} deltas")
    v.expect(second.get("previous") == first.get("id"), "previous_response_id not echoed")
    v.expect(
        last.get("text") == "Your name is Ada.\n",
        f"non-streamed output_text differs from the model's answer: {last.get('text')!r}",
    )
    # (The agent keeps its own answers whitespace-stripped in the history it
    # sends back to the model; that is its business, so compare stripped.)
    contents = [(m.get("content") or "").strip() for m in third]
    v.expect(
        "My name is Ada." in contents and STORY.strip() in contents,
        f"previous_response_id did not carry the conversation: {contents}",
    )
    v.finish()


@pytest.mark.clients("py")
async def test_responses_client_tool_streamed(tmp_path: Path) -> None:
    script = [
        ToolCallReply([("get_weather", WEATHER_ARGS)], fragment_size=4, delay=0.02),
        TextReply("It is 21 °C and clear in Paris."),
    ]
    async with hermes(script, tmp_path) as stack:
        run = await run_python("py", "openai_client.py", "responses_tool", stack.client)
        follow_up = stack.model_messages(2) if len(stack.model.model_requests) >= 2 else []
    v = Verdict(run)
    calls = run.last("tool_calls").get("calls", [])
    v.expect(len(calls) == 1 and calls[0]["name"] == "get_weather", f"tool calls {calls}")
    if calls:
        v.expect(
            json.loads(calls[0]["arguments"] or "null") == WEATHER_ARGS,
            f"arguments {calls[0]['arguments']!r}",
        )
    v.expect(
        run.last("answer").get("text") == "It is 21 °C and clear in Paris.",
        f"answer after function_call_output: {run.last('answer')}",
    )
    v.expect(
        any(m.get("role") == "tool" for m in follow_up),
        "the function_call_output did not reach the model",
    )
    fragments = run.of("fragment")
    spread = fragments[-1]["at"] - fragments[0]["at"] if fragments else 0.0
    v.expect(
        len(fragments) >= 3 and spread >= 0.1,
        f"function_call_arguments.delta events are not streamed (issue 10 item 16): "
        f"{len(fragments)} delta(s) within {spread:.3f} s (the model sent them over ~0.4 s)",
    )
    v.finish()


@pytest.mark.parametrize("sdk", SDKS)
async def test_unused_fields_are_accepted(sdk: str, tmp_path: Path) -> None:
    """Item 15: fields the server does not use itself pass to the model."""
    script = [TextReply("ok")] * 4
    async with hermes(script, tmp_path) as stack:
        run = await run_python(sdk, "openai_client.py", "extra_fields", stack.client)
    v = Verdict(run)
    trials = run.of("trial")
    v.expect(len(trials) == (2 if sdk == "pyold" else 4), f"{len(trials)} trials ran")
    for trial in trials:
        item = (
            " (not named in issue 10: responses_request.py refuses any non-empty 'include'; "
            "llm, pydantic-ai, the AI SDK and Codex send it for reasoning models)"
            if "include" in trial["name"]
            else " (issue 10 item 15)"
        )
        v.expect(
            trial["ok"],
            f"{trial['name']}: refused with {trial.get('status')} {trial.get('message')!r}{item}",
        )
    v.finish()
