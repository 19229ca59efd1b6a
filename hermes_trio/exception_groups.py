"""Finding the real error inside trio's exception groups.

An error raised in a task reaches its nursery's owner wrapped in an
exception group, often groups inside groups. Where a person sees the error
(a command's one-line message, an adapter's restart log), what matters is
the error itself: these helpers look through the wrapping. Pure functions;
no trio.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

__all__ = ["first_leaf", "leaves"]

_E = TypeVar("_E", bound=BaseException)


def leaves(exc: BaseException) -> Iterator[BaseException]:
    """The errors inside ``exc``, in order: ``exc`` itself when it is not a
    group, else every error of its (nested) groups that is not a group."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from leaves(inner)
    else:
        yield exc


def first_leaf(exc: BaseException | None, types: tuple[type[_E], ...]) -> _E | None:
    """The first error of ``types`` in ``exc``, looking inside groups; None
    when there is none (or ``exc`` is None)."""
    if exc is None:
        return None
    for leaf in leaves(exc):
        if isinstance(leaf, types):
            return leaf
    return None
