"""hermes-trio: a streaming LLM agent runtime and gateway on trio.

The public API, re-exported from the modules that hold it::

    import trio, hermes_trio

    async def main():
        async with hermes_trio.open_agent() as agent:
            async with agent.turn("What is 2 + 2?") as events:
                async for event in events:
                    if isinstance(event, hermes_trio.MessageChunk):
                        print(event.text, end="", flush=True)

    trio.run(main)
"""

from .agent import Agent, TurnEvents, TurnResult, open_agent
from .config import Config, ConfigError, load_config
from .events import (
    Commentary,
    GatewayNotice,
    LongToolHint,
    MessageChunk,
    MessageStop,
    ReasoningChunk,
    StreamEvent,
    ToolCallChunk,
    ToolCallDelta,
    ToolCallFinished,
    TurnFinished,
    Usage,
)
from .llm import ModelError
from .turn import INTERNAL_ERROR, Turn, open_turn, run_turn, start_turn

__version__ = "0.1.0"

__all__ = [
    "INTERNAL_ERROR",
    "Agent",
    "Commentary",
    "Config",
    "ConfigError",
    "GatewayNotice",
    "LongToolHint",
    "MessageChunk",
    "MessageStop",
    "ModelError",
    "ReasoningChunk",
    "StreamEvent",
    "ToolCallChunk",
    "ToolCallDelta",
    "ToolCallFinished",
    "Turn",
    "TurnEvents",
    "TurnFinished",
    "TurnResult",
    "Usage",
    "load_config",
    "open_agent",
    "open_turn",
    "run_turn",
    "start_turn",
]
