"""The pending-approval book: pure decisions, checked case by case and as a
state machine driven by hypothesis."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from hermes_trio.approvals import (
    ApprovalBook,
    ApprovalChannel,
    Decision,
    Outcome,
    Refused,
    new_approval_id,
)


def book(memory: int = 8) -> ApprovalBook:
    counter = itertools.count()
    return ApprovalBook(memory=memory, new_id=lambda: f"mcpr_{next(counter)}")


def ask(b: ApprovalBook, **kw: object) -> str:
    fields: dict[str, object] = {
        "tool_name": "terminal",
        "command": "reboot",
        "reason": "rebooting",
        "deadline": 300.0,
    }
    fields.update(kw)
    return b.open(**fields).id  # type: ignore[arg-type]


def test_ids_are_unguessable_and_look_like_responses_ids() -> None:
    ids = {new_approval_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(i.startswith("mcpr_") and len(i) == 5 + 48 for i in ids)


def test_an_answer_decides_once() -> None:
    b = book()
    qid = ask(b)
    assert [q.id for q in b.pending()] == [qid]
    decided = b.answer(qid, True, by="alice", reason="fine", now=10.0)
    assert decided == Decision(Outcome.APPROVED, "alice", "fine")
    assert b.pending() == []
    again = b.answer(qid, False, by="alice", now=11.0)
    assert again == Refused("ended", "no longer pending: approved by alice", decided)
    assert b.decision(qid) == decided


def test_only_the_requester_or_an_approver_may_answer() -> None:
    b = book()
    qid = ask(b, requester="telegram:1", approvers=["telegram:9"])
    refused = b.answer(qid, True, by="telegram:2")
    assert isinstance(refused, Refused) and refused.code == "not_allowed"
    assert "telegram:2 may not answer" in refused.message
    assert b.decision(qid) is None  # still pending
    assert b.answer(qid, False, by="telegram:9") == Decision(Outcome.DENIED, "telegram:9")


def test_only_those_who_may_answer_hear_how_it_ended() -> None:
    b = book()
    for end in ("answer", "expire", "close"):
        qid = ask(b, requester="alice", approvers=["carol"])
        if end == "answer":
            assert isinstance(b.answer(qid, True, by="carol"), Decision)
        elif end == "expire":
            b.expire(qid)
        b.close(qid)  # "close": closed while pending, so cancelled
        refused = b.answer(qid, False, by="bob")
        assert isinstance(refused, Refused) and refused.code == "not_allowed"
        assert refused.decision is None
        assert "approved" not in refused.message and "carol" not in refused.message
        for allowed in ("alice", "carol"):
            ended = b.answer(qid, False, by=allowed)
            assert isinstance(ended, Refused) and ended.code == "ended"


def test_without_requester_or_approvers_anyone_may_answer() -> None:
    b = book()
    qid = ask(b)
    assert isinstance(b.answer(qid, True, by="whoever"), Decision)


def test_an_answer_at_the_deadline_finds_it_expired() -> None:
    b = book()
    qid = ask(b, deadline=300.0)
    assert isinstance(b.answer(qid, True, by="a", now=299.999), Decision)
    qid = ask(b, deadline=300.0)
    late = b.answer(qid, True, by="a", now=300.0)
    assert isinstance(late, Refused) and late.code == "ended"
    assert late.message == "no longer pending: expired (no answer in time)"
    assert b.decision(qid) == Decision(Outcome.EXPIRED, reason="no answer in time")


def test_always_only_goes_with_a_yes() -> None:
    b = book()
    assert b.answer(ask(b), False, by="a", always=True) == Decision(Outcome.DENIED, "a")
    assert b.answer(ask(b), True, by="a", always=True) == Decision(
        Outcome.APPROVED, "a", always=True
    )


def test_a_press_after_the_turn_ended_says_no_longer_pending() -> None:
    b = book()
    qid = ask(b)
    assert b.close(qid) == Decision(Outcome.CANCELLED, reason="the turn was interrupted")
    assert b.get(qid) is None and len(b) == 0
    late = b.answer(qid, True, by="a")
    assert isinstance(late, Refused) and late.code == "ended"
    assert late.message == "no longer pending: cancelled (the turn was interrupted)"
    unknown = b.answer("mcpr_nothing", True, by="a")
    assert isinstance(unknown, Refused) and unknown.code == "unknown"
    assert unknown.message.startswith("no longer pending")


def test_the_first_decision_stands() -> None:
    b = book()
    qid = ask(b)
    first = b.expire(qid)
    assert b.cancel(qid) == first
    assert b.resolve(qid, Decision(Outcome.APPROVED, "x")) == first
    assert b.close(qid) == first


def test_memory_of_ended_approvals_is_bounded() -> None:
    b = book(memory=2)
    ids = [ask(b) for _ in range(3)]
    for qid in ids:
        b.close(qid)
    assert b.decision(ids[0]) is None
    assert b.answer(ids[0], True, by="a") == Refused(
        "unknown", "no longer pending: no approval with this id is waiting"
    )
    assert all(b.decision(qid) is not None for qid in ids[1:])
    with pytest.raises(KeyError):
        b.close(ids[0])


def test_a_channel_checks_its_timeout() -> None:
    with pytest.raises(ValueError, match=r"ApprovalChannel\.timeout"):
        ApprovalChannel(timeout=0)
    assert ApprovalChannel(approvers=["a", "b"]).approvers == frozenset({"a", "b"})  # type: ignore[arg-type]


PEOPLE = ["alice", "bob", "carol"]


class BookMachine(RuleBasedStateMachine):
    """Any sequence of asks, answers, expiries, cancels and closes: a decision
    is final, only allowed people decide, a closed question is gone, and
    every refusal says why."""

    def __init__(self) -> None:
        super().__init__()
        self.book = book(memory=4)
        self.now = 0.0
        self.requester: dict[str, str | None] = {}
        self.final: dict[str, Decision] = {}
        self.closed: list[str] = []

    @rule(requester=st.sampled_from([None, *PEOPLE]), wait=st.floats(0.5, 100))
    def open(self, requester: str | None, wait: float) -> None:
        qid = ask(self.book, requester=requester, deadline=self.now + wait)
        self.requester[qid] = requester

    @rule(dt=st.floats(0, 50))
    def tick(self, dt: float) -> None:
        self.now += dt

    def _some(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from(sorted(self.requester)))

    @precondition(lambda self: self.requester)
    @rule(data=st.data(), by=st.sampled_from(PEOPLE), approve=st.booleans())
    def answer(self, data: st.DataObject, by: str, approve: bool) -> None:
        qid = self._some(data)
        result = self.book.answer(qid, approve, by=by, now=self.now)
        if isinstance(result, Decision):
            assert qid not in self.final
            assert self.requester[qid] in (None, by)
            assert result.outcome is (Outcome.APPROVED if approve else Outcome.DENIED)
            self.final[qid] = result
        elif result.code == "not_allowed":
            # Waiting or ended: someone who may not answer learns no more.
            assert self.requester[qid] not in (None, by)
            assert result.decision is None and result.message
        elif qid in self.final and result.code != "unknown":
            assert result.code == "ended" and result.decision == self.final[qid]
        elif result.code == "ended":
            # Answered at or after its deadline: it expired just now.
            assert result.decision is not None
            assert result.decision.outcome is Outcome.EXPIRED
            self.final[qid] = result.decision
        else:
            assert result.code == "unknown"
            assert result.message

    @precondition(lambda self: self.requester)
    @rule(data=st.data(), how=st.sampled_from(["expire", "cancel"]))
    def end(self, data: st.DataObject, how: str) -> None:
        qid = self._some(data)
        if qid in self.closed and self.book.decision(qid) is None:
            return  # forgotten: nothing to end
        decision = getattr(self.book, how)(qid)
        self.final.setdefault(qid, decision)
        assert decision == self.final[qid]

    @precondition(lambda self: self.requester)
    @rule(data=st.data())
    def close(self, data: st.DataObject) -> None:
        qid = self._some(data)
        if qid in self.closed:
            return
        decision = self.book.close(qid)
        self.final.setdefault(qid, decision)
        assert decision == self.final[qid]
        self.closed.append(qid)

    @invariant()
    def open_questions_are_the_unclosed_ones(self) -> None:
        assert len(self.book) == len(self.requester) - len(self.closed)
        pending = {q.id for q in self.book.pending()}
        assert pending == set(self.requester) - set(self.final) - set(self.closed)

    @invariant()
    def decisions_are_final(self) -> None:
        for qid, decision in self.final.items():
            known = self.book.decision(qid)
            assert known is None or known == decision
            if qid not in self.closed:
                assert known == decision


TestBookMachine = BookMachine.TestCase
