"""The recording document's shapes (:mod:`.tape` describes the layout).

A file read back is checked against these shapes, the whole of it, before
anything replays (:mod:`.schema`): every field's type, the required ones,
and the bounds a ``Range`` gives a number. The recorder writes every field;
what a replay can do without is ``NotRequired`` here: a file may be older,
or edited by hand. What stays open JSON: a request's body (what the model
client sent; :mod:`.schema` checks the little of it a replay reads), an
event's fields (checked against the event's class), the client's sampling
parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, TypeAlias, TypedDict

from ..wire.messages import ChatTool, Message

__all__ = [
    "MAX_SECONDS",
    "BodyPiece",
    "CancelRecord",
    "EventRecord",
    "ExchangeEnd",
    "ExchangeRecord",
    "PieceRecord",
    "Range",
    "RecordedAgent",
    "RecordedCompaction",
    "RecordedContext",
    "RecordedFallback",
    "RecordedModel",
    "RecordedOptions",
    "RecordedTimeouts",
    "RecordedTurn",
    "RecordingDocument",
    "Seconds",
    "ToolRecord",
    "TurnSettings",
]


@dataclass(frozen=True)
class Range:
    """The bounds (inclusive) of a number in the document."""

    low: float
    high: float


#: The latest time a recording may name: far beyond any turn, near enough
#: that a replay on ``MockClock`` still reaches it.
MAX_SECONDS = 1e7

Seconds: TypeAlias = Annotated[float, Range(0, MAX_SECONDS)]
"""A time since the turn (or a request, or a tool call) began, or a
duration: on the turn's virtual clock, which starts at 0."""


class BodyPiece(TypedDict, total=False):
    """A body piece as JSON: ``text`` where it is UTF-8, else ``base64``."""

    text: str
    base64: str


class PieceRecord(TypedDict):
    """One piece of an answer's body, ``after`` seconds since its request."""

    after: Seconds
    text: NotRequired[str]
    base64: NotRequired[str]


class ExchangeEnd(TypedDict):
    """How an answer ended: ``eom``, ``closed`` by the client, or ``error``
    (the transport error's class and message)."""

    after: Seconds
    how: Literal["eom", "closed", "error"]
    error: NotRequired[str]
    message: NotRequired[str]


class ExchangeRecord(TypedDict):
    """One HTTP request of the turn and its answer; ``body`` is the JSON
    the model client sent (or its text, when it was not JSON)."""

    at: Seconds
    method: str
    url: str
    body: Any
    pieces: list[PieceRecord]
    head_after: NotRequired[Seconds]
    status: NotRequired[Annotated[int, Range(100, 599)]]
    headers: NotRequired[list[list[str]]]
    end: NotRequired[ExchangeEnd]


class ToolRecord(TypedDict):
    """One tool call: what it was given, what it answered, how long it took."""

    at: Seconds
    index: Annotated[int, Range(0, 2**31 - 1)]
    id: str
    name: str
    arguments: str
    ok: bool
    result: str
    duration: Seconds


class EventRecord(TypedDict):
    """One event of the turn: its time, its class's name, its fields."""

    at: Seconds
    type: str
    data: dict[str, Any]


class CancelRecord(TypedDict):
    at: Seconds
    cause: str


class RecordedOptions(TypedDict, total=False):
    """``Agent.run_turn`` options the turn ran with."""

    stream: bool
    client_tools: list[ChatTool]
    # Sampling parameters are the client's own JSON.
    params: dict[str, Any] | None
    model: str | None
    system: str | None


class RecordedFallback(TypedDict):
    name: str
    api_mode: Literal["chat_completions", "responses"] | None


class RecordedTimeouts(TypedDict):
    connect: float
    first_token: float
    idle: float
    request: float
    total: float


class RecordedModel(TypedDict, total=False):
    """The model settings that shape a turn's events."""

    name: str | None
    api_mode: Literal["chat_completions", "responses"]
    include_usage: bool
    # Each retry of a request past the recorded ones is answered at once:
    # the bound keeps a replay from spinning through millions of them.
    max_retries: Annotated[int, Range(0, 100)]
    backoff_base: float
    backoff_max: float
    max_answer_bytes: int
    fallbacks: list[RecordedFallback]
    timeouts: RecordedTimeouts
    context_window: int | None


class RecordedAgent(TypedDict, total=False):
    """The agent settings that shape a turn's events."""

    system_prompt: str
    max_iterations: int
    long_tool_hint: float
    think_tags: list[str]
    channel_size: int


class RecordedCompaction(TypedDict, total=False):
    """The ``compaction`` settings (a turn may summarise its conversation)."""

    enabled: bool
    threshold: float
    keep_recent: int
    summary_timeout: float
    summary_max_tokens: int
    default_window: int


class RecordedContext(TypedDict, total=False):
    """What the agent had learned of the model's window before the turn:
    the calibration ``ratio`` of its estimates and a ``window`` a refusal
    told (None: none). They decide when the turn compacts."""

    ratio: float
    window: int | None


class TurnSettings(TypedDict, total=False):
    model: RecordedModel
    agent: RecordedAgent
    compaction: RecordedCompaction
    context: RecordedContext


class RecordedTurn(TypedDict, total=False):
    """What the turn was asked, and the settings it ran under."""

    messages: list[Message]
    options: RecordedOptions
    settings: TurnSettings


class RecordingDocument(TypedDict):
    """One recorded turn. ``format`` and ``version`` are added when it is
    written; ``removed`` says why it cannot be replayed (a secret the model
    streamed in pieces was taken out)."""

    format: NotRequired[str]
    version: NotRequired[int]
    outcome: NotRequired[str]
    truncated: NotRequired[bool]
    turn: RecordedTurn
    exchanges: list[ExchangeRecord]
    tools: list[ToolRecord]
    cancelled: NotRequired[CancelRecord | None]
    events: list[EventRecord]
    removed: NotRequired[str]
