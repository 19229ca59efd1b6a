"""Server-side conversations for ``X-Session-ID`` (per API key), kept in
the store so they survive restarts and reach every server process.

Both the number of sessions and each one's history are bounded: beyond
``max_sessions`` the least recently used session goes, one unused for
``session_ttl`` goes, and a history longer than ``max_bytes`` loses its
oldest whole turns.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import trio

from ...store import Signal, Store, StoreError, kept_messages
from ...tools import ToolContext
from ...turn import Turn
from ...wire.messages import Message
from ..parsing.errors import APIError

__all__ = [
    "SESSION_INTERRUPTED",
    "Session",
    "SessionStore",
    "message_size",
    "new_messages",
    "new_turn_id",
    "turns_to_drop",
    "validate_session_id",
]

log = logging.getLogger("hermes_trio.server")

SESSION_PREFIX = "api:"
SESSION_INTERRUPTED = "interrupted by a newer request on this session"
# How long a request waits for another process's turn on its session to stop.
CLAIM_WAIT = 5.0
CLAIM_POLL = 0.01
# How long the history a turn ended with may take to be stored.
RELEASE_GRACE = 5.0

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
    messages: list[Message]
    tool_context: ToolContext
    last_used: float
    running: Turn | None = None
    lock: trio.Lock = field(default_factory=trio.Lock)


def new_turn_id() -> str:
    """Names one turn's hold on a conversation."""
    return secrets.token_hex(8)


def new_messages(history: list[Message], sent: list[Message]) -> list[Message]:
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


def message_size(message: Message) -> int:
    """A message's size as the JSON the model server receives."""
    try:
        return len(orjson.dumps(message))
    except (TypeError, orjson.JSONEncodeError):
        # Text from a model server may hold a lone surrogate, which orjson
        # refuses to encode; the standard library escapes it.
        return len(json.dumps(message))


def turns_to_drop(messages: Sequence[Message], max_bytes: int) -> int:
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
    """The sessions of this process (a lock, the running turn and the tool
    context of each), over the conversations of the shared store, where the
    history lives: any process sharing the store continues a session, and a
    restart loses nothing but what a running turn had not finished."""

    def __init__(
        self,
        store: Store,
        *,
        ttl: float,
        max_sessions: int = 1000,
        max_bytes: int = 1024 * 1024,
    ) -> None:
        self.store = store
        self.ttl = ttl
        self.max_sessions = max_sessions
        self.max_bytes = max_bytes
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    @staticmethod
    def key(owner: str, session_id: str) -> str:
        # Scoped to the API key's owner hash, so one key cannot reach
        # another key's session.
        return f"{SESSION_PREFIX}{owner}:{session_id}"

    async def get_or_create(self, key: str, make_context: Any) -> Session:
        now = trio.current_time()
        self._expire(now)
        session = self._sessions.get(key)
        if session is None:
            session = Session([], make_context(), now)
            self._sessions[key] = session
            # A session new to this process may be new to the store: the
            # limits apply there, where every process's sessions are.
            await self.store.prune_conversations(
                SESSION_PREFIX, max_age=self.ttl, max_count=self.max_sessions - 1
            )
        self._sessions.move_to_end(key)
        session.last_used = now
        self._evict(keep=key)
        return session

    async def claim(self, key: str, turn: str) -> list[Message]:
        """The session's stored history, now held by ``turn`` of this
        process. A turn of another process that holds it is asked to stop,
        and waited for up to :data:`CLAIM_WAIT` seconds."""
        deadline = trio.current_time() + CLAIM_WAIT
        asked: str | None = None
        while True:
            claim = await self.store.claim_conversation(key, turn)
            if claim.messages is not None:
                return claim.messages
            holder = claim.busy or ""
            if holder != asked:
                await self.store.send_signal(holder, Signal("stop", key))
                asked = holder
            if trio.current_time() >= deadline:
                raise APIError(
                    409,
                    "this session's turn in another server process did not stop in time; try again",
                    param="X-Session-ID",
                    code="session_busy",
                )
            await trio.sleep(CLAIM_POLL)

    def add(self, session: Session, history: list[Message], sent: list[Message]) -> int:
        """``session``'s history becomes the stored ``history`` and the new part
        of a request's messages, without its oldest turns beyond
        ``max_bytes``; returns how many messages of ``history`` went."""
        messages = history + new_messages(history, sent)
        drop = turns_to_drop(messages, self.max_bytes)
        session.messages = messages[drop:]
        return min(drop, len(history))

    async def release(
        self,
        key: str,
        turn: str,
        messages: list[Message],
        *,
        claimed: Sequence[Message] = (),
        dropped: int = 0,
        compacted: bool = False,
    ) -> None:
        """Store the history a turn ended with and let the session go: only
        what it added to the ``claimed`` history without its ``dropped``
        oldest messages (all of it after a compaction). Shielded and
        bounded: it runs as the turn ends, also on shutdown."""
        kept = kept_messages(claimed, messages, dropped=dropped, compacted=compacted)
        with trio.move_on_after(RELEASE_GRACE, shield=True):
            try:
                if not await self.store.release_conversation(
                    key, turn, messages, kept=kept, dropped=dropped
                ):
                    # Not the key: it holds the client's session id. The
                    # line's request id leads to the request's hashed one.
                    log.warning("a session was taken over; this turn's history is dropped")
            except StoreError:
                # Logged by the store; the history stays as before the turn.
                pass

    def stop(self, key: str, reason: str) -> None:
        """Cancel the session's running turn in this process, if any (asked
        by another process)."""
        session = self._sessions.get(key)
        if session is not None and session.running is not None:
            session.running.cancel(reason)

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
