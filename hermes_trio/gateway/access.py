"""Who the gateway answers: per-platform allow-lists, and refusals.

The allow-list is enforced in the gateway and only there (adapters are built
with ``filter_users=False``): only the gateway can answer a refused user. An
empty list refuses everyone — a bot token alone must not hand a
shell-capable agent to the whole platform — and the refusal tells the owner
which id to allow. A stranger who keeps writing is answered at most once per
``REFUSAL_INTERVAL``; every refused message is still logged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

import trio

from ..config import Config
from ..platforms.base import InboundMessage
from ..platforms.registry import find_platform

__all__ = ["REFUSAL_INTERVAL", "AllowList", "allow_hint", "configured_allow_list"]

# The gateway's modules share one logger, so operators tune it by one name.
log = logging.getLogger("hermes_trio.gateway")

REFUSAL_INTERVAL = 600.0
# Bounds both the refused-message record and the per-user refusal times, so
# a flood of strangers cannot grow memory.
_REFUSAL_MEMORY = 1024


def allow_hint(platform: str) -> str:
    """Where the owner allows users of ``platform``, for refusal and startup lines."""
    entry = find_platform(platform)
    return entry.allow_hint if entry is not None else f"the {platform} allow-list"


def configured_allow_list(config: Config, platform: str) -> list[int | str]:
    """The user ids ``config`` allows on ``platform`` (none for an adapter of
    one's own: pass its list to the gateway)."""
    entry = find_platform(platform)
    return entry.allowed_users(config) if entry is not None else []


class AllowList:
    """The user ids each platform answers, and a record of who was refused."""

    def __init__(self, allowed_users: Mapping[str, Iterable[str | int]], platforms: Iterable[str]):
        self._allowed = {
            name: frozenset(str(user) for user in allowed_users.get(name, ())) for name in platforms
        }
        self.refused: list[InboundMessage] = []
        """Refused messages, most recent last (bounded), for operators and tests."""
        self._refused_at: dict[tuple[str, str], float] = {}

    def is_allowed(self, platform: str, user_id: str) -> bool:
        return str(user_id) in self._allowed.get(platform, frozenset())

    def is_empty(self, platform: str) -> bool:
        """Nobody is allowed on ``platform``."""
        return not self._allowed.get(platform)

    def refuse(self, platform: str, message: InboundMessage) -> str | None:
        """Log and record a refused message; returns the refusal to send, or
        None when this user had one within ``REFUSAL_INTERVAL``."""
        who = f"{message.user_id} ({message.user_name})" if message.user_name else message.user_id
        log.warning(
            "%s: refused a message from user %s in chat %s: not in the allow-list",
            platform,
            who,
            message.chat_id,
        )
        self.refused.append(message)
        del self.refused[:-_REFUSAL_MEMORY]
        now = trio.current_time()
        key = (platform, str(message.user_id))
        last = self._refused_at.get(key)
        if last is not None and now - last < REFUSAL_INTERVAL:
            return None
        if len(self._refused_at) >= _REFUSAL_MEMORY:
            self._refused_at = {
                k: t for k, t in self._refused_at.items() if now - t < REFUSAL_INTERVAL
            }
        self._refused_at[key] = now
        return self._refusal(platform, message)

    def _refusal(self, platform: str, message: InboundMessage) -> str:
        if not self.is_empty(platform):
            return f"Sorry, I only answer allowed users (your user id is {message.user_id})."
        return (
            "Sorry, this bot doesn't answer anyone yet. If it's yours, add your user id "
            f"{message.user_id} to {allow_hint(platform)} and restart the gateway."
        )
