"""Everything that outlives a process: stored responses and their events,
API sessions and chat conversations, and which process runs what.

:class:`Store` is the interface; :class:`SQLiteStore` (a file in
``store.data_dir``, the default) and :class:`PostgresStore`
(``store.url``) implement it with the same statements. Several processes
may share one store: ``serve --workers``, several ``serve`` instances, the
gateway. See :mod:`.runners` for how a process that died is noticed and
:mod:`.duties` for the signals by which processes ask each other to stop a
turn.

Stored responses. A row holds the response object, the conversation that a
later ``previous_response_id`` continues, the request's input items, the
owner (a hash of the API key that created it; reads and deletes of another
owner's row behave as if it did not exist) and, while it runs, its runner.
Stream events live in their own table, keyed by (response id, sequence
number), so a dropped client can resume after the last event it saw — from
any process; they are written only while their response's row exists. The
input and output items are indexed by (owner, item id).

Events reach clients before they are stored (they are written in batches),
so a running response also has a *reservation*: the highest sequence number
its clients may see before it is stored, written ahead of the stream every
:data:`RESERVE_AHEAD` events. After a crash, recovery rebuilds the response
from the events that were stored and numbers its ``response.incomplete``
above the reservation, so a client resuming from the last event it saw gets
that ending, never an empty stream or a number it already had.

Conversations. One row per API session (``api:<owner>:<session id>``) or
chat (``chat:<platform>:<chat>:<thread>``): the history up to the last
finished turn, and the turn holding it. A turn claims the conversation,
and its end writes the whole history back at once, so a process that dies
mid-turn leaves the history as it was before that turn.

A refused operation raises :class:`StoreError`, a 503 with a code saying
why; a store that cannot be opened raises :class:`StoreOpenError`, one line
naming ``store.data_dir`` or ``store.url``.
"""

from __future__ import annotations

from .base import (
    RESERVE_AHEAD,
    Claim,
    Signal,
    Store,
    StoredResponse,
    StoreError,
    StoreOpenError,
    owner_scope,
    wall_clock,
)
from .duties import SIGNAL_POLL, SignalHandlers, keep_store
from .opening import open_store, store_path
from .postgres import PostgresStore
from .private import install_secret
from .sqlite import DB_FILENAME, SQLiteStore, store_failure

__all__ = [
    "DB_FILENAME",
    "RESERVE_AHEAD",
    "SIGNAL_POLL",
    "Claim",
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
    "open_store",
    "owner_scope",
    "store_failure",
    "store_path",
    "wall_clock",
]
