"""Turn-level approval: a tool call that needs a person's yes asks the
surface the request came from, and waits inside its turn.

:mod:`.book` holds the decisions (sans-IO); :mod:`.pending` the trio shell
and this process's registry, where surfaces answer by id
(:func:`answer_approval`). Names resolve on first use, like the root
package's, so ``import hermes_trio.approvals.book`` loads no trio.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .book import (
        DEFAULT_APPROVAL_TIMEOUT,
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
        Listing,
        PendingApprovals,
        Publish,
        answer_approval,
    )

__all__ = [
    "CLEANUP_GRACE",
    "DEFAULT_APPROVAL_TIMEOUT",
    "PENDING",
    "ApprovalBook",
    "ApprovalChannel",
    "ApprovalHandle",
    "ApprovalQuestion",
    "Decision",
    "Listing",
    "Outcome",
    "PendingApprovals",
    "Publish",
    "Refused",
    "RefusedCode",
    "answer_approval",
    "describe",
    "new_approval_id",
]

_PENDING_NAMES = frozenset(
    {
        "CLEANUP_GRACE",
        "PENDING",
        "ApprovalHandle",
        "Listing",
        "PendingApprovals",
        "Publish",
        "answer_approval",
    }
)

if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        home = ".pending" if name in _PENDING_NAMES else ".book"
        value = getattr(import_module(home, __name__), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
