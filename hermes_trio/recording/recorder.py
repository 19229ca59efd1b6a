"""Recording turns as they run: the trio shell over :mod:`.tape`.

A :class:`~.files.Recorder` owns a directory; :func:`record_turn` wraps one turn
(the agent's ``run_turn``) and writes one file for it when it ends, however
it ends. While the turn runs, its :class:`Tape` is the task's context
variable, so the two places that talk to the outside find it without being
handed it: :class:`~.transport.TapTransport` (under the model client's httpx client)
and the agent's tool calls (:func:`current_tape`). Tool tasks inherit it
from the turn's task, as trio tasks inherit context variables.

Nothing here changes what the turn does: a tape only copies what passes.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal, cast

import trio

from ..config import Config
from ..events import StreamEvent
from ..redaction import shown_url
from ..wire.messages import Message
from .document import (
    CancelRecord,
    EventRecord,
    ExchangeEnd,
    ExchangeRecord,
    RecordedContext,
    RecordedOptions,
    RecordedTurn,
    RecordingDocument,
    ToolRecord,
    TurnSettings,
)
from .files import Recorder
from .tape import INPUT_EVENTS, VirtualClock, event_record, piece_to_json, serialize

if TYPE_CHECKING:
    # Annotations only: the tap (transport.py) hands these to the recorder.
    import httpx

__all__ = [
    "CANCEL_CAUSE",
    "Exchange",
    "Tape",
    "ToolMark",
    "current_tape",
    "note_tool",
    "record_turn",
]

log = logging.getLogger("hermes_trio.recording")

_TAPE: ContextVar[Tape | None] = ContextVar("hermes_trio_tape", default=None)

#: Set by whoever runs the turn (``hermes_trio.turn``): says why the turn
#: was cancelled, once it was, so the recording can name the cause. In the
#: words a person reads (``Turn.interrupted``), which a replay cancels with
#: again; the typed ``CancelCause`` is for the live process's decisions.
CANCEL_CAUSE: ContextVar[Callable[[], str | None] | None] = ContextVar(
    "hermes_trio_cancel_cause", default=None
)


def current_tape() -> Tape | None:
    """The tape of the turn this task runs for, if it is being recorded."""
    return _TAPE.get()


class ToolMark:
    """A tool call of a recorded turn, from its start (:func:`note_tool`)."""

    __slots__ = ("started", "tape")

    def __init__(self, tape: Tape) -> None:
        self.tape = tape
        self.started = (tape.clock.now, trio.current_time())

    def finished(self, **call: Any) -> None:
        """The call ended: ``index``, ``call_id``, ``name``, ``arguments``,
        ``ok``, ``result`` and ``duration`` (the agent's own measure)."""
        self.tape.tool_finished(self.started, **call)


def note_tool() -> ToolMark | None:
    """A tool call starts now: its mark, if the turn is being recorded."""
    tape = _TAPE.get()
    return ToolMark(tape) if tape is not None else None


class Tape:
    """What one turn did, as it happens (times on :class:`VirtualClock`)."""

    def __init__(self, turn: RecordedTurn, *, max_bytes: int) -> None:
        self.clock = VirtualClock(trio.current_time())
        self.turn = turn.copy()
        self.exchanges: list[ExchangeRecord] = []
        self.tools: list[ToolRecord] = []
        self.events: list[EventRecord] = []
        self.cancelled: CancelRecord | None = None
        self.max_bytes = max_bytes
        self.size = 0
        self.truncated = False

    def _room(self, size: int) -> bool:
        self.size += size
        if self.size > self.max_bytes:
            self.truncated = True
        return not self.truncated

    def event(self, event: StreamEvent) -> None:
        if type(event).__name__ in INPUT_EVENTS:
            self.clock.external(trio.current_time())
        record = event_record(self.clock.now, event)
        if self._room(len(repr(record))):
            self.events.append(record)

    def exchange(self, request: httpx.Request) -> Exchange:
        body: Any = None
        if request.content:
            try:
                body = json.loads(request.content)
            except (ValueError, UnicodeDecodeError):
                body = request.content.decode("utf-8", "replace")
        # A request goes out when the turn sends it: after a retry's pause
        # too, which no other input marks.
        at = self.clock.external(trio.current_time())
        record: ExchangeRecord = {
            "at": round(at, 6),
            "method": request.method,
            "url": shown_url(str(request.url)),
            "body": body,
            "pieces": [],
        }
        self._room(len(request.content or b""))
        self.exchanges.append(record)
        return Exchange(self, record)

    def tool_finished(
        self,
        started: tuple[float, float],
        *,
        index: int,
        call_id: str,
        name: str,
        arguments: str,
        ok: bool,
        result: str,
        duration: float,
    ) -> None:
        at, live = started
        # The agent's own measure of the call is the wait a replay repeats.
        self.clock.waited(at, live, live + duration)
        if self._room(len(arguments) + len(result)):
            self.tools.append(
                {
                    "at": round(at, 6),
                    "index": index,
                    "id": call_id,
                    "name": name,
                    "arguments": arguments,
                    "ok": ok,
                    "result": result,
                    "duration": duration,
                }
            )

    def cancel(self, cause: str) -> None:
        if self.cancelled is None:
            at = self.clock.external(trio.current_time())
            self.cancelled = {"at": round(at, 6), "cause": cause}

    def document(self, outcome: str) -> RecordingDocument:
        return {
            "outcome": outcome,
            "truncated": self.truncated,
            "turn": self.turn,
            "exchanges": self.exchanges,
            "tools": self.tools,
            "cancelled": self.cancelled,
            "events": self.events,
        }


class Exchange:
    """One HTTP request of the turn and its answer, as it arrives."""

    def __init__(self, tape: Tape, record: ExchangeRecord) -> None:
        self.tape = tape
        self.record = record
        self.at = tape.clock.now
        self.live = trio.current_time()

    def _after(self, *, by_client: bool = False) -> float:
        clock, live = self.tape.clock, trio.current_time()
        if by_client:
            at = clock.reacted(self.at, self.live, live)
        else:
            at = clock.waited(self.at, self.live, live)
        return round(at - self.at, 6)

    def head(self, response: httpx.Response) -> None:
        self.record["head_after"] = self._after()
        self.record["status"] = response.status_code
        self.record["headers"] = [
            [k, v] for k, v in response.headers.multi_items() if k.lower() != "set-cookie"
        ]

    def piece(self, data: bytes) -> None:
        after = self._after()
        if self.tape._room(len(data)):
            self.record["pieces"].append({"after": after, **piece_to_json(data)})

    def end(
        self, how: Literal["eom", "closed", "error"], exc: BaseException | None = None
    ) -> None:
        if "end" in self.record:
            return
        end: ExchangeEnd = {"after": self._after(by_client=how == "closed"), "how": how}
        if exc is not None:
            end["error"] = type(exc).__name__
            end["message"] = str(exc)
        self.record["end"] = end


class _RecordingSend:
    """The turn's send channel, with every event also put on the tape."""

    def __init__(self, inner: trio.MemorySendChannel[StreamEvent], tape: Tape) -> None:
        self._inner = inner
        self._tape = tape

    def send_nowait(self, event: StreamEvent) -> None:
        self._inner.send_nowait(event)
        self._tape.event(event)

    async def send(self, event: StreamEvent) -> None:
        await self._inner.send(event)
        self._tape.event(event)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def turn_settings(config: Config, context: RecordedContext | None = None) -> TurnSettings:
    """The settings that shape a turn's events, for the replay to run under
    (``context``: what the agent had learned of the model's window)."""
    model, agent, compaction = config.model, config.agent, config.compaction
    settings: TurnSettings = {
        "model": {
            "name": model.name,
            "api_mode": model.api_mode,
            "include_usage": model.include_usage,
            "max_retries": model.max_retries,
            "backoff_base": model.backoff_base,
            "backoff_max": model.backoff_max,
            "max_answer_bytes": model.max_answer_bytes,
            "fallbacks": [{"name": f.name, "api_mode": f.api_mode} for f in model.fallbacks],
            "timeouts": {
                "connect": model.timeouts.connect,
                "first_token": model.timeouts.first_token,
                "idle": model.timeouts.idle,
                "request": model.timeouts.request,
                "total": model.timeouts.total,
            },
            "context_window": model.context_window,
        },
        "agent": {
            "system_prompt": agent.system_prompt,
            "max_iterations": agent.max_iterations,
            "long_tool_hint": agent.long_tool_hint,
            "think_tags": list(agent.think_tags),
            "channel_size": agent.channel_size,
        },
        "compaction": {
            "enabled": compaction.enabled,
            "threshold": compaction.threshold,
            "keep_recent": compaction.keep_recent,
            "summary_timeout": compaction.summary_timeout,
            "summary_max_tokens": compaction.summary_max_tokens,
            "default_window": compaction.default_window,
        },
    }
    if context is not None:
        settings["context"] = context
    return settings


def _snapshot(value: Any) -> Any:
    # The history grows in place as the turn runs: keep it as it was asked.
    return json.loads(json.dumps(value, default=str))


@contextlib.contextmanager
def record_turn(
    recorder: Recorder | None,
    config: Config,
    messages: Sequence[Message],
    options: RecordedOptions,
    send: trio.MemorySendChannel[StreamEvent],
    context: RecordedContext | None = None,
) -> Iterator[trio.MemorySendChannel[StreamEvent]]:
    """Record the turn run in this block (nothing without ``recorder``):
    use the channel it gives for the turn's events."""
    if recorder is None:
        yield send
        return
    tape = Tape(
        {
            "messages": _snapshot(list(messages)),
            "options": _snapshot(dict(options)),
            "settings": turn_settings(config, context),
        },
        max_bytes=recorder.max_file_bytes,
    )
    token = _TAPE.set(tape)
    outcome = "finished"
    try:
        yield cast("trio.MemorySendChannel[StreamEvent]", _RecordingSend(send, tape))
    except BaseException as exc:
        if _cancelled(exc):
            cause = CANCEL_CAUSE.get()
            tape.cancel((cause() if cause else None) or "cancelled")
            outcome = "cancelled"
        else:
            outcome = f"raised {type(exc).__name__}"
        raise
    finally:
        _TAPE.reset(token)
        try:
            recorder.save(serialize(tape.document(outcome)))
        except OSError as exc:
            log.warning("could not write a turn recording in %s: %s", recorder.directory, exc)


def _cancelled(exc: BaseException) -> bool:
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(_cancelled(e) for e in exc.exceptions)
    return False
