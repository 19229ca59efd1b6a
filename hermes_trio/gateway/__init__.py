"""The gateway: chat platform adapters under supervision, one session per
chat, and the API server when it is enabled.

``runtime`` assembles and runs it, ``supervisor`` keeps each adapter
running, ``access`` decides who is answered, and ``sessions`` runs what
happens in a chat (turns, interrupts, ``/stop``, ``/new``). Which platforms
exist, and how each is configured and built, is
:mod:`hermes_trio.platforms.registry`; the ``hermes-trio gateway`` command
is :mod:`hermes_trio.cli.gateway`.
"""

from .runtime import Gateway, build_adapters, open_gateway, run_gateway_async, startup_problem
from .sessions import Session
from .supervisor import AdapterStatus

__all__ = [
    "AdapterStatus",
    "Gateway",
    "Session",
    "build_adapters",
    "open_gateway",
    "run_gateway_async",
    "startup_problem",
]
