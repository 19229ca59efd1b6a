"""What every endpoint of the server shares: :class:`ServerState`.

``open_api_server`` (:mod:`.run`) builds it once per server and hands it to
the app factory (:mod:`.app`), which hands it to each endpoint's routes
(:mod:`.chat`, :mod:`.responses`). The server's settings travel in it
explicitly (``settings``, the config's ``api_server`` section); the agent's
own config is the agent's business.

This module imports no endpoint and no app code, so every endpoint can
import it without a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from ..agent import Agent
from ..config import ApiServerConfig
from ..endings import CancelCause
from ..store import SignalHandlers, Store
from ..turn import Turn
from .admission.keys import KeyRing
from .admission.turn_slots import TurnSlots
from .approvals.route import RemoteApprovals
from .conversations.sessions import SessionStore

__all__ = ["ServerState"]


@dataclass(eq=False)
class ServerState:
    agent: Agent
    settings: ApiServerConfig
    """The server's settings (auth, limits, model name, keep-alive...)."""
    nursery: trio.Nursery
    """Where request turns run: it outlives each request (see :mod:`.turn_slots`)."""
    slots: TurnSlots
    sessions: SessionStore
    store: Store
    """The durable store, shared with other processes."""
    signals: SignalHandlers
    keys: KeyRing = field(default_factory=lambda: KeyRing([]))
    """The API keys requests may use, with their limits (reloaded on SIGHUP)."""
    """Who acts on what other processes sharing the store ask of this one."""
    created: int = 0
    """When the server started (Unix seconds), as ``/v1/models`` reports it."""
    turns: set[Turn] = field(default_factory=set)
    """Every running turn, chat and Responses."""
    approvals: RemoteApprovals | None = None
    """Answers to approvals held by other processes sharing the store."""

    def stop_turns(self, reason: str | CancelCause = CancelCause.SHUTDOWN) -> None:
        """Cancel every running turn (the process is stopping); its stream
        ends saying ``reason`` (a Responses stream with ``response.incomplete``)."""
        for turn in list(self.turns):
            turn.cancel(reason, CancelCause.SHUTDOWN)
