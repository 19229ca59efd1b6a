"""Discord: placeholder until the adapter lands (same commit series)."""

from __future__ import annotations

import httpx

from ..config import DiscordConfig
from ..consumers.messenger import Messenger, PlatformError

__all__ = ["DiscordAdapter"]


class DiscordAdapter:
    name = "discord"

    def __init__(
        self, config: DiscordConfig, client: httpx.AsyncClient, *, filter_users: bool = True
    ) -> None:
        self.config = config

    async def run(self, inbound: object, *, task_status: object = None) -> None:
        raise PlatformError("discord: not built yet")

    def messenger(self, chat_id: str, thread_id: str | None = None) -> Messenger:
        raise NotImplementedError
