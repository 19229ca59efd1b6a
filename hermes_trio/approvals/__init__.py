"""Turn-level approval: a tool call that needs a person's yes asks the
surface the request came from, and waits inside its turn.

:mod:`.book` holds the decisions (sans-IO); :mod:`.pending` the trio shell
and this process's registry, where surfaces answer by id
(:func:`answer_approval`).
"""

from .book import (
    ApprovalBook,
    ApprovalChannel,
    ApprovalQuestion,
    Decision,
    Outcome,
    Refused,
    RefusedCode,
    describe,
    new_approval_id,
)
from .pending import (
    CLEANUP_GRACE,
    PENDING,
    ApprovalHandle,
    PendingApprovals,
    Publish,
    answer_approval,
)

__all__ = [
    "CLEANUP_GRACE",
    "PENDING",
    "ApprovalBook",
    "ApprovalChannel",
    "ApprovalHandle",
    "ApprovalQuestion",
    "Decision",
    "Outcome",
    "PendingApprovals",
    "Publish",
    "Refused",
    "RefusedCode",
    "answer_approval",
    "describe",
    "new_approval_id",
]
