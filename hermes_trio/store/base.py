"""What every store backend shares: the records, the errors, the interface.

:class:`Store` is what the server and the gateway use; :mod:`.sqlite` and
:mod:`.postgres` implement it over the same statements (:mod:`.statements`).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import orjson

from ..wire.messages import Message
from ..wire.responses_out import ResponseEvent
from ..wire.responses_types import InputItem, OutputItem, ResponseObject
from .runners import Runner

__all__ = [
    "Claim",
    "HeldApproval",
    "Signal",
    "Store",
    "StoreError",
    "StoreOpenError",
    "StoredItem",
    "StoredResponse",
    "dumps",
    "kept_messages",
    "owner_scope",
    "wall_clock",
]

# Every store module logs here: the name from before the store left the
# server, so existing log filters still match.
log = logging.getLogger("hermes_trio.server.store")

_std_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def dumps(value: Any) -> str:
    """``value`` as compact JSON text.

    orjson first: a JSON encoder holds the GIL, and with it the event loop,
    for the whole of one call, even in a worker thread, and orjson takes a
    tenth of the standard encoder's time. The standard encoder takes what
    orjson refuses (an integer beyond 64 bits)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return _std_dumps(value)


def wall_clock() -> float:
    # Stored timestamps are Unix seconds by contract (created_at, retention
    # across restarts); trio's clock is monotonic and has no epoch.
    return datetime.datetime.now(datetime.UTC).timestamp()


def owner_scope(api_key: str | None) -> str:
    """The owner recorded with a response: a hash, never the key itself."""
    return hashlib.sha256((api_key or "").encode()).hexdigest()[:32]


StoredItem = InputItem | OutputItem
"""An item of a stored response: one of its input items or of its output."""


class StoreError(Exception):
    """The store refused an operation, for a while: ``code`` says why
    (``store_full``, ``store_read_only``, ``store_busy``, ``store_corrupt``,
    ``store_io_error``, ``store_unreachable``, ``store_error``), ``message``
    says it to a person. The server answers it as a 503 in OpenAI's error
    JSON (``server.errors``); the gateway logs it and goes on."""

    status: ClassVar[int] = 503
    """Every refusal is temporary: the HTTP status that says so."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class StoreOpenError(Exception):
    """The store cannot be opened: the one line a user sees at startup,
    naming the setting (``store.data_dir`` or ``store.url``) and what is
    wrong."""


@dataclass
class StoredResponse:
    id: str
    owner: str
    status: str
    created_at: float
    response: ResponseObject
    messages: list[Message] = field(default_factory=list)
    """The whole conversation a later turn continues."""
    input_items: list[InputItem] = field(default_factory=list)
    background: bool = False
    runner: str | None = None
    """The process running it while it is ``in_progress``."""
    parent: str | None = None
    """The stored response whose conversation ``messages`` continues (its
    ``previous_response_id``, while that exists): the first ``inherited``
    messages are stored there, once, not again with this one."""
    inherited: int = 0


@dataclass(frozen=True)
class HeldApproval:
    """A tool call a response holds for a person's answer (its
    ``mcp_approval_request`` item): whose it is, which call of the stored
    conversation, why it needs approval, until when (Unix seconds) it may
    be answered, and the response that answered it (None while open)."""

    id: str
    owner: str
    response_id: str
    call_id: str
    reason: str
    expires_at: float
    answered_by: str | None = None


@dataclass(frozen=True)
class Claim:
    """The answer to :meth:`Store.claim_conversation`: the history to
    continue (when the conversation is ours now), or the process whose turn
    holds it."""

    messages: list[Message] | None
    busy: str | None = None

    @property
    def granted(self) -> bool:
        return self.busy is None


def kept_messages(
    claimed: Sequence[Message],
    messages: Sequence[Message],
    *,
    dropped: int = 0,
    compacted: bool = False,
) -> int:
    """The ``kept`` of :meth:`Store.release_conversation`: how many of
    ``messages`` are, at their start, the ``claimed`` history after its
    first ``dropped`` — or 0, writing ``messages`` whole, after a compaction
    (which may have changed the claimed messages in place) or when they no
    longer start so. ``claimed`` is the list the claim returned, or a copy
    of it taken before the turn: a compaction may replace a list's start."""
    if compacted:
        return 0
    kept = max(0, len(claimed) - dropped)
    # Mostly the same objects: compared by identity first, not by content.
    return kept if list(messages[:kept]) == list(claimed[dropped:]) else 0


@dataclass(frozen=True)
class Signal:
    """A request from another process to this one: ``stop`` the turn of a
    conversation, ``cancel`` a running response; ``approval`` (an answer to
    a pending approval, JSON) and its ``approval_reply`` (how it was taken,
    JSON) travel between workers (``hermes_trio.server.approvals.route``)."""

    kind: str
    target: str


@runtime_checkable
class Store(Protocol):
    """Everything that outlives a process. Every method is safe to call from
    any trio task; implementations never block the event loop."""

    runner: Runner
    """This process, as other processes sharing the store know it."""

    # -- responses --------------------------------------------------------

    async def create(self, record: StoredResponse, *, events: Sequence[ResponseEvent] = ()) -> None:
        """Record a new response (normally ``in_progress``, run by this
        process) with its first stream events. A ``record.parent`` that is
        gone (or another owner's) is not referenced: the whole conversation
        is stored with this response instead."""

    async def append_events(self, response_id: str, events: Sequence[ResponseEvent]) -> None:
        """Add stream events; an event already stored is left as it is.

        Returns once they are committed (only then may a client see them).
        Under load the events of all running responses are written
        together, one write per ``grouped.EVENT_WRITE_INTERVAL``."""

    async def finish(
        self,
        response_id: str,
        *,
        status: str,
        response: ResponseObject,
        messages: list[Message],
        events: Sequence[ResponseEvent] = (),
        rebase: bool = False,
    ) -> None:
        """Store the final state and the last events, all at once.
        ``messages`` is the whole conversation; what the parent holds is
        not stored again, unless ``rebase`` (a compaction replaced the
        start of the conversation): then all of it is this response's own,
        and it no longer continues the parent."""

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        """The stored response; one still running has the output its stored
        events built so far."""

    async def find_items(self, owner: str, item_ids: Sequence[str]) -> dict[str, StoredItem]:
        """The stored input and output items of ``owner``'s responses with
        these ids (the newest response's where several share an id)."""

    async def events_after(
        self, response_id: str, after: int, *, limit: int | None = None
    ) -> list[ResponseEvent]:
        """Stored events with a sequence number above ``after``, in order;
        the first ``limit`` of them when given (a page)."""

    async def delete(self, response_id: str, owner: str) -> bool: ...

    async def hold_approvals(self, held: Sequence[HeldApproval]) -> None:
        """Record the approvals a response holds (they go with it)."""

    async def held_approval(self, approval_id: str) -> HeldApproval | None:
        """The held approval ``approval_id``, answered or not, whoever's."""

    async def sealing_key(self) -> bytes:
        """The install's key for ``compaction`` items (AES-256), made on
        first use and kept in the store: the same for every process that
        shares it (workers, instances on one PostgreSQL database)."""

    async def take_approval(self, approval_id: str, answered_by: str) -> bool:
        """Mark it answered by response ``answered_by``; False when it was
        answered already (by this or any other process): one answer counts."""

    async def note_approval(self, approval_id: str, expires_at: float) -> None:
        """Record that a turn of this process waits on approval
        ``approval_id`` until ``expires_at`` (Unix seconds). Forgotten an
        hour after that, or when this process is gone."""

    async def approval_holder(self, approval_id: str) -> str | None:
        """The process that asked approval ``approval_id`` (a runner id),
        or None when no process sharing the store did (lately)."""

    async def recover_interrupted(self) -> int:
        """End the responses left ``in_progress`` by processes that are gone
        as ``incomplete``, with their events; returns how many."""

    async def prune(self) -> int:
        """Apply the retention limits; returns how many responses went."""

    # -- conversations (API sessions, chats) ------------------------------

    async def claim_conversation(self, key: str, turn: str) -> Claim:
        """Take the conversation ``key`` for a turn of this process, unless
        a live process's turn holds it; a new conversation starts empty."""

    async def release_conversation(
        self,
        key: str,
        turn: str,
        messages: list[Message] | None,
        *,
        kept: int = 0,
        dropped: int = 0,
    ) -> bool:
        """End the turn's hold, storing ``messages`` as the history (None
        keeps it); False when another turn took the conversation over.
        ``messages`` is the claimed history without its first ``dropped``
        (the oldest turns, gone), of which the first ``kept`` are unchanged,
        then the turn's own: only those are written and only the dropped
        deleted, so a turn costs what it added, not the history's length
        (:func:`kept_messages` finds ``kept``). ``kept=0`` (a compaction)
        replaces the whole history with ``messages``, a new base."""

    async def conversation(self, key: str) -> list[Message] | None:
        """The stored history of ``key``, or None."""

    async def delete_conversation(self, key: str) -> bool: ...

    async def prune_conversations(self, prefix: str, *, max_age: float, max_count: int) -> int:
        """Forget the conversations under ``prefix`` unused for ``max_age``
        seconds, and the oldest beyond ``max_count``; held ones stay."""

    # -- chat settings (the gateway) ----------------------------------------

    async def chat_setting(self, key: str) -> str | None:
        """A small gateway setting kept across restarts (a chat's
        ``/verbose``, a hint a user has seen), or None when never set."""

    async def put_chat_setting(self, key: str, value: str) -> None:
        """Set (or replace) the setting ``key``."""

    # -- processes --------------------------------------------------------

    async def send_signal(self, runner: str, signal: Signal) -> None:
        """Ask process ``runner`` to act (see :class:`Signal`)."""

    async def take_signals(self) -> list[Signal]:
        """The signals sent to this process since the last call."""

    async def live_runners(self) -> list[str]:
        """The ids of the other live processes sharing the store."""

    async def heartbeat(self) -> None:
        """Tell other processes this one is alive."""

    async def reap(self) -> int:
        """Recover what processes that died left running; returns how many
        responses it ended."""
