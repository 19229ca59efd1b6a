"""The typed event vocabulary an agent turn sends to its consumers.

Events describe presentation only; the conversation history is owned by the
agent. Like h11's events they are frozen dataclasses exported through one
``__all__`` and one union type. Each constructs from what names it (the
text, the tool, the notice's kind; ``MessageStop()`` is the final stop):
everything else has the default a reader would assume.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from .endings import FinishReason

__all__ = [
    "ApprovalOutcome",
    "ApprovalRequested",
    "ApprovalResolved",
    "Commentary",
    "ContextCompacted",
    "GatewayNotice",
    "LongToolHint",
    "MessageChunk",
    "MessageStop",
    "ReasoningChunk",
    "StreamEvent",
    "ToolCallChunk",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolProgress",
    "TurnFinished",
    "Usage",
    "coalesce",
]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as the model server reported them (summed over a turn)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cached_tokens + other.cached_tokens,
        )


@dataclass(frozen=True, slots=True)
class MessageChunk:
    """A delta of assistant text, think blocks already filtered out.

    ``tokens`` is how many of the model's deltas (about one token each) the
    text joins: more than one when several arrived in one read of the
    stream, or were coalesced later.
    """

    text: str
    tokens: int = 1


@dataclass(frozen=True, slots=True)
class ReasoningChunk:
    """A delta of model reasoning, for consumers that show it."""

    text: str


@dataclass(frozen=True, slots=True)
class MessageStop:
    """The current text segment ended; ``final=False`` at a tool boundary."""

    final: bool = True


@dataclass(frozen=True, slots=True)
class Commentary:
    """Complete interim assistant text said before tool calls."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallChunk:
    """A tool call started. ``index`` numbers the turn's tool calls from 0,
    over all its model steps (a second step's calls go on from the first's);
    its ``ToolCallFinished`` has the same ``index``."""

    tool_name: str
    preview: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    index: int = 0
    call_id: str = ""


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of a call to a client-side tool, as the model writes it.

    The first delta of a call carries its ``call_id`` and ``name`` (and
    possibly arguments already); later ones only the next piece of its JSON
    ``arguments``. ``index`` is the call's position among the client calls
    of the answer. Calls to the agent's own tools never appear here: those
    are ``ToolCallChunk``/``ToolCallFinished`` while they run. The whole
    calls follow in ``TurnFinished.tool_calls``, in ``index`` order.
    """

    index: int
    arguments: str = ""
    call_id: str = ""
    name: str = ""

    @property
    def starts(self) -> bool:
        """Whether this delta opens its call (a call always has a name)."""
        return bool(self.name)


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """A tool call ended; ``result`` is what the model will read."""

    tool_name: str
    duration: float = 0.0
    ok: bool = True
    index: int = 0
    call_id: str = ""
    result: str = ""


@dataclass(frozen=True, slots=True)
class LongToolHint:
    """A tool has run longer than the configured hint threshold."""

    tool_name: str
    duration: float = 0.0


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """A running tool reported how far it got (an MCP server's progress
    notification): ``progress`` of ``total`` (None: unknown), ``message``
    what it says it is doing. ``index`` is the call's, as in ToolCallChunk."""

    tool_name: str
    index: int = 0
    progress: float = 0.0
    total: float | None = None
    message: str = ""
    call_id: str = ""

    def describe(self) -> str:
        """``"3/10 message"``: what a person reads."""
        done = f"{self.progress:g}" + (f"/{self.total:g}" if self.total is not None else "")
        return f"{done} {self.message}".strip()


@dataclass(frozen=True, slots=True)
class GatewayNotice:
    """A gateway control message (restart, interrupted, …); ``extra`` holds
    its times in seconds (``waited``, ``after``)."""

    kind: str
    text: str = ""
    extra: dict[str, float] = field(default_factory=dict)


ApprovalOutcome = Literal["approved", "denied", "expired", "cancelled"]


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """A tool call waits for a person's approval; the turn waits with it.

    ``id`` is what an answer names (:func:`hermes_trio.approvals.answer_approval`);
    ``command`` is what the person is asked about (the command line),
    ``reason`` why it needs approval (the safety check's rules), and
    ``arguments`` the call's arguments. ``deadline`` is on the turn's trio
    clock (``trio.current_time()``), ``timeout`` seconds after the question:
    with no answer by then it is denied (``expired``). ``index`` and
    ``call_id`` are those of the call's ``ToolCallChunk`` (-1 and "" when
    the question was asked outside a turn's tool call). Its
    ``ApprovalResolved`` always follows, even when the turn is cancelled.
    """

    id: str
    tool_name: str
    arguments: dict[str, Any]
    command: str
    reason: str
    deadline: float
    timeout: float
    index: int = -1
    call_id: str = ""


@dataclass(frozen=True, slots=True)
class ApprovalResolved:
    """How an approval ended: ``approved`` or ``denied`` by ``by`` (with
    their ``reason``, if they gave one; ``always``: approved for the rest
    of the session), ``expired`` (no answer by the deadline), or
    ``cancelled`` (the turn was interrupted while it waited; sent from the
    turn's shielded cleanup, so a consumer reads it only if it drains its
    channel after its own cancel). Update the prompt that was shown."""

    id: str
    outcome: ApprovalOutcome
    by: str | None = None
    reason: str = ""
    always: bool = False
    index: int = -1
    call_id: str = ""


@dataclass(frozen=True, slots=True)
class ContextCompacted:
    """The conversation was made smaller to fit the model's context window,
    between two model requests: ``how`` is ``summary`` (the older part was
    replaced by one summary the model wrote) or ``truncation`` (the oldest
    whole exchanges were dropped, when no summary could be had); ``tokens_before``
    and ``tokens_after`` are the request's estimated size, ``folded`` how many
    messages went; ``reason`` says why a summary was not used (empty
    otherwise); ``summary`` is the text that now stands for what was folded
    (the Responses API seals it into a ``compaction`` item)."""

    how: Literal["summary", "truncation"]
    tokens_before: int = 0
    tokens_after: int = 0
    folded: int = 0
    window: int = 0
    reason: str = ""
    summary: str = ""


@dataclass(frozen=True, slots=True)
class TurnFinished:
    """The turn is over; always the last event of a turn.

    ``finish_reason`` is ``stop``, ``length``, ``tool_calls`` (client-side tools
    were called and wait for the client), ``approval`` (calls wait for a
    person's answer in a later request: ``ApprovalChannel.defer``),
    ``interrupted`` or ``error`` (:data:`~hermes_trio.endings.FinishReason`).
    ``tool_calls`` holds the client-side calls in OpenAI message form and
    ``error`` a human-readable message when ``finish_reason == "error"``, with
    ``error_code`` one of :class:`~hermes_trio.endings.ErrorCode` (or the
    model server's own code for a request it refused) and ``model_status``
    the model server's HTTP status, if it sent one, so a server can pick its
    status (502/504, or the 4xx of a request the model server refused as
    invalid).
    """

    text: str
    usage: Usage = Usage()
    finish_reason: FinishReason = "stop"
    tool_calls: tuple[dict[str, Any], ...] = ()
    error: str | None = None
    error_code: str | None = None
    model_status: int | None = None


StreamEvent = (
    MessageChunk
    | ReasoningChunk
    | MessageStop
    | Commentary
    | ToolCallChunk
    | ToolCallDelta
    | ToolCallFinished
    | LongToolHint
    | ToolProgress
    | GatewayNotice
    | ApprovalRequested
    | ApprovalResolved
    | ContextCompacted
    | TurnFinished
)


def coalesce(events: Iterable[StreamEvent]) -> list[StreamEvent]:
    """Merge runs of adjacent text (and reasoning) deltas into one event each.

    A fast model can queue hundreds of one-token deltas while a consumer is
    busy; handling them as one delta costs one render instead of hundreds.
    Order between different kinds is preserved.
    """
    out: list[StreamEvent] = []
    run: list[MessageChunk | ReasoningChunk] = []

    def flush() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            # One join per run: pairwise concatenation is quadratic in its length.
            text = "".join(chunk.text for chunk in run)
            if isinstance(run[0], MessageChunk):
                tokens = sum(c.tokens for c in run if isinstance(c, MessageChunk))
                out.append(MessageChunk(text, tokens))
            else:
                out.append(ReasoningChunk(text))
        run.clear()

    for event in events:
        if isinstance(event, MessageChunk | ReasoningChunk):
            if run and type(run[0]) is not type(event):
                flush()
            run.append(event)
        else:
            flush()
            out.append(event)
    flush()
    return out
