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
    from .agent import Agent, open_agent
    from .approvals import ApprovalChannel, answer_approval
    from .config import Config, ConfigError, load_config
    from .endings import CancelCause, ErrorCode, FinishReason
    from .events import (
        ApprovalRequested,
        ApprovalResolved,
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
        ToolProgress,
        TurnFinished,
        Usage,
    )
    from .llm import ModelError
    from .turn import (
        INTERNAL_ERROR,
        Turn,
        TurnEvents,
        TurnResult,
        open_turn,
        run_turn,
        start_turn,
    )

__version__ = "0.1.0"

__all__ = [
    "INTERNAL_ERROR",
    "Agent",
    "ApprovalChannel",
    "ApprovalRequested",
    "ApprovalResolved",
    "CancelCause",
    "Commentary",
    "Config",
    "ConfigError",
    "ErrorCode",
    "FinishReason",
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
    "ToolProgress",
    "Turn",
    "TurnEvents",
    "TurnFinished",
    "TurnResult",
    "Usage",
    "answer_approval",
    "load_config",
    "open_agent",
    "open_turn",
    "run_turn",
    "start_turn",
]

# Where each public name lives. Importing the package loads none of them, so
# ``import hermes_trio.wire`` stays free of trio and httpx; a name is imported
# the first time someone asks for it (like httpx's public surface, but lazy).
_HOMES = {
    "Agent": ".agent",
    "ApprovalChannel": ".approvals",
    "answer_approval": ".approvals",
    "ApprovalRequested": ".events",
    "ApprovalResolved": ".events",
    "TurnEvents": ".turn",
    "TurnResult": ".turn",
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
    "ToolProgress": ".events",
    "TurnFinished": ".events",
    "Usage": ".events",
    "ModelError": ".llm",
    "CancelCause": ".endings",
    "ErrorCode": ".endings",
    "FinishReason": ".endings",
    "INTERNAL_ERROR": ".turn",
    "Turn": ".turn",
    "open_turn": ".turn",
    "run_turn": ".turn",
    "start_turn": ".turn",
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
