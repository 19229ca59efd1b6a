"""The official ``openai`` Python SDK against hermes-trio. Works with the 3.x
SDK (env ``py``) and the old 1.40 (env ``pyold``; it has no Responses API,
so only the ``chat_*``, ``session`` and ``extra_fields`` cases apply).

Every case prints JSON lines (see ``_common.emit``); the check asserts on them.
"""

from __future__ import annotations

from typing import Any

import openai
from _common import emit, main, now

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    },
}
WEATHER_RESULT = '{"temp_c": 21, "sky": "clear"}'
WEATHER_RESPONSES = {"type": "function", **WEATHER["function"]}


def client(config: dict[str, Any]) -> openai.OpenAI:
    emit("sdk", version=openai.__version__)
    return openai.OpenAI(
        base_url=config["base_url"], api_key=config["api_key"], max_retries=0, timeout=15
    )


def chat_stream(config: dict[str, Any]) -> None:
    c = client(config)
    stream = c.chat.completions.create(
        model="hermes-agent",
        messages=[{"role": "user", "content": config.get("prompt", "Say something.")}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, finish, ids, usage = [], [], set(), None
    for chunk in stream:
        ids.add(chunk.id)
        if chunk.usage is not None:
            usage = chunk.usage.total_tokens
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        if choice.delta.content:
            text.append(choice.delta.content)
            emit("delta", text=choice.delta.content)
        if choice.finish_reason:
            finish.append(choice.finish_reason)
    emit("result", text="".join(text), deltas=len(text), finish=finish, ids=len(ids), usage=usage)


def chat_create(config: dict[str, Any]) -> None:
    c = client(config)
    completion = c.chat.completions.create(
        model="hermes-agent",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": config.get("prompt", "Say something.")},
        ],
    )
    choice = completion.choices[0]
    emit(
        "result",
        text=choice.message.content,
        finish=choice.finish_reason,
        model=completion.model,
        usage=completion.usage.total_tokens if completion.usage else None,
    )


def chat_tool(config: dict[str, Any]) -> None:
    """A client function tool, streamed: count the argument fragments as they
    arrive, run the tool, send the ``tool`` message, stream the answer."""
    c = client(config)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is the weather in Paris?"}]
    stream = c.chat.completions.create(
        model="hermes-agent", messages=messages, tools=[WEATHER], stream=True
    )
    calls: dict[int, dict[str, Any]] = {}
    finish = []
    for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        for tc in choice.delta.tool_calls or []:
            call = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
            if tc.id:
                call["id"] = tc.id
            if tc.function and tc.function.name:
                call["name"] = tc.function.name
            if tc.function and tc.function.arguments:
                call["arguments"] += tc.function.arguments
                emit("fragment", index=tc.index, arguments=tc.function.arguments, at=now())
        if choice.finish_reason:
            finish.append(choice.finish_reason)
    emit("tool_calls", calls=[calls[i] for i in sorted(calls)], finish=finish)
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": call["arguments"]},
                }
                for call in calls.values()
            ],
        }
    )
    for call in calls.values():
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": WEATHER_RESULT})
    follow = c.chat.completions.create(
        model="hermes-agent", messages=messages, tools=[WEATHER], stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in follow if chunk.choices)
    emit("answer", text=text)


def session(config: dict[str, Any]) -> None:
    """Two turns on one ``X-Session-ID``: the second sends only the new message."""
    c = client(config)
    headers = {"X-Session-ID": config["session_id"]}
    first = c.chat.completions.create(
        model="hermes-agent",
        messages=[{"role": "user", "content": "My name is Ada."}],
        extra_headers=headers,
    )
    emit("first", text=first.choices[0].message.content)
    second = c.chat.completions.create(
        model="hermes-agent",
        messages=[{"role": "user", "content": "What is my name?"}],
        extra_headers=headers,
        stream=True,
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in second if chunk.choices)
    emit("second", text=text)


def responses(config: dict[str, Any]) -> None:
    """Responses: create (not streamed), then a streamed continuation with
    ``previous_response_id``, then a non-streamed continuation of that."""
    c = client(config)
    first = c.responses.create(model="hermes-agent", input="My name is Ada.")
    emit("first", id=first.id, text=first.output_text, status=first.status)
    deltas = []
    with c.responses.stream(
        model="hermes-agent", input="Tell me a short story.", previous_response_id=first.id
    ) as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        second = stream.get_final_response()
    emit(
        "second",
        id=second.id,
        text=second.output_text,
        deltas="".join(deltas),
        n_deltas=len(deltas),
        status=second.status,
        previous=second.previous_response_id,
    )
    third = c.responses.create(
        model="hermes-agent", input="What is my name?", previous_response_id=second.id
    )
    emit("third", id=third.id, text=third.output_text, status=third.status)


def responses_tool(config: dict[str, Any]) -> None:
    """A client function tool over Responses, streamed: count the argument
    deltas as they arrive, then continue with a ``function_call_output``."""
    c = client(config)
    stream = c.responses.create(
        model="hermes-agent", input="Weather in Paris?", tools=[WEATHER_RESPONSES], stream=True
    )
    calls = []
    final = None
    for event in stream:
        if event.type == "response.function_call_arguments.delta":
            emit("fragment", arguments=event.delta, at=now())
        elif event.type == "response.output_item.done" and event.item.type == "function_call":
            calls.append(
                {
                    "call_id": event.item.call_id,
                    "name": event.item.name,
                    "arguments": event.item.arguments,
                }
            )
        elif event.type == "response.completed":
            final = event.response
    emit("tool_calls", calls=calls, response_id=final.id if final else None)
    follow = c.responses.create(
        model="hermes-agent",
        previous_response_id=final.id,
        tools=[WEATHER_RESPONSES],
        input=[
            {"type": "function_call_output", "call_id": call["call_id"], "output": WEATHER_RESULT}
            for call in calls
        ],
    )
    emit("answer", text=follow.output_text, status=follow.status)


def extra_fields(config: dict[str, Any]) -> None:
    """Fields real users send that this server does not use itself: each is
    tried on its own and the outcome reported (no exception escapes)."""
    c = client(config)
    trials: dict[str, dict[str, Any]] = {
        "sampler extensions (min_p, top_k, repetition_penalty)": {
            "extra_body": {"min_p": 0.05, "top_k": 40, "repetition_penalty": 1.1}
        },
        "documented OpenAI fields (verbosity, prompt_cache_key, safety_identifier)": {
            "extra_body": {
                "verbosity": "low",
                "prompt_cache_key": "k1",
                "safety_identifier": "user-1",
            }
        },
    }
    for name, kwargs in trials.items():
        try:
            done = c.chat.completions.create(
                model="hermes-agent", messages=[{"role": "user", "content": "hi"}], **kwargs
            )
            emit("trial", name=name, ok=True, text=done.choices[0].message.content)
        except openai.APIStatusError as exc:
            emit("trial", name=name, ok=False, status=exc.status_code, message=exc.message)
    if not hasattr(c, "responses"):
        return
    responses_trials: dict[str, dict[str, Any]] = {
        "responses truncation=auto": {"truncation": "auto"},
        # What Codex, llm (reasoning models), pydantic-ai and the AI SDK send
        # for reasoning models with store=false.
        "responses include=['reasoning.encrypted_content'], store=false": {
            "include": ["reasoning.encrypted_content"],
            "store": False,
            "reasoning": {"effort": "low"},
        },
    }
    for name, kwargs in responses_trials.items():
        try:
            done = c.responses.create(model="hermes-agent", input="hi", **kwargs)
            emit("trial", name=name, ok=True, text=done.output_text)
        except openai.APIStatusError as exc:
            emit("trial", name=name, ok=False, status=exc.status_code, message=exc.message)


if __name__ == "__main__":
    main(
        {
            "chat_stream": chat_stream,
            "chat_create": chat_create,
            "chat_tool": chat_tool,
            "session": session,
            "responses": responses,
            "responses_tool": responses_tool,
            "extra_fields": extra_fields,
        }
    )
