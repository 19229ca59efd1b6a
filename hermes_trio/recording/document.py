"""The recording document's shapes (:mod:`.tape` describes the layout).

The recorder writes every field; a file read back is checked only for what
a replay cannot do without (``turn``, ``exchanges``, ``tools``,
``events``), so the rest is ``NotRequired`` here: a file may be older, or
edited by hand. What stays open JSON: a request's body (what the model
client sent), an event's fields (whichever event it is), the client's
sampling parameters.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from ..wire.messages import ChatTool, Message

__all__ = [
    "BodyPiece",
    "CancelRecord",
    "EventRecord",
    "ExchangeEnd",
    "ExchangeRecord",
    "PieceRecord",
    "RecordedAgent",
    "RecordedCompaction",
    "RecordedContext",
    "RecordedFallback",
    "RecordedModel",
    "RecordedOptions",
    "RecordedTimeouts",
    "RecordedTurn",
    "RecordingDocument",
    "ToolRecord",
    "TurnSettings",
]


class BodyPiece(TypedDict, total=False):
    """A body piece as JSON: ``text`` where it is UTF-8, else ``base64``."""

    text: str
    base64: str


class PieceRecord(TypedDict):
    """One piece of an answer's body, ``after`` seconds since its request."""

    after: float
    text: NotRequired[str]
    base64: NotRequired[str]


class ExchangeEnd(TypedDict):
    """How an answer ended: ``eom``, ``closed`` by the client, or ``error``
    (the transport error's class and message)."""

    after: float
    how: str
    error: NotRequired[str]
    message: NotRequired[str]


class ExchangeRecord(TypedDict):
    """One HTTP request of the turn and its answer; ``body`` is the JSON
    the model client sent (or its text, when it was not JSON)."""

    at: float
    method: str
    url: str
    body: Any
    pieces: list[PieceRecord]
    head_after: NotRequired[float]
    status: NotRequired[int]
    headers: NotRequired[list[list[str]]]
    end: NotRequired[ExchangeEnd]


class ToolRecord(TypedDict):
    """One tool call: what it was given, what it answered, how long it took."""

    at: float
    index: int
    id: str
    name: str
    arguments: str
    ok: bool
    result: str
    duration: float


class EventRecord(TypedDict):
    """One event of the turn: its time, its class's name, its fields."""

    at: float
    type: str
    data: dict[str, Any]


class CancelRecord(TypedDict):
    at: float
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
    max_retries: int
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
