"""Pending approvals as data: what was asked, who may answer, how it ended.

Sans-IO (no trio, no clock of its own: times are passed in), like the wire
layer; :mod:`hermes_trio.approvals.pending` is the trio shell around it.

An approval is *pending* from :meth:`ApprovalBook.open` until it is decided:
``approved`` or ``denied`` by an answer, ``expired`` at its deadline, or
``cancelled`` when the turn that asked stops waiting. A decision is final.
:meth:`ApprovalBook.close` forgets the question once the turn has moved on;
how it ended is remembered a while longer (``memory`` decisions), so a late
answer is told what happened instead of "unknown".

Every refused answer is a :class:`Refused` value with a ``code`` and a
``message`` that names why, never an exception: a surface shows it as it is
(a button pressed twice, after the turn ended, by someone else).
"""

from __future__ import annotations

import enum
import secrets
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from ..events import ApprovalRequested

__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT",
    "ApprovalBook",
    "ApprovalChannel",
    "ApprovalQuestion",
    "Decision",
    "Outcome",
    "Refused",
    "RefusedCode",
    "describe",
    "new_approval_id",
]

ID_PREFIX = "mcpr_"
"""Approval ids look like the Responses API's ``mcp_approval_request`` ids."""

DEFAULT_APPROVAL_TIMEOUT = 300.0
"""Seconds a tool call waits for an approval by default (``approvals.timeout``);
here, below both the config and the tools, so each reads the one value."""

DEFAULT_MEMORY = 1024
"""How many ended approvals a book remembers, for late answers."""


def new_approval_id() -> str:
    """A fresh, unguessable approval id (``mcpr_`` and 48 hex digits).

    Unguessable because the id is what a surface's answer names: a button's
    payload, a URL. Who may answer is checked as well.
    """
    return ID_PREFIX + secrets.token_hex(24)


class Outcome(enum.Enum):
    """How an approval ended."""

    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    """Nobody answered before the deadline: a denial."""
    CANCELLED = "cancelled"
    """The turn stopped waiting (interrupted, timed out, its client gone)."""

    @property
    def approved(self) -> bool:
        return self is Outcome.APPROVED


@dataclass(frozen=True, slots=True)
class ApprovalChannel:
    """A turn's way to ask a person: who may answer and how long it waits.

    A turn given one publishes ``ApprovalRequested`` into its event channel
    and waits for an answer through
    :func:`hermes_trio.approvals.answer_approval`. ``requester`` is whoever
    sent the request (a platform user id, an API key's name); he and the
    ``approvers`` may answer. With neither, anyone who knows the id may
    (the terminal, an embedding program). ``timeout`` None: the agent's
    configured timeout (``approvals.timeout``).
    """

    requester: str | None = None
    approvers: frozenset[str] = frozenset()
    timeout: float | None = None
    defer: bool = False
    """Ask without waiting: the question is published and the turn ends
    there, the call not run (``finish_reason "approval"``); the answer comes
    with a later request, which runs the call or tells the model it was
    refused (the Responses API's ``mcp_approval_request``)."""

    def __post_init__(self) -> None:
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError(
                f"ApprovalChannel.timeout: expected seconds above 0, got {self.timeout}"
            )
        # A list or a tuple of ids is fine too; keep one hashable shape.
        object.__setattr__(self, "approvers", frozenset(self.approvers))


@dataclass(frozen=True, slots=True)
class ApprovalQuestion:
    """One pending approval: what the tool wants to do, why that needs a
    person's yes, who may give it, and until when (on the caller's clock)."""

    id: str
    tool_name: str
    command: str
    reason: str
    deadline: float
    arguments: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    requester: str | None = None
    approvers: frozenset[str] = frozenset()

    def requested(self, timeout: float, index: int = -1, call_id: str = "") -> ApprovalRequested:
        """The event that publishes this question (``index``/``call_id``:
        those of the tool call that asks)."""
        return ApprovalRequested(
            id=self.id,
            tool_name=self.tool_name,
            arguments=dict(self.arguments),
            command=self.command,
            reason=self.reason,
            deadline=self.deadline,
            timeout=timeout,
            index=index,
            call_id=call_id,
        )

    def may_answer(self, by: str) -> bool:
        """Whether ``by`` may answer: the requester or an approver; anyone
        when the question names neither."""
        if self.requester is None and not self.approvers:
            return True
        return by == self.requester or by in self.approvers


@dataclass(frozen=True, slots=True)
class Decision:
    """How an approval ended. ``by`` is who answered (None when nobody
    did: expired, cancelled); ``reason`` their words, or why it ended;
    ``always``: approved for the rest of the session (the same rule)."""

    outcome: Outcome
    by: str | None = None
    reason: str = ""
    always: bool = False

    @property
    def approved(self) -> bool:
        return self.outcome.approved

    @classmethod
    def answered(cls, approve: bool, by: str, reason: str = "", always: bool = False) -> Decision:
        """A person's yes or no; ``always`` counts only with a yes."""
        return cls(Outcome.APPROVED if approve else Outcome.DENIED, by, reason, always and approve)


RefusedCode = Literal["unknown", "ended", "not_allowed"]


@dataclass(frozen=True, slots=True)
class Refused:
    """An answer that was not taken, and why.

    ``unknown``: no approval with that id is pending here (never was, or
    ended long ago); ``ended``: it was already decided (``decision`` says
    how); ``not_allowed``: the one answering may not answer this one.
    """

    code: RefusedCode
    message: str
    decision: Decision | None = None


def describe(decision: Decision) -> str:
    """``approved by alice``, ``expired``, ``cancelled (interrupted)``."""
    text = decision.outcome.value
    if decision.by:
        text += f" by {decision.by}"
    if decision.reason and decision.outcome in (Outcome.CANCELLED, Outcome.EXPIRED):
        text += f" ({decision.reason})"
    return text


class ApprovalBook:
    """The pending approvals of one process, and how recent ones ended."""

    def __init__(
        self, *, memory: int = DEFAULT_MEMORY, new_id: Callable[[], str] = new_approval_id
    ) -> None:
        if memory < 0:
            raise ValueError("memory: expected 0 or more")
        self._memory = memory
        self._new_id = new_id
        self._open: dict[str, ApprovalQuestion] = {}
        self._decided: dict[str, Decision] = {}
        # How each ended, with its question: who may learn that still counts.
        self._ended: OrderedDict[str, tuple[ApprovalQuestion, Decision]] = OrderedDict()

    # -- reading -----------------------------------------------------------

    def get(self, approval_id: str) -> ApprovalQuestion | None:
        """The open question with this id (pending or decided, not yet closed)."""
        return self._open.get(approval_id)

    def decision(self, approval_id: str) -> Decision | None:
        """How it ended, if it has (open or remembered); None while pending."""
        ended = self._ended.get(approval_id)
        return self._decided.get(approval_id) or (ended[1] if ended is not None else None)

    def pending(self) -> list[ApprovalQuestion]:
        """The questions still waiting for an answer, oldest first."""
        return [q for i, q in self._open.items() if i not in self._decided]

    def __len__(self) -> int:
        """How many questions are open (pending or decided, not closed)."""
        return len(self._open)

    # -- changing ----------------------------------------------------------

    def open(
        self,
        *,
        tool_name: str,
        command: str,
        reason: str,
        deadline: float,
        arguments: Mapping[str, Any] | None = None,
        requester: str | None = None,
        approvers: Iterable[str] = (),
    ) -> ApprovalQuestion:
        """Ask a new question; it is pending until decided."""
        approval_id = self._new_id()
        while approval_id in self._open or approval_id in self._ended:
            approval_id = self._new_id()
        question = ApprovalQuestion(
            approval_id,
            tool_name,
            command,
            reason,
            deadline,
            MappingProxyType(dict(arguments or {})),
            requester,
            frozenset(approvers),
        )
        self._open[approval_id] = question
        return question

    def answer(
        self,
        approval_id: str,
        approve: bool,
        *,
        by: str,
        reason: str = "",
        always: bool = False,
        now: float | None = None,
    ) -> Decision | Refused:
        """A person's answer, checked: the decision it made, or why it was
        not taken. An answer at or after the deadline (``now``) finds the
        question expired.

        Who may answer is checked first, whether the question waits or
        ended: only they learn how it ended (``not_allowed`` says nothing
        of that)."""
        question = self._open.get(approval_id)
        decided = self._decided.get(approval_id)
        if question is None:
            remembered = self._ended.get(approval_id)
            if remembered is None:
                return Refused("unknown", "no longer pending: no approval with this id is waiting")
            question, decided = remembered
        if not question.may_answer(by):
            return Refused(
                "not_allowed",
                f"{by} may not answer this approval: only the person who asked"
                + (" or an approver" if question.approvers else "")
                + " may",
            )
        if decided is not None:
            return _ended(decided)
        if now is not None and now >= question.deadline:
            return _ended(self.expire(approval_id))
        return self._decide(approval_id, Decision.answered(approve, by, reason, always))

    def resolve(self, approval_id: str, decision: Decision) -> Decision:
        """Decide without the checks (the turn's own answerer: a callback,
        the deadline, a cancel). An approval decided already keeps its first
        decision, which is returned."""
        if approval_id not in self._open:
            return self._remembered(approval_id)
        return self._decide(approval_id, decision)

    def expire(self, approval_id: str) -> Decision:
        return self.resolve(approval_id, Decision(Outcome.EXPIRED, reason="no answer in time"))

    def cancel(self, approval_id: str, why: str = "the turn was interrupted") -> Decision:
        return self.resolve(approval_id, Decision(Outcome.CANCELLED, reason=why))

    def close(self, approval_id: str) -> Decision:
        """Forget the question (the turn has moved on). Closing one that is
        still pending cancels it first; how it ended is remembered."""
        if approval_id not in self._open:
            return self._remembered(approval_id)
        decision = self._decided.get(approval_id) or self.cancel(approval_id)
        question = self._open.pop(approval_id)
        del self._decided[approval_id]
        if self._memory:
            self._ended[approval_id] = (question, decision)
            while len(self._ended) > self._memory:
                self._ended.popitem(last=False)
        return decision

    def _decide(self, approval_id: str, decision: Decision) -> Decision:
        return self._decided.setdefault(approval_id, decision)

    def _remembered(self, approval_id: str) -> Decision:
        """How a question no longer open ended; KeyError when never asked
        here (or forgotten)."""
        known = self._ended.get(approval_id)
        if known is None:
            raise KeyError(approval_id)
        return known[1]


def _ended(decision: Decision) -> Refused:
    return Refused("ended", f"no longer pending: {describe(decision)}", decision)
