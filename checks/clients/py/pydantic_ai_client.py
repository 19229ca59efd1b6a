"""pydantic-ai against hermes-trio: an Agent with one tool, over
``OpenAIChatModel`` or ``OpenAIResponsesModel`` (an ``OpenAIProvider`` with
the server's base_url), with ``agent.run`` or ``agent.run_stream``.

Cases: ``chat``, ``chat_stream``, ``responses``, ``responses_stream``.
"""

from __future__ import annotations

from typing import Any

from _common import emit, main
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

RAN: list[str] = []


def make_agent(config: dict[str, Any], api: str) -> Agent:
    import pydantic_ai

    emit("sdk", version=getattr(pydantic_ai, "__version__", "?"))
    client = AsyncOpenAI(
        base_url=config["base_url"], api_key=config["api_key"], max_retries=0, timeout=15
    )
    provider = OpenAIProvider(openai_client=client)
    model: Any
    if api == "responses":
        model = OpenAIResponsesModel("hermes-agent", provider=provider)
    else:
        model = OpenAIChatModel("hermes-agent", provider=provider)
    agent = Agent(model, instructions="Answer questions about orders.", retries=1)

    @agent.tool_plain
    def lookup_order(order_id: str) -> str:
        """Look up the status of an order by its id."""
        RAN.append(order_id)
        emit("client_tool_ran", order_id=order_id)
        return f"order {order_id}: shipped on Tuesday"

    return agent


async def run(config: dict[str, Any], api: str, streamed: bool) -> None:
    agent = make_agent(config, api)
    prompt = "Where is order A-17?"
    if streamed:
        deltas = []
        async with agent.run_stream(prompt) as result:
            async for delta in result.stream_text(delta=True, debounce_by=None):
                deltas.append(delta)
            output = await result.get_output()
        emit("result", output=output, deltas=deltas, client_tool_calls=len(RAN))
    else:
        result = await agent.run(prompt)
        emit("result", output=result.output, client_tool_calls=len(RAN))


async def extra_fields(config: dict[str, Any], api: str) -> None:
    """``model_settings`` a pydantic-ai user sets for a local model: ``top_k``
    (through ``extra_body``) and OpenAI's ``openai_text_verbosity``."""

    agent = make_agent(config, api)
    trials: dict[str, dict[str, Any]] = {
        "extra_body top_k/min_p": {"extra_body": {"top_k": 40, "min_p": 0.05}},
        "openai_text_verbosity='low'": {"openai_text_verbosity": "low"},
    }
    for name, settings in trials.items():
        try:
            result = await agent.run("hi", model_settings=settings)
            emit("trial", name=name, ok=True, text=result.output)
        except Exception as exc:
            cause = exc.__cause__ or exc
            emit(
                "trial",
                name=name,
                ok=False,
                status=getattr(cause, "status_code", None),
                message=str(getattr(cause, "message", cause))[:500],
                type=type(exc).__name__,
            )


if __name__ == "__main__":
    main(
        {
            "chat": lambda c: run(c, "chat", False),
            "chat_stream": lambda c: run(c, "chat", True),
            "responses": lambda c: run(c, "responses", False),
            "responses_stream": lambda c: run(c, "responses", True),
            "chat_extra_fields": lambda c: extra_fields(c, "chat"),
            "responses_extra_fields": lambda c: extra_fields(c, "responses"),
        }
    )
