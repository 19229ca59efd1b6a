"""Server-side conversations for ``X-Session-ID`` (in memory, per API key)."""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import trio

from ..tools import ToolContext
from .errors import APIError
from .turns import RunningTurn

__all__ = ["Session", "SessionStore", "new_messages", "validate_session_id"]

_SESSION_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


def validate_session_id(value: str) -> str:
    if not _SESSION_ID.fullmatch(value):
        raise APIError(
            400,
            "X-Session-ID must be 1 to 128 characters of letters, digits, '.', '_', ':' or '-'",
            param="X-Session-ID",
            code="invalid_session_id",
        )
    return value


@dataclass(eq=False)
class Session:
    messages: list[dict[str, Any]]
    tool_context: ToolContext
    last_used: float
    running: RunningTurn | None = None
    lock: trio.Lock = field(default_factory=trio.Lock)


def new_messages(history: list[dict[str, Any]], sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The part of a request's messages the stored history does not have yet.

    Frontends resend the whole conversation; API users often send only the
    new message. Either way the new part is what follows the last assistant
    message the client sent.
    """
    if not history:
        return sent
    for position in range(len(sent) - 1, -1, -1):
        if sent[position].get("role") == "assistant":
            return sent[position + 1 :]
    return sent


class SessionStore:
    def __init__(self, *, ttl: float, max_sessions: int = 1000) -> None:
        self.ttl = ttl
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    @staticmethod
    def key(owner: str, session_id: str) -> str:
        # Scoped to the API key's owner hash, so one key cannot reach
        # another key's session.
        return f"{owner}:{session_id}"

    def get_or_create(self, key: str, make_context: Any) -> Session:
        now = trio.current_time()
        self._expire(now)
        session = self._sessions.get(key)
        if session is None:
            session = Session([], make_context(), now)
            self._sessions[key] = session
        self._sessions.move_to_end(key)
        session.last_used = now
        return session

    def _expire(self, now: float) -> None:
        while self._sessions:
            key, oldest = next(iter(self._sessions.items()))
            idle = now - oldest.last_used
            running = oldest.running is not None and not oldest.running.done.is_set()
            if running or (idle < self.ttl and len(self._sessions) < self.max_sessions):
                break
            del self._sessions[key]

    def __len__(self) -> int:
        return len(self._sessions)
