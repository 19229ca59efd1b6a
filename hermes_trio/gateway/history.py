"""Where a chat's conversation is kept between turns.

:class:`MemoryHistory` keeps it in this process (an embedded gateway, the
tests); :class:`StoredHistory` keeps it in the shared store, so
``hermes-trio gateway`` continues every chat after a restart. Either way a
turn's messages are written back only when the turn ends: a process that
dies mid-turn leaves the history as it was before that turn. The store
gets only the messages a turn added to what it claimed, or, after a
compaction, the whole new history as the base the next turns add to.
"""

from __future__ import annotations

import logging
import secrets
from typing import Protocol

import trio

from ..store import Store, StoreError, kept_messages
from ..wire.messages import Message

__all__ = ["ChatHistory", "MemoryHistory", "StoredHistory", "chat_key"]

log = logging.getLogger("hermes_trio.gateway")

# How long the history a turn ended with may take to be stored (also when
# the gateway stops).
SAVE_GRACE = 5.0

Messages = list[Message]


def chat_key(platform: str, chat_id: str, thread_id: str | None) -> str:
    return f"chat:{platform}:{chat_id}:{thread_id or ''}"


class ChatHistory(Protocol):
    async def begin(self, key: str) -> tuple[str, Messages | None]:
        """Take the conversation for a turn: the turn's token, and the
        stored history (None: keep what this process has)."""

    async def end(self, key: str, token: str, messages: Messages, *, compacted: bool) -> None:
        """The turn ended with ``messages`` as the whole history;
        ``compacted``: it replaced the history's start (a new base)."""

    async def forget(self, key: str) -> None:
        """``/new``: the conversation is gone for good."""


class MemoryHistory:
    """Nothing outlives the process: the session's own list is the history."""

    async def begin(self, key: str) -> tuple[str, Messages | None]:
        return "", None

    async def end(self, key: str, token: str, messages: Messages, *, compacted: bool) -> None:
        pass

    async def forget(self, key: str) -> None:
        pass


class StoredHistory:
    """The conversations of the shared store (see the module doc). A store
    that fails keeps the chat going on what this process remembers."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # What each running turn claimed, by its token: a copy, as the
        # session extends (or a compaction replaces) the list it is given.
        self._claimed: dict[str, Messages] = {}

    async def begin(self, key: str) -> tuple[str, Messages | None]:
        token = secrets.token_hex(8)
        try:
            claim = await self.store.claim_conversation(key, token)
        except StoreError:
            return token, None
        if claim.messages is None:
            # One gateway per bot token: another live process holding the
            # chat is a second gateway on the same token.
            log.warning("chat %s is held by another process (%s)", key, claim.busy)
        else:
            self._claimed[token] = list(claim.messages)
        return token, claim.messages

    async def end(self, key: str, token: str, messages: Messages, *, compacted: bool) -> None:
        claimed = self._claimed.pop(token, None)
        # Nothing claimed (the store failed): what this process holds is
        # written whole, should the claim have gone through after all.
        kept = 0 if claimed is None else kept_messages(claimed, messages, compacted=compacted)
        with trio.move_on_after(SAVE_GRACE, shield=True):
            try:
                await self.store.release_conversation(key, token, messages, kept=kept)
            except StoreError:
                pass

    async def forget(self, key: str) -> None:
        try:
            await self.store.delete_conversation(key)
        except StoreError:
            pass
