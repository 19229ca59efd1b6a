"""A ``Messenger`` for platforms whose sent messages stay as they are.

WhatsApp and Home Assistant can send a message but not edit or delete it,
and show no typing indicator; their capabilities say so, so the editor
sends one complete message per answer and never calls the rest.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from ..consumers.messenger import Capabilities, PlatformError

__all__ = ["SEND_ONLY_CAPABILITIES", "SendOnlyMessenger"]

SEND_ONLY_CAPABILITIES = Capabilities(
    can_edit=False, max_length=4096, length_unit="chars", can_delete=False, can_type=False
)


class _TextSender(Protocol):
    async def send_text(self, chat_id: str, text: str, /) -> str: ...


class SendOnlyMessenger:
    """Sending to one chat through ``adapter.send_text``. Subclasses name
    their ``platform``, and ``capabilities`` when their limits differ."""

    platform: ClassVar[str]
    capabilities: ClassVar[Capabilities] = SEND_ONLY_CAPABILITIES

    def __init__(self, adapter: _TextSender, chat_id: str) -> None:
        self._adapter = adapter
        self.chat_id = chat_id

    async def send(self, text: str) -> str:
        return await self._adapter.send_text(self.chat_id, text)

    async def edit(self, message_id: str, text: str, *, final: bool = False) -> None:
        raise PlatformError(f"{self.platform}: cannot edit messages")

    async def delete(self, message_id: str) -> None:
        raise PlatformError(f"{self.platform}: cannot delete messages")

    async def typing(self) -> None:
        return None
