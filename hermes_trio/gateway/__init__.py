"""The gateway: chat platform adapters under supervision, one session per
chat, and the API server when it is enabled.

``runtime`` assembles and runs it, ``supervisor`` keeps each adapter
running, ``access`` decides who is answered, and ``sessions`` runs what
happens in a chat (turns, interrupts, ``/stop``, ``/new``).
"""

from .runtime import (
    Gateway,
    build_adapters,
    enabled_platforms,
    open_gateway,
    run_gateway,
    run_gateway_async,
    startup_problem,
)
from .sessions import Session
from .supervisor import AdapterStatus

__all__ = [
    "AdapterStatus",
    "Gateway",
    "Session",
    "build_adapters",
    "enabled_platforms",
    "open_gateway",
    "run_gateway",
    "run_gateway_async",
    "startup_problem",
]
