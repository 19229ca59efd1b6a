"""The OpenAI Agents SDK (``openai-agents``) against hermes-trio: an Agent with
one client ``@function_tool``, over ``OpenAIResponsesModel`` or
``OpenAIChatCompletionsModel``, run with ``Runner.run`` or ``Runner.run_streamed``.

Cases: ``responses``, ``responses_streamed``, ``chat``, ``chat_streamed``.
"""

from __future__ import annotations

from typing import Any

from _common import emit, main
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

set_tracing_disabled(True)

CALLS: list[dict[str, Any]] = []


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up the status of an order by its id."""
    CALLS.append({"order_id": order_id})
    emit("client_tool_ran", order_id=order_id)
    return f"order {order_id}: shipped on Tuesday"


def agent_for(config: dict[str, Any], api: str) -> Agent:
    import agents

    emit("sdk", version=getattr(agents, "__version__", "?"))
    client = AsyncOpenAI(
        base_url=config["base_url"], api_key=config["api_key"], max_retries=0, timeout=15
    )
    if api == "responses":
        model: Any = OpenAIResponsesModel(model="hermes-agent", openai_client=client)
    else:
        model = OpenAIChatCompletionsModel(model="hermes-agent", openai_client=client)
    return Agent(
        name="checker",
        instructions="Answer questions about orders.",
        tools=[lookup_order],
        model=model,
        model_settings=ModelSettings(),
    )


async def run(config: dict[str, Any], api: str, streamed: bool) -> None:
    agent = agent_for(config, api)
    question = "Read notes.txt, then tell me where order A-17 is."
    if streamed:
        result = Runner.run_streamed(agent, question, max_turns=6)
        async for event in result.stream_events():
            if event.type == "run_item_stream_event":
                item = event.item
                raw = getattr(item, "raw_item", None)
                emit("item", kind=item.type, name=getattr(raw, "name", None))
        final = result.final_output
    else:
        result = await Runner.run(agent, question, max_turns=6)
        for item in result.new_items:
            raw = getattr(item, "raw_item", None)
            emit("item", kind=item.type, name=getattr(raw, "name", None))
        final = result.final_output
    emit("result", final=final, client_tool_calls=len(CALLS))


if __name__ == "__main__":
    main(
        {
            "responses": lambda c: run(c, "responses", False),
            "responses_streamed": lambda c: run(c, "responses", True),
            "chat": lambda c: run(c, "chat", False),
            "chat_streamed": lambda c: run(c, "chat", True),
        }
    )
