"""What the gateway needs from a chat platform.

An adapter receives messages from its platform and hands out one
``Messenger`` per chat. The messenger port (``Messenger``, ``Capabilities``,
``PlatformError``, ``RateLimited``) belongs to its consumer, the message
editor, in :mod:`hermes_trio.consumers.messenger`; adapters implement it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import trio

from ..consumers.messenger import Messenger, PlatformError

__all__ = [
    "Attachment",
    "ButtonPress",
    "CredentialsRejected",
    "InboundMessage",
    "PlatformAdapter",
]


class CredentialsRejected(PlatformError):
    """The platform refused our credentials (token, key). Retrying cannot
    help; the configuration has to change."""


async def _not_fetchable() -> bytes:
    # An empty image would reach the model as if it were one: say so instead.
    raise PlatformError("the platform gave no way to download this file")


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file sent with a message (a photo, a document). Its bytes stay on
    the platform until the gateway decides to use them: ``fetch()``
    downloads them (raising ``PlatformError``), so a file the agent cannot
    use costs no download."""

    mime_type: str | None
    """``image/jpeg`` and the like; None when the platform does not say."""
    name: str | None = None
    size: int | None = None
    """Bytes, when the platform says."""
    fetch: Callable[[], Awaitable[bytes]] = field(default=_not_fetchable, compare=False, repr=False)

    @property
    def is_image(self) -> bool:
        return (self.mime_type or "").lower().startswith("image/")


async def _nothing_to_acknowledge(notice: str | None) -> None:
    return None


@dataclass(frozen=True, slots=True)
class ButtonPress:
    """Someone pressed a button the bot sent (``Button.data`` comes back as
    ``data``), on the message ``message_id``.

    ``acknowledge`` must be awaited once, soon (Discord allows 3 seconds):
    ``None`` when the press was taken (the message itself will be updated),
    else a short notice shown to the presser alone where the platform can
    (Telegram's callback answer, Discord's ephemeral reply, Slack's
    ephemeral message)."""

    data: str
    message_id: str | None = None
    acknowledge: Callable[[str | None], Awaitable[None]] = field(
        default=_nothing_to_acknowledge, compare=False, repr=False
    )


@dataclass(frozen=True, slots=True)
class InboundMessage:
    platform: str
    chat_id: str
    user_id: str
    text: str
    message_id: str | None = None
    user_name: str | None = None
    raw: Mapping[str, object] = field(default_factory=dict, compare=False, repr=False)
    """The platform's own payload, as it came: passed on, never interpreted."""
    thread_id: str | None = None
    """The thread inside the chat the message belongs to (a Telegram forum
    topic, a Slack thread); the answer goes there, and each thread of a chat
    is its own conversation."""
    attachments: tuple[Attachment, ...] = ()
    sent_at: float | None = None
    """When the user sent it, in Unix seconds by the platform's clock."""
    press: ButtonPress | None = None
    """Set when this is a button press, not a message (``text`` is empty)."""


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

    def messenger(self, chat_id: str, thread_id: str | None = None) -> Messenger:
        """Sending to one chat, or to one thread of it."""
        ...

    async def whoami(self) -> str:
        """Check the credentials with the platform (one call, nothing sent
        to anyone): who the bot is there. Raises ``PlatformError``."""
        ...
