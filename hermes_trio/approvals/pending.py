"""The trio shell around :mod:`.book`: a turn asks, and waits for the answer.

A tool call that needs a person's approval calls :meth:`PendingApprovals.ask`
inside its turn. It opens the question, publishes ``ApprovalRequested`` into
the turn's event channel, and waits, inside the turn's cancel scope, until
an answer decides it or its deadline passes (``trio.move_on_at`` on a
deadline taken from ``trio.current_time()``, so ``MockClock`` drives it).
Whatever ends the wait, ``ApprovalResolved`` says how, and the question is
closed before ``ask`` returns or raises: nothing is pending after a turn.

Surfaces answer from their own tasks (a button's callback, an HTTP route)
with :func:`answer_approval`, which finds the question by id in this
process's registry, :data:`PENDING`. It is synchronous: it decides, wakes
the waiting turn and returns at once.

When the turn is cancelled while it waits (interrupted, Stop, its client
gone, shutdown), the question ends ``cancelled`` and ``ApprovalResolved``
is sent from a shielded cleanup with a short deadline, so a consumer that
drains its channel after a cancel (:func:`hermes_trio.channels.drain_after_cancel`)
can update the prompt it showed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any

import trio

from ..events import ApprovalResolved, StreamEvent
from .book import (
    ApprovalBook,
    ApprovalQuestion,
    Decision,
    Refused,
)

__all__ = [
    "CLEANUP_GRACE",
    "PENDING",
    "ApprovalHandle",
    "Listing",
    "PendingApprovals",
    "Publish",
    "answer_approval",
]

CLEANUP_GRACE = 1.0
"""Seconds a cancelled wait may take to tell the consumer it was cancelled."""

Publish = Callable[[StreamEvent], Awaitable[object]]
"""Sends an event into the turn's channel (the agent's ``send.send``)."""

Listing = Callable[[ApprovalQuestion, float], Awaitable[object]]
"""Told of each question (and its wait in seconds) as it is asked, before
anyone sees its id: where other processes look up which one holds it."""


class ApprovalHandle:
    """The asking turn's own way to decide its question, without the
    who-may-answer check: given to the ``answerer`` task of :meth:`ask`
    (an approval callback)."""

    __slots__ = ("_id", "_pending")

    def __init__(self, pending: PendingApprovals, approval_id: str) -> None:
        self._pending = pending
        self._id = approval_id

    @property
    def id(self) -> str:
        return self._id

    @property
    def question(self) -> ApprovalQuestion:
        question = self._pending.book.get(self._id)
        assert question is not None, "the handle outlived its question"
        return question

    def resolve(
        self, approve: bool, *, by: str, reason: str = "", always: bool = False
    ) -> Decision:
        decision = self._pending.book.resolve(
            self._id, Decision.answered(approve, by, reason, always)
        )
        self._pending._wake(self._id)
        return decision


Answerer = Callable[[ApprovalHandle], Awaitable[object]]


class PendingApprovals:
    """The live approvals of one process: the book, and a wake-up per question."""

    def __init__(self, book: ApprovalBook | None = None) -> None:
        self.book = book if book is not None else ApprovalBook()
        self._wakers: dict[str, trio.Event] = {}
        self._listings: list[Listing] = []

    @contextlib.contextmanager
    def listed_with(self, listing: Listing) -> Iterator[None]:
        """Tell ``listing`` of every question asked while the block runs."""
        self._listings.append(listing)
        try:
            yield
        finally:
            self._listings.remove(listing)

    def answer(
        self,
        approval_id: str,
        approve: bool,
        *,
        by: str,
        reason: str = "",
        always: bool = False,
    ) -> Decision | Refused:
        """Answer a pending approval as ``by``: the decision taken, or a
        :class:`~.book.Refused` naming why not (unknown id, already ended,
        not allowed). Call it from any task of the process's trio run."""
        result = self.book.answer(
            approval_id,
            approve,
            by=by,
            reason=reason,
            always=always,
            now=trio.current_time(),
        )
        if isinstance(result, Decision) or result.code == "ended":
            self._wake(approval_id)
        return result

    async def ask(
        self,
        *,
        tool_name: str,
        command: str,
        reason: str,
        seconds: float,
        arguments: Mapping[str, Any] | None = None,
        requester: str | None = None,
        approvers: Iterable[str] = (),
        publish: Publish | None = None,
        answerer: Answerer | None = None,
        index: int = -1,
        call_id: str = "",
    ) -> Decision:
        """Ask, and wait up to ``seconds`` for the answer.

        ``answerer`` (optional) runs beside the wait and may decide through
        its handle; it is cancelled once the question is decided otherwise.
        Cancellation propagates, after the question ended ``cancelled``.
        """
        question = self.book.open(
            tool_name=tool_name,
            command=command,
            reason=reason,
            deadline=trio.current_time() + seconds,
            arguments=arguments,
            requester=requester,
            approvers=approvers,
        )
        woken = self._wakers[question.id] = trio.Event()
        try:
            try:
                # Listed first: an answer to the id the event shows may
                # reach another process at once.
                for listing in list(self._listings):
                    await listing(question, seconds)
                if publish is not None:
                    await publish(question.requested(seconds, index, call_id))
                with trio.move_on_at(question.deadline):
                    async with trio.open_nursery() as nursery:
                        if answerer is not None:
                            nursery.start_soon(answerer, ApprovalHandle(self, question.id))
                        await woken.wait()
                        nursery.cancel_scope.cancel()
                # An answer that came at the deadline itself still counts.
                decision = self.book.decision(question.id) or self.book.expire(question.id)
            except BaseException:
                decision = self.book.cancel(question.id)
                if publish is not None:
                    await _publish_shielded(
                        publish, _resolved(question.id, decision, index, call_id)
                    )
                raise
            if publish is not None:
                await _announce(publish, _resolved(question.id, decision, index, call_id))
            return decision
        finally:
            self.book.close(question.id)
            del self._wakers[question.id]

    def _wake(self, approval_id: str) -> None:
        waker = self._wakers.get(approval_id)
        if waker is not None:
            waker.set()


PENDING = PendingApprovals()
"""This process's live approvals: turns ask here, surfaces answer here."""


def answer_approval(
    approval_id: str, approve: bool, *, by: str, reason: str = "", always: bool = False
) -> Decision | Refused:
    """Answer the pending approval ``approval_id`` of this process as ``by``
    (see :meth:`PendingApprovals.answer`): the hook surfaces call."""
    return PENDING.answer(approval_id, approve, by=by, reason=reason, always=always)


async def _announce(publish: Publish, event: StreamEvent) -> None:
    """Send how a question ended; cancelled while waiting to send it (a full
    channel), send it anyway from a shielded cleanup: every
    ``ApprovalRequested`` gets its ``ApprovalResolved``."""
    try:
        await publish(event)
    except trio.Cancelled:
        await _publish_shielded(publish, event)
        raise


async def _publish_shielded(publish: Publish, event: StreamEvent) -> None:
    # The consumer may be gone already; then nobody needs telling.
    with (
        trio.move_on_after(CLEANUP_GRACE, shield=True),
        contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError),
    ):
        await publish(event)


def _resolved(approval_id: str, decision: Decision, index: int, call_id: str) -> ApprovalResolved:
    return ApprovalResolved(
        id=approval_id,
        outcome=decision.outcome.value,
        by=decision.by,
        reason=decision.reason,
        always=decision.always,
        index=index,
        call_id=call_id,
    )
