"""Everything that outlives a process: stored responses and their events,
API sessions and chat conversations, and which process runs what.

:class:`Store` is the interface; :class:`SQLiteStore` (a file in
``store.data_dir``, the default) and :class:`PostgresStore`
(``store.url``) implement it with the same statements. Several processes
may share one store: ``serve --workers``, several ``serve`` instances, the
gateway. See :mod:`.runners` for how a process that died is noticed and
:mod:`.signals` for the signals by which processes ask each other to stop a
turn.

Stored responses. A row holds the response object, its own part of the
conversation that a later ``previous_response_id`` continues, the
request's input items, the owner (a hash of the API key that created it;
reads and deletes of another owner's row behave as if it did not exist)
and, while it runs, its runner. A response that continues another stores
only the messages its own turn added (its input and what the turn said)
with a reference to the previous one (``parent_id``, and ``inherited``: how
many messages come from there); the whole conversation is the chain read in
one query. Deleting a response that others continue moves its messages
into them first, so a chain never breaks. Stream events live in their own
table, keyed by (response id, sequence number), so a dropped client can
resume after the last event it saw — from any process, a page at a time;
they are written only while their response's row exists. The input and
output items are indexed by (owner, item id). The tool calls a response
holds for a person's answer (``mcp_approval_request`` items) are rows of
their own, keyed by approval id, so one answer counts whichever process
takes it; they go with their response.

Events reach clients only once they are stored (the server's event log
shows a batch after its transaction committed), so after a crash a
client's events are a prefix of the stored stream; recovery rebuilds the
response from the stored events and numbers its ``response.incomplete``
right after the last one, so a client resuming from the last event it saw
continues without a gap or a repeat. (Versions before schema 6 showed
events ahead of the store and wrote a *reservation* instead; recovery still
numbers above one such a process left.)

Conversations. One row per API session (``api:<owner>:<session id>``) or
chat (``chat:<platform>:<chat>:<thread>``) with the turn holding it, and
one row per message of its history up to the last finished turn. A turn
claims the conversation, and its end writes, in one transaction, the
messages it added (and deletes the oldest turns it dropped): a turn's cost
does not grow with the chat's length, and a process that dies mid-turn
leaves the history as it was before that turn. A compaction writes its
new, shorter history whole, the base later turns add to.

A refused operation raises :class:`StoreError`, with a code saying why
(the server answers it as a 503); a store that cannot be opened raises
:class:`StoreOpenError`, one line naming ``store.data_dir`` or
``store.url``.

The store's log lines keep the logger name ``hermes_trio.server.store``
from before the store left the server: existing log filters still match.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import (
    Claim,
    HeldApproval,
    Signal,
    Store,
    StoredResponse,
    StoreError,
    StoreOpenError,
    kept_messages,
    owner_scope,
    wall_clock,
)
from .opening import open_store, store_path
from .private import install_secret
from .signals import SIGNAL_POLL, SignalHandlers, keep_store
from .sqlite import DB_FILENAME, SQLiteStore, store_failure

if TYPE_CHECKING:
    from .postgres import PostgresStore

__all__ = [
    "DB_FILENAME",
    "SIGNAL_POLL",
    "Claim",
    "HeldApproval",
    "PostgresStore",
    "SQLiteStore",
    "Signal",
    "SignalHandlers",
    "Store",
    "StoreError",
    "StoreOpenError",
    "StoredResponse",
    "install_secret",
    "keep_store",
    "kept_messages",
    "open_store",
    "owner_scope",
    "store_failure",
    "store_path",
    "wall_clock",
]

if not TYPE_CHECKING:
    # Hidden from type checkers: they see the import above.
    def __getattr__(name: str) -> Any:
        if name != "PostgresStore":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        # Imported here: PostgreSQL's driver loads only where it is used
        # (a store.url), not for every SQLite store.
        from .postgres import PostgresStore

        return PostgresStore
