"""How a response ends when the process running it is gone: the rule, apart
from the rows it is read from and written to (``statements.recover``).

It ends ``incomplete`` with the output its stored events had built; its
conversation ends with what was shown of the answer, marked interrupted
(the agent's own wording, :mod:`hermes_trio.wire.interrupted`), so a turn
can continue from it; and a ``response.incomplete`` event right after the
last sequence number anyone may have seen closes its stream.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..wire.interrupted import interrupted_answer
from ..wire.messages import Message
from ..wire.responses_replay import output_text
from ..wire.responses_types import OutputItem, ResponseLifecycleEvent, ResponseObject

__all__ = ["OrphanEnd", "orphan_end"]


@dataclass(frozen=True)
class OrphanEnd:
    """What is stored for an orphaned response: its final ``response``, its
    whole conversation ``messages``, and the ``event`` (numbered ``seq``)
    that ends its stream."""

    response: ResponseObject
    messages: list[Message]
    seq: int
    event: ResponseLifecycleEvent


def orphan_end(
    response: ResponseObject,
    output: list[OutputItem],
    messages: list[Message],
    *,
    last_event: int | None,
    reservation: int | None,
) -> OrphanEnd:
    """The end of an orphaned response whose stored events built ``output``
    and whose conversation is ``messages`` (this turn's input last).

    ``last_event`` is the highest stored event's sequence number and
    ``reservation`` the one a version before schema 6 reserved beyond it:
    the closing event goes above both, since a client may have seen either.
    Neither argument is changed."""
    text = output_text(output)
    ended: ResponseObject = {
        **response,
        "status": "incomplete",
        "incomplete_details": {"reason": None},
        "output": output,
        "output_text": text,
    }
    seen = max(-1 if last_event is None else last_event, -1 if reservation is None else reservation)
    seq = seen + 1
    event: ResponseLifecycleEvent = {
        "type": "response.incomplete",
        "response": ended,
        "sequence_number": seq,
    }
    return OrphanEnd(ended, [*messages, interrupted_answer(text)], seq, event)
