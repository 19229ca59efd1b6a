"""LangChain's ``ChatOpenAI`` against hermes-trio, over Chat Completions or
(``use_responses_api=True``) the Responses API.

Cases: ``stream``, ``invoke``, ``tools`` (``bind_tools`` with a client tool,
then the ``ToolMessage`` follow-up), each with a ``responses_`` prefix for the
Responses API.
"""

from __future__ import annotations

from typing import Any

from _common import emit, main
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    emit("client_tool_ran", city=city)
    return f"21 °C and clear in {city}"


def llm(config: dict[str, Any], responses: bool) -> ChatOpenAI:
    import langchain_openai

    emit("sdk", version=getattr(langchain_openai, "__version__", "?"))
    return ChatOpenAI(
        model="hermes-agent",
        base_url=config["base_url"],
        api_key=config["api_key"],
        max_retries=0,
        timeout=15,
        use_responses_api=responses,
    )


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(
        part.get("text", "") if isinstance(part, dict) else str(part) for part in content
    )


def stream(config: dict[str, Any], responses: bool) -> None:
    parts = []
    for chunk in llm(config, responses).stream(config.get("prompt", "Tell me a story.")):
        piece = text_of(chunk.content)
        if piece:
            parts.append(piece)
    emit("result", text="".join(parts), deltas=len(parts))


def invoke(config: dict[str, Any], responses: bool) -> None:
    message = llm(config, responses).invoke(config.get("prompt", "Tell me a story."))
    emit("result", text=text_of(message.content), tool_calls=message.tool_calls)


def tools(config: dict[str, Any], responses: bool) -> None:
    model = llm(config, responses).bind_tools([get_weather])
    messages: list[Any] = [HumanMessage("Read notes.txt, then tell me the weather in Paris.")]
    reply = model.invoke(messages)
    emit("tool_calls", names=[c["name"] for c in reply.tool_calls], calls=reply.tool_calls)
    messages.append(reply)
    known = {"get_weather": get_weather}
    for call in reply.tool_calls:
        if call["name"] in known:
            output = known[call["name"]].invoke(call["args"])
        else:  # what LangGraph's ToolNode answers for a tool it does not have
            output = f"Error: {call['name']} is not a valid tool, try one of [get_weather]."
        messages.append(ToolMessage(output, tool_call_id=call["id"]))
    answer = model.invoke(messages)
    emit("answer", text=text_of(answer.content), tool_calls=answer.tool_calls)


def extra_fields(config: dict[str, Any], responses: bool) -> None:
    """What LangChain users set for local models: ``extra_body`` sampler
    fields and OpenAI's own ``verbosity``; each reported, none raised."""
    import openai

    trials: dict[str, dict[str, Any]] = {
        "extra_body sampler fields (top_k, min_p, repetition_penalty)": {
            "extra_body": {"top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1}
        },
        "verbosity='low'": {"verbosity": "low"},
    }
    if responses:
        trials["truncation='auto'"] = {"truncation": "auto"}
    for name, kwargs in trials.items():
        model = ChatOpenAI(
            model="hermes-agent",
            base_url=config["base_url"],
            api_key=config["api_key"],
            max_retries=0,
            timeout=15,
            use_responses_api=responses,
            **kwargs,
        )
        try:
            reply = model.invoke("hi")
            emit("trial", name=name, ok=True, text=text_of(reply.content))
        except openai.APIStatusError as exc:
            emit("trial", name=name, ok=False, status=exc.status_code, message=exc.message)


CASES = {}
for name, fn in {
    "stream": stream,
    "invoke": invoke,
    "tools": tools,
    "extra_fields": extra_fields,
}.items():
    CASES[name] = lambda c, fn=fn: fn(c, False)
    CASES["responses_" + name] = lambda c, fn=fn: fn(c, True)

if __name__ == "__main__":
    main(CASES)
