"""The recording of one turn, as data: build it, write it, read it back,
and compare two timelines. Sans-IO: no trio, no httpx, no clock, no files.

A recording is one JSON document (``FORMAT``, ``VERSION``):

- ``turn``: what the turn was asked (its messages and options) and the few
  settings that shape its events (think tags, step limit, model timeouts);
- ``exchanges``: every HTTP request the turn made to the model server, in
  order: method, URL (without credentials), body, and the answer: status,
  headers, each body piece with its time since the request, and how the
  answer ended (``eom``; ``closed`` by the client; ``error`` with the
  transport error's class and message);
- ``tools``: every tool call, with its arguments, result, and when it
  started and ended;
- ``cancelled``: when the turn was cancelled, and why (absent if it was not);
- ``events``: the turn's events as its consumer received them, each with
  its time.

Times are seconds on the turn's *virtual* clock (:class:`VirtualClock`):
the waits a replay reproduces (the model's pauses, tool run times) count,
the process's own work between them does not. That is the clock trio's
``MockClock`` keeps when the turn is replayed, so a replay can match the
recorded times to the millisecond.

Secrets never reach the document: every string goes through the process's
redaction registry (:mod:`hermes_trio.redaction`: model and platform keys,
server keys, credentials in URLs), and ``Authorization``-style values and
bearer tokens are cut whatever they are. Headers of requests are not kept
at all.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..redaction import REDACTED, redact
from ..wire.sse import SSEDecoder, SSEError, SSEEvent
from .document import BodyPiece, EventRecord, PieceRecord, RecordingDocument
from .schema import check_document, read_json

__all__ = [
    "FORMAT",
    "INPUT_EVENTS",
    "REACTION",
    "VERSION",
    "Difference",
    "RecordingError",
    "VirtualClock",
    "event_record",
    "first_difference",
    "parse",
    "piece_from_json",
    "piece_to_json",
    "scrub",
    "serialize",
    "timeline_lines",
]

FORMAT = "hermes-trio-recording"
VERSION = 1

# Values that authenticate, whoever's they are: never written, registered
# as secrets or not.
_CREDENTIAL_RE = re.compile(
    r"(?i)\b(authorization|proxy-authorization|x-api-key|api[-_]?key)"
    r"(\"?\s*[:=]\s*\"?)(bearer\s+|basic\s+)?[^\s\"',}]+"
)
_CREDENTIAL_KEY = re.compile(
    r"(?i)(proxy-)?authorization|x-api-key|api[-_]?key|(access|bot|app)?[-_]?token|password|secret"
)
_BEARER_RE = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}")

# Event fields that hold a time on the process's own clock (not the turn's):
# they cannot match between two runs and say nothing the event times do not.
_CLOCK_FIELDS = frozenset({"deadline"})
# Durations a replay reproduces, compared at the timeline's precision.
_DURATION_FIELDS = frozenset({"duration"})
# Events fired by a timer of the process (not by the model or a tool):
# their time and duration follow the host's scheduling, not the recording.
_TIMER_EVENTS = frozenset({"LongToolHint"})
_TIME_TOLERANCE = 0.0005
#: Seconds within which the turn's own action counts as its reaction to the
#: input before it, not as a timer firing: well above a busy host's
#: scheduling delay, below the shortest timer of the model client (50 ms).
REACTION = 0.01
#: Events a person causes (an approval's answer, or its timeout): their
#: time is an input the replay repeats, like a model chunk's.
INPUT_EVENTS = frozenset({"ApprovalRequested", "ApprovalResolved"})


class RecordingError(ValueError):
    """A file that is not a recording this version can replay."""


def _scrub_text(text: str) -> str:
    text = redact(text)
    text = _CREDENTIAL_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return _BEARER_RE.sub(lambda m: f"{m.group(1)} {REDACTED}", text)


def scrub(value: Any) -> Any:
    """``value`` (JSON data) with every secret taken out of every string,
    keys included."""
    if isinstance(value, str):
        return _scrub_text(value)
    if isinstance(value, Mapping):
        return {
            _scrub_text(str(k)): REDACTED if _CREDENTIAL_KEY.fullmatch(str(k)) else scrub(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value


def piece_to_json(data: bytes) -> BodyPiece:
    """A body piece as JSON: its text where it is UTF-8 (readable, editable
    by hand), else Base64."""
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def piece_from_json(piece: BodyPiece | PieceRecord) -> bytes:
    if "text" in piece:
        return str(piece["text"]).encode("utf-8")
    return base64.b64decode(str(piece.get("base64", "")))


def event_record(at: float, event: Any) -> EventRecord:
    """One event as the recording keeps it: time, type, fields."""
    fields = (
        dataclasses.asdict(event)
        if dataclasses.is_dataclass(event) and not isinstance(event, type)
        else {}
    )
    # As a file gives it back (tuples as lists), so a replay compares equal.
    data = json.loads(json.dumps(fields, ensure_ascii=False, default=str))
    return {"at": round(at, 6), "type": type(event).__name__, "data": data}


# Where streamed text sits in a model's chunks (Chat Completions deltas,
# Responses events) and in the turn's events.
_STREAMED_KEYS = frozenset({"content", "reasoning_content", "reasoning", "arguments", "delta"})
_CHUNK_EVENTS = frozenset({"MessageChunk", "ReasoningChunk", "ToolCallDelta"})


def _collect(value: Any, out: dict[str, list[str]]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(item, str) and key in _STREAMED_KEYS:
                out.setdefault(str(key), []).append(item)
            else:
                _collect(item, out)
    elif isinstance(value, list):
        for item in value:
            _collect(item, out)


def _streamed_parts(pieces: Sequence[PieceRecord]) -> list[list[str]]:
    """The texts a model streamed in an answer's pieces, one list per field."""
    decoder = SSEDecoder()
    out: dict[str, list[str]] = {}
    raw: list[str] = []
    for piece in pieces:
        data = piece_from_json(piece)
        raw.append(data.decode("utf-8", "replace"))
        try:
            events = decoder.feed(data)
        except SSEError:
            break
        for event in events:
            if isinstance(event, SSEEvent):
                try:
                    _collect(json.loads(event.data), out)
                except ValueError:
                    continue
    return [raw, *out.values()]


def _spans_parts(parts: Sequence[str]) -> bool:
    """A secret that only shows when the parts are joined."""
    return _scrub_text("".join(parts)) != "".join(_scrub_text(p) for p in parts)


def _remove_split_secrets(document: RecordingDocument) -> RecordingDocument:
    """``document`` without any secret the model streamed in pieces.

    Scrubbing each string misses a key that arrives a few characters per
    chunk (a model echoing it token by token): where the joined text holds
    one, that answer's pieces and the turn's streamed text events are
    dropped, and the recording says it cannot be replayed.
    """
    exchanges = list(document.get("exchanges") or [])
    events = list(document.get("events") or [])
    split = False
    for index, exchange in enumerate(exchanges):
        if any(_spans_parts(parts) for parts in _streamed_parts(exchange.get("pieces") or [])):
            exchanges[index] = {**exchange, "pieces": []}
            split = True
    texts: dict[str, list[str]] = {}
    for record in events:
        if record.get("type") in _CHUNK_EVENTS:
            _collect({"content": (record.get("data") or {}).get("text", "")}, texts)
            _collect({"arguments": (record.get("data") or {}).get("arguments", "")}, texts)
    if split or any(_spans_parts(parts) for parts in texts.values()):
        events = [e for e in events if e.get("type") not in _CHUNK_EVENTS]
        split = True
    if not split:
        return document
    return {
        **document,
        "exchanges": exchanges,
        "events": events,
        "removed": "a secret the model streamed in pieces",
    }


def serialize(recording: RecordingDocument) -> str:
    """The document, secrets removed, as text."""
    body = _remove_split_secrets(recording)
    document = {"format": FORMAT, "version": VERSION, **scrub(body)}
    return json.dumps(document, ensure_ascii=False, indent=1, sort_keys=False) + "\n"


def parse(data: str | bytes, *, where: str = "recording") -> RecordingDocument:
    """The document in ``data`` (a file's bytes, or its text), checked
    whole against its shapes (:mod:`.schema`); :class:`RecordingError` in
    one line naming the file and where it is wrong."""
    try:
        document = read_json(data)
    except ValueError as exc:
        raise RecordingError(f"{where}: {exc}") from None
    if not isinstance(document, dict):
        raise RecordingError(f"{where}: top level: expected a recording's object, got an array")
    if document.get("format") != FORMAT:
        raise RecordingError(f'{where}: not a hermes-trio recording (no "format": {FORMAT!r})')
    if document.get("version") != VERSION:
        raise RecordingError(
            f"{where}: recording version {_shown_value(document.get('version'))}; "
            f"this hermes-trio replays version {VERSION}"
        )
    if document.get("removed"):
        # One line, whatever the file says.
        removed = json.dumps(str(document["removed"]), ensure_ascii=False)[1:-1]
        raise RecordingError(
            f"{where}: {removed} was taken out of the recording; it cannot be replayed"
        )
    if document.get("truncated"):
        raise RecordingError(
            f"{where}: the recording was cut at record.max_file_bytes and cannot be replayed"
        )
    try:
        return check_document(document)
    except ValueError as exc:
        raise RecordingError(f"{where}: {exc}") from None


def _shown_value(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


class VirtualClock:
    """The turn's virtual time, computed from the process's clock as the
    turn runs.

    Time passes only while the turn waits for something a replay
    reproduces: a model answer's piece (``waited``: its time since its
    request), a tool's result (its time since it started), a cancel from
    outside (``external``). The work in between takes no virtual time, as
    on trio's ``MockClock``. ``now`` is the time of the latest of those.
    """

    __slots__ = ("_live", "now")

    def __init__(self, live: float) -> None:
        self._live = live
        self.now = 0.0

    def waited(self, started: float, live_started: float, live: float) -> float:
        """A wait that began at virtual ``started`` (process time
        ``live_started``) ended at process time ``live``."""
        at = max(self.now, started + (live - live_started))
        self._live, self.now = live, at
        return at

    def reacted(self, started: float, live_started: float, live: float) -> float:
        """The turn's own side ended a wait (the client closed an answer).

        Right after an input it is the turn's reaction to it, which takes
        no virtual time (a replay reacts at once, however busy the live
        host was); later than :data:`REACTION` it was a timer of the
        client's (an idle timeout, a grace period), which a replay repeats.
        """
        if live - self._live < REACTION:
            return self.now
        return self.waited(started, live_started, live)

    def external(self, live: float) -> float:
        """Something from outside the turn happened at process time ``live``."""
        at = max(self.now, self.now + (live - self._live))
        self._live, self.now = live, at
        return at


@dataclass(frozen=True)
class Difference:
    """Where a replay first differs from its recording."""

    index: int
    message: str

    def __str__(self) -> str:
        return self.message


def _normal(record: EventRecord) -> tuple[str, dict[str, Any], dict[str, float]]:
    """(type, fields compared exactly, times compared to the millisecond)."""
    kind = str(record.get("type"))
    # A replay shows what the recording held: secrets as the file has them.
    fields = scrub(dict(record.get("data") or {}))
    data = {k: v for k, v in fields.items() if k not in _CLOCK_FIELDS}
    times = {
        k: float(data.pop(k)) for k in _DURATION_FIELDS if isinstance(data.get(k), int | float)
    }
    if kind in _TIMER_EVENTS:
        return kind, data, {}
    times["at"] = float(record.get("at", 0.0))
    return kind, data, times


def _same(want: EventRecord, got: EventRecord) -> bool:
    kind, data, times = _normal(want)
    kind2, data2, times2 = _normal(got)
    # A field the recording lacks came with a later version of the event:
    # an older recording still replays.
    data2 = {k: v for k, v in data2.items() if k in data}
    times2 = {k: v for k, v in times2.items() if k in times}
    if (kind, data) != (kind2, data2) or times.keys() != times2.keys():
        return False
    # Half a millisecond: both sides print the same to the millisecond,
    # whatever float rounding did to the sums behind them.
    return all(abs(times[k] - times2[k]) < _TIME_TOLERANCE for k in times)


def _describe(record: EventRecord) -> str:
    kind, data, times = _normal(record)
    when = f" at {times['at']:.3f} s" if "at" in times else ""
    shown = {**data, **{k: round(v, 3) for k, v in times.items() if k != "at"}}
    return f"{kind}{when} {json.dumps(shown, ensure_ascii=False, sort_keys=True)}"


def first_difference(
    recorded: Sequence[EventRecord],
    replayed: Sequence[EventRecord],
    *,
    causes: Sequence[str] = (),
) -> Difference | None:
    """The first event where two timelines differ (type, fields, time to
    the millisecond), or None when they match. ``causes[i]`` says what
    came just before replayed event ``i`` (e.g. which model chunk), to name
    where an edit took effect."""
    for index, (want, got) in enumerate(zip(recorded, replayed, strict=False)):
        if not _same(want, got):
            cause = (
                f" (just after {causes[index]})" if index < len(causes) and causes[index] else ""
            )
            return Difference(
                index,
                f"event {index + 1} differs{cause}: recorded {_describe(want)}; "
                f"replayed {_describe(got)}",
            )
    if len(recorded) != len(replayed):
        index = min(len(recorded), len(replayed))
        if len(recorded) > len(replayed):
            what = (
                f"the replay ended before event {index + 1}: recorded {_describe(recorded[index])}"
            )
        else:
            what = f"the replay has an extra event {index + 1}: {_describe(replayed[index])}"
        return Difference(index, what)
    return None


_SHOWN = {
    "MessageChunk": "text",
    "ReasoningChunk": "text",
    "Commentary": "text",
    "ToolCallChunk": "preview",
    "ToolCallFinished": "result",
    "GatewayNotice": "text",
    "ApprovalRequested": "command",
    "ApprovalResolved": "outcome",
    "TurnFinished": "text",
}


def timeline_lines(events: Iterable[EventRecord]) -> list[str]:
    """A timeline for people: time, event, and its text or tool output."""
    lines = []
    for record in events:
        kind = str(record.get("type"))
        data = dict(record.get("data") or {})
        shown = data.get(_SHOWN.get(kind, ""), "")
        if kind == "ToolCallFinished":
            status = "ok" if data.get("ok") else "failed"
            shown = f"{status} in {float(data.get('duration', 0)):.3f} s: {shown}"
        elif kind == "TurnFinished":
            reason = data.get("finish_reason")
            error = f" error: {data['error']}" if data.get("error") else ""
            shown = f"[{reason}]{error} {shown}"
        elif kind == "MessageStop":
            shown = "final" if data.get("final") else "tool boundary"
        text = json.dumps(str(shown), ensure_ascii=False)[1:-1]
        lines.append(f"{float(record.get('at', 0.0)):9.3f}  {kind:<18} {text}")
    return lines
