"""Slack: placeholder until the adapter lands (same commit series)."""

from __future__ import annotations

import httpx

from ..config import SlackConfig
from ..consumers.messenger import Messenger, PlatformError

__all__ = ["SlackAdapter"]


class SlackAdapter:
    name = "slack"

    def __init__(
        self, config: SlackConfig, client: httpx.AsyncClient, *, filter_users: bool = True
    ) -> None:
        self.config = config

    async def run(self, inbound: object, *, task_status: object = None) -> None:
        raise PlatformError("slack: not built yet")

    def messenger(self, chat_id: str, thread_id: str | None = None) -> Messenger:
        raise NotImplementedError
