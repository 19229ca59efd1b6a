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

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

__version__ = "0.1.0"

__all__ = [
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
    "TurnEvents",
    "TurnFinished",
    "TurnResult",
    "Usage",
    "load_config",
    "open_agent",
]

# Where each public name lives. Importing the package loads none of them, so
# ``import hermes_trio.wire`` stays free of trio and httpx; a name is imported
# the first time someone asks for it (like httpx's public surface, but lazy).
_HOMES = {
    "Agent": ".agent",
    "TurnEvents": ".agent",
    "TurnResult": ".agent",
    "open_agent": ".agent",
    "Config": ".config",
    "ConfigError": ".config",
    "load_config": ".config",
    "Commentary": ".events",
    "GatewayNotice": ".events",
    "LongToolHint": ".events",
    "MessageChunk": ".events",
    "MessageStop": ".events",
    "ReasoningChunk": ".events",
    "StreamEvent": ".events",
    "ToolCallChunk": ".events",
    "ToolCallDelta": ".events",
    "ToolCallFinished": ".events",
    "TurnFinished": ".events",
    "Usage": ".events",
    "ModelError": ".llm",
}


if not TYPE_CHECKING:
    # Hidden from type checkers: they see the imports above, so a misspelt
    # name is an error for them rather than ``Any``.
    def __getattr__(name: str) -> Any:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(import_module(home, __name__), name)
        # Cache it, so the next lookup is a plain attribute read.
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
