"""Server-side conversations for ``X-Session-ID`` (in memory, per API key).

Both the number of sessions and each one's history are bounded: beyond
``max_sessions`` the least recently used session goes, and a history longer
than ``max_bytes`` loses its oldest whole turns.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import trio

from ..tools import ToolContext
from ..turn import Turn
from .errors import APIError

__all__ = [
    "Session",
    "SessionStore",
    "message_size",
    "new_messages",
    "turns_to_drop",
    "validate_session_id",
]

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
    running: Turn | None = None
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


def message_size(message: dict[str, Any]) -> int:
    """A message's size as the JSON the model server receives."""
    try:
        return len(orjson.dumps(message))
    except (TypeError, orjson.JSONEncodeError):
        # Text from a model server may hold a lone surrogate, which orjson
        # refuses to encode; the standard library escapes it.
        return len(json.dumps(message))


def turns_to_drop(messages: Sequence[dict[str, Any]], max_bytes: int) -> int:
    """How many leading messages to drop so the rest fits in ``max_bytes``.

    Only whole turns go: a turn starts at a user message, so an assistant
    message's tool calls and their results (which follow it before the next
    user message) always stay together. The newest turn is kept whatever
    its size.
    """
    sizes = [message_size(m) for m in messages]
    total = sum(sizes)
    if total <= max_bytes:
        return 0
    starts = [i for i, m in enumerate(messages) if m.get("role") == "user" and i > 0]
    dropped = 0
    for start in starts:
        total -= sum(sizes[dropped:start])
        dropped = start
        if total <= max_bytes:
            break
    return dropped


class SessionStore:
    def __init__(
        self, *, ttl: float, max_sessions: int = 1000, max_bytes: int = 1024 * 1024
    ) -> None:
        self.ttl = ttl
        self.max_sessions = max_sessions
        self.max_bytes = max_bytes
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
        self._evict(keep=key)
        return session

    def add(self, session: Session, messages: list[dict[str, Any]]) -> None:
        """Append a request's new messages to ``session``'s history, then drop
        its oldest turns beyond ``max_bytes``. Only while no turn of the
        session runs (the turn extends the same list)."""
        session.messages.extend(messages)
        drop = turns_to_drop(session.messages, self.max_bytes)
        if drop:
            del session.messages[:drop]

    def _expire(self, now: float) -> None:
        # Least recently used first, so the first one still fresh ends the scan.
        for key, session in list(self._sessions.items()):
            if now - session.last_used < self.ttl:
                break
            if not _running(session):
                del self._sessions[key]

    def _evict(self, *, keep: str) -> None:
        """Drop the least recently used sessions beyond ``max_sessions``; a
        session with a running turn stays until its turn ends."""
        excess = len(self._sessions) - self.max_sessions
        if excess <= 0:
            return
        for key, session in list(self._sessions.items()):
            if excess == 0:
                break
            if key != keep and not _running(session):
                del self._sessions[key]
                excess -= 1

    def __len__(self) -> int:
        return len(self._sessions)


def _running(session: Session) -> bool:
    return session.running is not None and not session.running.done.is_set()
