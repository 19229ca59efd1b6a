"""What chat users chose or were told, kept across restarts: a chat's
``/verbose`` and the long-tool hint a user has seen.

With a store (``hermes-trio gateway``) each setting is a row of the store's
``chat_settings``; without one (an embedded gateway) it lives as long as the
process. Either way a key is read at most once per process and then
remembered. A store that fails keeps the chat going on what this process
knows: the worst case is a hint shown once more after a restart.
"""

from __future__ import annotations

import logging

import trio

from ..store import Store, StoreError
from .history import SAVE_GRACE, chat_key

__all__ = ["ChatSettings", "hint_key", "verbose_key"]

log = logging.getLogger("hermes_trio.gateway")


def verbose_key(platform: str, chat_id: str, thread_id: str | None) -> str:
    """Where a chat's (or thread's) ``/verbose`` choice is kept."""
    return f"verbose:{chat_key(platform, chat_id, thread_id)}"


def hint_key(platform: str, user_id: str) -> str:
    """Where "this user has seen the long-tool hint" is kept."""
    return f"hinted:{platform}:{user_id}"


class ChatSettings:
    """The gateway's small settings, over ``store`` when there is one."""

    def __init__(self, store: Store | None = None) -> None:
        self.store = store
        self._known: dict[str, str | None] = {}

    async def get(self, key: str) -> str | None:
        if key in self._known:
            return self._known[key]
        value: str | None = None
        if self.store is not None:
            try:
                value = await self.store.chat_setting(key)
            except StoreError as exc:
                log.warning("could not read the chat setting %s: %s", key, exc.message)
                return None  # not remembered: the next turn asks the store again
        return self._known.setdefault(key, value)

    async def put(self, key: str, value: str) -> None:
        """Set ``key``; this process knows it at once, the store within
        ``SAVE_GRACE`` (also while the gateway stops)."""
        self._known[key] = value
        if self.store is None:
            return
        with trio.move_on_after(SAVE_GRACE, shield=True):
            try:
                await self.store.put_chat_setting(key, value)
            except StoreError as exc:
                log.warning("could not keep the chat setting %s: %s", key, exc.message)
