"""``POST /v1/approvals/{id}``: a client's answer to a question a streamed
chat turn asked (``event: hermes.approval.request``, sent to requests that
opt in with ``X-Hermes-Stream-Extensions: approvals``).

An answer is taken by this process's registry
(:func:`hermes_trio.approvals.answer_approval`) when the question waits
here. Under ``serve --workers N`` (or several instances on one store) it
may wait in another process: every process sharing the store notes in it
which one asked each question (:meth:`RemoteApprovals.note`, before the
question's id is shown), so the answer goes as an ``approval`` signal to
that process alone, which takes it and sends back an ``approval_reply``
with how it went, and the POST answers with that. An id the store does not
know is a 404 at once, with no signal. Signals are polled every 20 ms while
a turn runs (the process holding a question runs one) or an answer waits
for its reply here.

A question belongs to the API key whose request asked it (its name; with
no key configured, every client is ``anonymous``); ``approvals.approvers``
(key names) may answer too. Any other key gets the 404 of an id never
issued, whether the question waits or ended: only those who may answer
learn how it ended.
"""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

import trio
from quart import Response
from quart_trio import QuartTrio

from ...approvals import (
    ApprovalQuestion,
    Decision,
    Outcome,
    Refused,
    RefusedCode,
    answer_approval,
)
from ...store import Signal, Store, StoreError, wall_clock
from ..admission.keys import current_key
from ..edge.bodies import json_response, read_json_body
from ..parsing.errors import APIError
from ..parsing.validation import bad, optional_str, request_object

__all__ = [
    "ANONYMOUS",
    "REPLY_WAIT",
    "Answer",
    "ApprovalAnswerBody",
    "RemoteApprovals",
    "answer_body",
    "answer_error",
    "approval_identity",
    "parse_answer",
    "register_approval_routes",
]

log = logging.getLogger("hermes_trio.server.approvals")

ANONYMOUS = "anonymous"
"""Who asks and answers on a server without API keys."""

REPLY_WAIT = 3.0
"""Seconds an answer waits for the other processes' replies. The one
holding the question replies within a poll (20 ms); an idle one within a
second; one that died without a word is not waited for longer than this."""


def approval_identity() -> str:
    """Who the current request is, for approvals: its API key's name."""
    given = current_key.get()
    return given[1].name if given is not None else ANONYMOUS


@dataclass(frozen=True)
class Answer:
    approve: bool
    reason: str = ""


def parse_answer(body: Any) -> Answer:
    """The body of ``POST /v1/approvals/{id}``: ``{"approve": bool,
    "reason"?: str}``; a 400 naming what is wrong."""
    body = request_object(body)
    unknown = sorted(set(body) - {"approve", "reason"})
    if unknown:
        raise bad(
            f"unknown field '{unknown[0]}' (an answer has 'approve' and 'reason')",
            unknown[0],
            "unknown_parameter",
        )
    approve = body.get("approve")
    if not isinstance(approve, bool):
        raise bad("'approve' is required and must be true or false", "approve")
    return Answer(approve, optional_str(body, "reason") or "")


class ApprovalAnswerBody(TypedDict):
    """What ``POST /v1/approvals/{id}`` answers when the answer was taken."""

    id: str
    object: Literal["hermes.approval"]
    outcome: str
    by: str | None
    reason: str


def answer_body(approval_id: str, decision: Decision) -> ApprovalAnswerBody:
    """What a taken answer returns."""
    return {
        "id": approval_id,
        "object": "hermes.approval",
        "outcome": decision.outcome.value,
        "by": decision.by,
        "reason": decision.reason,
    }


def answer_error(approval_id: str, refused: Refused) -> APIError:
    """The OpenAI error for an answer not taken: 400 for one already ended
    (answered, expired, cancelled), and for every other refusal the 404 an
    id never issued gets, word for word: a key that may not answer an
    approval learns neither that it exists nor how it ended (like another
    key's stored responses). The message names the id."""
    if refused.code == "ended":
        return APIError(
            400,
            f"approval '{approval_id}': {refused.message}",
            param="id",
            code="approval_not_pending",
        )
    return APIError(
        404,
        f"no pending approval '{approval_id}' (never asked, or ended long ago)",
        param="id",
        code="approval_not_found",
    )


# -- across processes -----------------------------------------------------------


class _DecisionJson(TypedDict):
    outcome: str
    by: str | None
    reason: str


class _RefusedJson(TypedDict):
    code: RefusedCode
    message: str


class _ResultJson(TypedDict, total=False):
    """How a process took an answer another one sent it (in its reply)."""

    decision: _DecisionJson
    refused: _RefusedJson


def _result_json(result: Decision | Refused) -> _ResultJson:
    if isinstance(result, Decision):
        return {
            "decision": {
                "outcome": result.outcome.value,
                "by": result.by,
                "reason": result.reason,
            }
        }
    return {"refused": {"code": result.code, "message": result.message}}


def _result_of(data: _ResultJson) -> Decision | Refused:
    if "decision" in data:
        d = data["decision"]
        return Decision(Outcome(d["outcome"]), d.get("by"), d.get("reason", ""))
    r = data["refused"]
    return Refused(r["code"], r["message"])


@dataclass
class _Wait:
    expected: set[str]
    done: trio.Event = field(default_factory=trio.Event)
    result: Decision | Refused | None = None


class RemoteApprovals:
    """Answers that cross processes through the store's signals."""

    def __init__(self, store: Store, nursery: trio.Nursery) -> None:
        self.store = store
        self.nursery = nursery
        self._waits: dict[str, _Wait] = {}

    @property
    def waiting(self) -> bool:
        """An answer waits for replies: poll signals often."""
        return bool(self._waits)

    async def note(self, question: ApprovalQuestion, seconds: float) -> None:
        """A question is asked here: note it in the store, so an answer
        another process gets comes here. A store that refuses leaves the
        question answerable in this process only."""
        try:
            await self.store.note_approval(question.id, wall_clock() + seconds)
        except StoreError:
            log.warning(
                "could not note approval %s in the store: only this process takes its answer",
                question.id,
            )

    async def answer(self, approval_id: str, answer: Answer, by: str) -> Decision | Refused:
        """Answer here, or in the live process that holds the question."""
        result = answer_approval(approval_id, answer.approve, by=by, reason=answer.reason)
        if not (isinstance(result, Refused) and result.code == "unknown"):
            return result
        # Looked up first: an id nobody asked costs one read, not a signal
        # to every process and a wait for all their replies.
        holder = await self.store.approval_holder(approval_id)
        if holder is None or holder == self.store.runner.id:
            return result
        if holder not in await self.store.live_runners():
            return result
        ticket = secrets.token_hex(12)
        wait = self._waits[ticket] = _Wait({holder})
        try:
            payload = {
                "id": approval_id,
                "approve": answer.approve,
                "reason": answer.reason,
                "by": by,
                "reply_to": self.store.runner.id,
                "ticket": ticket,
            }
            await self.store.send_signal(holder, Signal("approval", json.dumps(payload)))
            with trio.move_on_after(REPLY_WAIT):
                await wait.done.wait()
        finally:
            del self._waits[ticket]
        return wait.result if wait.result is not None else result

    def on_approval(self, target: str) -> None:
        """Signal handler: another process's client answers; take it here
        if the question waits here, and reply how it went."""
        try:
            data = json.loads(target)
            result = answer_approval(
                data["id"], bool(data["approve"]), by=str(data["by"]), reason=str(data["reason"])
            )
            reply = {"ticket": data["ticket"], "from": self.store.runner.id, **_result_json(result)}
            reply_to = str(data["reply_to"])
        except (ValueError, KeyError, TypeError):
            log.warning("an approval signal this process cannot read: %.200r", target)
            return
        self.nursery.start_soon(self._reply, reply_to, json.dumps(reply))

    async def _reply(self, runner: str, reply: str) -> None:
        try:
            await self.store.send_signal(runner, Signal("approval_reply", reply))
        except StoreError:
            log.warning("could not reply to an approval answer from %s", runner)

    def on_reply(self, target: str) -> None:
        """Signal handler: how another process took an answer sent from here."""
        try:
            data = json.loads(target)
            wait = self._waits.get(data["ticket"])
            if wait is None:
                return  # answered already, or given up on
            result = _result_of(data)
            wait.expected.discard(str(data.get("from")))
        except (ValueError, KeyError, TypeError):
            log.warning("an approval reply this process cannot read: %.200r", target)
            return
        if not (isinstance(result, Refused) and result.code == "unknown"):
            wait.result = result
            wait.done.set()
        elif not wait.expected:
            wait.done.set()


# -- the route -----------------------------------------------------------------


def register_approval_routes(app: QuartTrio, remote: RemoteApprovals | None) -> None:
    """Add ``POST /v1/approvals/<id>`` to ``app``."""

    @app.post("/v1/approvals/<approval_id>")
    async def answer(approval_id: str) -> Response:
        given = await read_json_body(parse_answer)
        by = approval_identity()
        if remote is not None:
            result = await remote.answer(approval_id, given, by)
        else:
            result = answer_approval(approval_id, given.approve, by=by, reason=given.reason)
        if isinstance(result, Refused):
            raise answer_error(approval_id, result)
        return json_response(answer_body(approval_id, result))
