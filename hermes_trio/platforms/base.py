"""What the gateway and the message editor need from a chat platform.

An adapter receives messages from its platform and hands out one
``Messenger`` per chat; the editor only ever talks to a ``Messenger``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import trio

__all__ = [
    "Capabilities",
    "CredentialsRejected",
    "InboundMessage",
    "Messenger",
    "PlatformAdapter",
    "PlatformError",
    "RateLimited",
    "measure",
]

LengthUnit = Literal["utf16", "chars", "bytes"]


@dataclass(frozen=True, slots=True)
class Capabilities:
    can_edit: bool
    max_length: int
    length_unit: LengthUnit = "chars"
    can_delete: bool = True
    can_type: bool = True


def measure(text: str, unit: LengthUnit) -> int:
    """Length of ``text`` the way the platform counts it."""
    if unit == "utf16":
        return len(text.encode("utf-16-le")) // 2
    if unit == "bytes":
        return len(text.encode("utf-8"))
    return len(text)


class PlatformError(Exception):
    """The platform refused a call; ``str()`` says what and why."""


class CredentialsRejected(PlatformError):
    """The platform refused our credentials (token, key). Retrying cannot
    help; the configuration has to change."""


class RateLimited(PlatformError):
    """The platform asked us to wait ``retry_after`` seconds (e.g. HTTP 429)."""

    def __init__(self, retry_after: float, message: str = "rate limited") -> None:
        super().__init__(f"{message} (retry after {retry_after:g} s)")
        self.retry_after = retry_after


class Messenger(Protocol):
    """Sending to one chat. ``edit`` treats "not modified" as success."""

    @property
    def capabilities(self) -> Capabilities: ...

    async def send(self, text: str) -> str:
        """Send a new message; returns its id."""
        ...

    async def edit(self, message_id: str, text: str) -> None: ...

    async def delete(self, message_id: str) -> None: ...

    async def typing(self) -> None: ...


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
