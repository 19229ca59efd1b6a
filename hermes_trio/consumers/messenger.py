"""The port the message editor writes through: one chat's ``Messenger``.

It lives with its consumer, not with the chat platforms: the editor only
needs something that can send, edit, delete and show typing, and each
platform adapter implements this port (its ``messenger(chat_id)``). Tests
use ``hermes_trio.testing.FakeMessenger``.

A platform with native drafts (Telegram's ``sendMessageDraft``) says so in
its capabilities (``drafts``) and implements ``DraftMessenger``: the text
still growing goes into an ephemeral draft, and only final text is sent as
messages.

A messenger may also draw the side events of a turn its own way (tool
lines, notices): :mod:`hermes_trio.consumers.rendering`'s ``EventRenderer``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = [
    "Button",
    "ButtonMessenger",
    "ButtonsRefused",
    "Capabilities",
    "DraftMessenger",
    "DraftRefused",
    "LengthUnit",
    "Messenger",
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
    shows_cursor: bool = True
    """False: the platform draws its own "still writing" sign (a native
    stream), so the editor adds no cursor to text that is still growing."""
    drafts: bool = False
    """True: the messenger is a ``DraftMessenger``; text that is still
    growing is shown in a draft (ephemeral, no message id), final text is
    sent as messages, and nothing is edited."""
    buttons: bool = False
    """True: the messenger is a ``ButtonMessenger``."""


def measure(text: str, unit: LengthUnit) -> int:
    """Length of ``text`` the way the platform counts it."""
    if unit == "utf16":
        return len(text.encode("utf-16-le")) // 2
    if unit == "bytes":
        return len(text.encode("utf-8"))
    return len(text)


class PlatformError(Exception):
    """The platform refused a call; ``str()`` says what and why."""


class RateLimited(PlatformError):
    """The platform asked us to wait ``retry_after`` seconds (e.g. HTTP 429)."""

    def __init__(self, retry_after: float, message: str = "rate limited") -> None:
        super().__init__(f"{message} (retry after {retry_after:g} s)")
        self.retry_after = retry_after


class DraftRefused(PlatformError):
    """The platform will not show drafts in this chat (the method is
    unknown to it, or the chat cannot have them): edit messages instead."""


class Messenger(Protocol):
    """Sending to one chat. ``edit`` treats "not modified" as success."""

    @property
    def capabilities(self) -> Capabilities: ...

    async def send(self, text: str) -> str:
        """Send a new message; returns its id."""
        ...

    async def edit(self, message_id: str, text: str, *, final: bool = False) -> None:
        """Show ``text`` in the message; ``final``: it will not change again
        (a native stream ends here)."""
        ...

    async def delete(self, message_id: str) -> None: ...

    async def typing(self) -> None: ...


class DraftMessenger(Messenger, Protocol):
    """A messenger whose platform shows a draft: a preview of the message
    being written, replaced by each call and gone after a while unless
    refreshed (Telegram: about 30 s), never a message of its own."""

    async def draft(self, text: str) -> None:
        """Show ``text`` in this answer's draft. Raises ``DraftRefused``
        when the platform will not show drafts here."""
        ...


@dataclass(frozen=True, slots=True)
class Button:
    """A button under a message: ``label`` is shown, ``data`` comes back
    in the press (:class:`hermes_trio.platforms.base.ButtonPress`), kept
    within every platform's limit (Telegram's callback_data: 64 bytes)."""

    label: str
    data: str
    danger: bool = False
    """Drawn as a destructive choice where the platform can (red)."""


class ButtonsRefused(PlatformError):
    """These buttons, or this text with buttons, are beyond what the
    platform shows (WhatsApp: three buttons, 20-character titles, a
    1024-character text): send it without buttons instead."""


class ButtonMessenger(Messenger, Protocol):
    """A messenger whose platform shows buttons under a message and tells
    the bot who pressed one (Telegram inline keyboards, Discord components,
    Slack Block Kit, WhatsApp reply buttons)."""

    async def send_buttons(self, text: str, buttons: Sequence[Button]) -> str:
        """Send ``text`` with ``buttons`` under it; returns its id. Raises
        ``ButtonsRefused`` when the platform cannot show them."""
        ...

    async def close_buttons(self, message_id: str, text: str) -> None:
        """Show ``text`` in the message and take its buttons away (a
        platform whose messages cannot change sends ``text`` anew)."""
        ...
