"""How a chat shows what happens beside the answer: the one hook a
messenger may offer to draw those events its own way, or not at all.

A messenger (a platform adapter's, or an embedder's own) that has a
``render_event`` method is an ``EventRenderer``; the message editor asks
it about each of these events before it shows one, and feeds the answer to
its plan:

- ``DEFAULT``: show it as the editor does today;
- a string: show this text instead;
- ``None``: show nothing for it.

What the text stands for, by event:

==================  ==========================================================
``ToolCallChunk``   the tool's line in the tool-progress message (a platform
                    without edits folds it into the answer)
``ToolCallFinished`` the tool's line once it ended (by default the line stays)
``ToolProgress``    the tool's line while it reports progress (by default
                    ``· 3/10 what it does`` after it)
``LongToolHint``    the tool's line while it runs long (by default its
                    seconds after it); with tool progress hidden, the
                    ``long_tool_hint`` note, where one is due
``GatewayNotice``   the notice (restart, waited, still working; for the
                    note of a turn the gateway cut off, None leaves the plain
                    "interrupted" note)
``ContextCompacted`` the compaction line
``ReasoningChunk``  a whole block of reasoning, asked once it ended (by
                    default chats do not show reasoning); the text is a note
==================  ==========================================================

The settings still say whether a kind is shown at all (``show_tool_progress``
and ``/verbose``, ``show_compaction``); the hook says how. The answer's
own text, the typing sign and approvals are not asked about.
"""

from __future__ import annotations

import enum
from typing import Final, Literal, Protocol, runtime_checkable

from hermes_trio.events import (
    ContextCompacted,
    GatewayNotice,
    LongToolHint,
    ReasoningChunk,
    ToolCallChunk,
    ToolCallFinished,
    ToolProgress,
)

__all__ = [
    "DEFAULT",
    "RENDERED_EVENTS",
    "DefaultRendering",
    "EventRenderer",
    "RenderedEvent",
    "Rendering",
    "check_rendering",
]


class DefaultRendering(enum.Enum):
    """The type of ``DEFAULT``."""

    DEFAULT = "default"


DEFAULT: Final = DefaultRendering.DEFAULT
"""Show the event the way the editor does without a hook."""

Rendering = str | None | Literal[DefaultRendering.DEFAULT]
"""A renderer's answer: text to show, None to show nothing, or ``DEFAULT``."""

RenderedEvent = (
    ToolCallChunk
    | ToolCallFinished
    | ToolProgress
    | LongToolHint
    | GatewayNotice
    | ContextCompacted
    | ReasoningChunk
)

RENDERED_EVENTS: Final = (
    ToolCallChunk,
    ToolCallFinished,
    ToolProgress,
    LongToolHint,
    GatewayNotice,
    ContextCompacted,
    ReasoningChunk,
)
"""The event classes a renderer is asked about (``RenderedEvent``'s)."""


@runtime_checkable
class EventRenderer(Protocol):
    """A messenger that draws side events its own way (see the module)."""

    def render_event(self, event: RenderedEvent) -> Rendering:
        """``DEFAULT``, the text to show for ``event``, or None for nothing."""
        ...


def check_rendering(answer: object, renderer: object) -> Rendering:
    """``answer`` if it is one a renderer may give; else ``TypeError``
    naming ``renderer`` (a hook of an untyped adapter returning a number
    would otherwise surface as an odd failure in a platform call)."""
    if answer is None or isinstance(answer, str):
        return answer
    if isinstance(answer, DefaultRendering):
        return DEFAULT
    raise TypeError(
        f"{renderer!r}.render_event returned {answer!r}: expected a str, None or DEFAULT"
    )
