"""What the gateway needs from a chat platform.

An adapter receives messages from its platform and hands out one
``Messenger`` per chat. The messenger port (``Messenger``, ``Capabilities``,
``PlatformError``, ``RateLimited``) belongs to its consumer, the message
editor, in :mod:`hermes_trio.consumers.messenger`; adapters implement it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from ..consumers.messenger import Messenger, PlatformError

__all__ = ["CredentialsRejected", "InboundMessage", "PlatformAdapter"]


class CredentialsRejected(PlatformError):
    """The platform refused our credentials (token, key). Retrying cannot
    help; the configuration has to change."""


@dataclass(frozen=True, slots=True)
class InboundMessage:
    platform: str
    chat_id: str
    user_id: str
    text: str
    message_id: str | None = None
    user_name: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


class PlatformAdapter(Protocol):
    name: str

    async def run(
        self,
        inbound: trio.MemorySendChannel[InboundMessage],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Receive messages until cancelled, sending each to ``inbound``."""
        ...

    def messenger(self, chat_id: str) -> Messenger: ...
