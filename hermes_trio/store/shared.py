""":class:`SQLStore`: the :class:`~.base.Store` interface over
:mod:`.statements`, for any backend that can run a function in a
transaction (``_write``) or a read (``_read``) in a worker thread.

JSON is encoded and decoded inside those functions, in the worker thread:
a conversation can be large, and the event loop must not wait for it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from functools import partial
from typing import TypeVar

from ..wire.messages import Message
from ..wire.responses_out import ResponseEvent
from ..wire.responses_types import ResponseObject
from ..wire.sealed import KEY_BYTES
from . import statements as sql
from .base import Claim, HeldApproval, Signal, StoredItem, StoredResponse, log
from .grouped import GroupedWrites
from .runners import Runner

__all__ = ["PRUNE_EVERY", "SQLStore"]

T = TypeVar("T")

# Retention runs at open and then once per this many new responses: counting
# rows on every insert would cost more than the rows it saves.
PRUNE_EVERY = 64


class SQLStore:
    """The shared half of a backend; subclasses connect and run."""

    def __init__(
        self,
        *,
        runner: Runner,
        max_rows: int,
        max_age_days: float,
        clock: Callable[[], float],
    ) -> None:
        self.runner = runner
        self.max_rows = max_rows
        self.max_age_days = max_age_days
        self.clock = clock
        self._since_prune = 0
        self._events = GroupedWrites(self._write_events)

    async def _write(self, fn: Callable[[sql.Db], T]) -> T:
        """Run ``fn`` in one transaction, in a worker thread."""
        raise NotImplementedError

    async def _read(self, fn: Callable[[sql.Db], T]) -> T:
        """Run ``fn`` (which only reads) in a worker thread."""
        raise NotImplementedError

    # -- responses --------------------------------------------------------

    async def create(self, record: StoredResponse, *, events: Sequence[ResponseEvent] = ()) -> None:
        if record.runner is None and record.status == "in_progress":
            record.runner = self.runner.id
        rows = sql.event_rows(record.id, events)
        await self._write(partial(sql.create, record=record, now=self.clock(), rows=rows))
        self._since_prune += 1
        if self._since_prune >= PRUNE_EVERY:
            await self.prune()

    async def append_events(self, response_id: str, events: Sequence[ResponseEvent]) -> None:
        if events:
            await self._events.add(response_id, sql.event_rows(response_id, events))

    async def _write_events(self, rows: dict[str, sql.Rows]) -> None:
        await self._write(partial(sql.append_grouped_events, rows=rows))

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
        await self._write(
            partial(
                sql.finish,
                response_id=response_id,
                status=status,
                response=response,
                messages=messages,
                rows=sql.event_rows(response_id, events),
                now=self.clock(),
                rebase=rebase,
            )
        )

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        return await self._read(partial(sql.get, response_id=response_id, owner=owner))

    async def find_items(self, owner: str, item_ids: Sequence[str]) -> dict[str, StoredItem]:
        wanted = sorted(set(item_ids))
        if not wanted:
            return {}
        return await self._read(partial(sql.find_items, owner=owner, wanted=wanted))

    async def events_after(
        self, response_id: str, after: int, *, limit: int | None = None
    ) -> list[ResponseEvent]:
        rows = await self._read(
            partial(sql.events_after, response_id=response_id, after=after, limit=limit)
        )
        return [ResponseEvent.make(seq, type_, data) for seq, type_, data in rows]

    async def delete(self, response_id: str, owner: str) -> bool:
        return await self._write(partial(sql.delete, response_id=response_id, owner=owner))

    async def hold_approvals(self, held: Sequence[HeldApproval]) -> None:
        if held:
            await self._write(partial(sql.hold_approvals, held=held))

    async def held_approval(self, approval_id: str) -> HeldApproval | None:
        return await self._read(partial(sql.held_approval, approval_id=approval_id))

    async def sealing_key(self) -> bytes:
        return await self._write(partial(sql.sealing_key, fresh=secrets.token_bytes(KEY_BYTES)))

    async def take_approval(self, approval_id: str, answered_by: str) -> bool:
        return await self._write(
            partial(sql.take_approval, approval_id=approval_id, answered_by=answered_by)
        )

    async def note_approval(self, approval_id: str, expires_at: float) -> None:
        await self._write(
            partial(
                sql.note_approval,
                approval_id=approval_id,
                runner=self.runner.id,
                expires_at=expires_at,
            )
        )

    async def approval_holder(self, approval_id: str) -> str | None:
        return await self._read(partial(sql.approval_holder, approval_id=approval_id))

    async def recover_interrupted(self) -> int:
        count = await self._write(partial(sql.recover, me=self.runner, now=self.clock()))
        if count:
            log.warning(
                "%d response(s) were still in progress when their server process stopped; "
                "marked incomplete",
                count,
            )
        return count

    async def prune(self) -> int:
        self._since_prune = 0
        cutoff = self.clock() - self.max_age_days * 86400.0
        count = await self._write(partial(sql.prune, cutoff=cutoff, keep=self.max_rows))
        if count:
            log.info("response store: removed %d response(s) past retention", count)
        return count

    # -- conversations ----------------------------------------------------

    async def claim_conversation(self, key: str, turn: str) -> Claim:
        return await self._write(
            partial(sql.claim_conversation, key=key, me=self.runner, turn=turn, now=self.clock())
        )

    async def release_conversation(
        self,
        key: str,
        turn: str,
        messages: list[Message] | None,
        *,
        kept: int = 0,
        dropped: int = 0,
    ) -> bool:
        return await self._write(
            partial(
                sql.release_conversation,
                key=key,
                turn=turn,
                messages=messages,
                kept=kept,
                dropped=dropped,
                now=self.clock(),
            )
        )

    async def conversation(self, key: str) -> list[Message] | None:
        return await self._read(partial(sql.conversation, key=key))

    async def delete_conversation(self, key: str) -> bool:
        return await self._write(partial(sql.delete_conversation, key=key))

    async def prune_conversations(self, prefix: str, *, max_age: float, max_count: int) -> int:
        cutoff = self.clock() - max_age
        return await self._write(
            partial(sql.prune_conversations, prefix=prefix, cutoff=cutoff, keep=max_count)
        )

    # -- chat settings ----------------------------------------------------

    async def chat_setting(self, key: str) -> str | None:
        return await self._read(partial(sql.chat_setting, key=key))

    async def put_chat_setting(self, key: str, value: str) -> None:
        await self._write(partial(sql.put_chat_setting, key=key, value=value, now=self.clock()))

    # -- processes --------------------------------------------------------

    async def send_signal(self, runner: str, signal: Signal) -> None:
        await self._write(partial(sql.send_signal, runner=runner, signal=signal, now=self.clock()))

    async def take_signals(self) -> list[Signal]:
        # A read first: nearly every poll finds nothing, and a read takes no
        # write lock.
        rows = await self._read(partial(sql.pending_signals, me=self.runner))
        if not rows:
            return []
        await self._write(partial(sql.forget_signals, ids=[row[0] for row in rows]))
        return [Signal(kind, target) for _, kind, target in rows]

    async def live_runners(self) -> list[str]:
        return await self._read(partial(sql.live_runners, me=self.runner, now=self.clock()))

    async def heartbeat(self) -> None:
        await self._write(partial(sql.heartbeat, me=self.runner, now=self.clock()))

    async def reap(self) -> int:
        return await self.recover_interrupted()

    async def retire(self) -> None:
        """This process is leaving: others need not wait for its heartbeat."""
        await self._write(partial(sql.retire, me=self.runner))
