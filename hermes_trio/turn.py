"""One agent turn, the way every runner starts it.

A turn is the agent and one consumer running side by side in the turn's own
nursery, inside the turn's own cancel scope, joined by a bounded channel of
:data:`~hermes_trio.events.StreamEvent` (``agent.channel_size`` events, so a
slow consumer slows the upstream read instead of growing memory). The
agent's side of the channel is closed synchronously when it is done, so the
consumer always sees the end of the stream, after ``TurnFinished``.

:class:`Turn` is the handle: ``cancel(reason)`` stops the whole turn (the
upstream request is closed, tool processes are killed, the consumer is
cancelled and finishes its last write in its own shielded cleanup); ``done``
is set once its tasks are gone; ``result`` says how it ended. A tool call
that waits for a person's approval (:mod:`hermes_trio.approvals`, asked
when the turn is given ``approvals=ApprovalChannel(...)`` or a callback)
waits inside the same scope: cancelling the turn ends the question
``cancelled``, and none outlives the turn.

One crash policy for every turn. An exception out of the agent, a tool or
the consumer is a bug, not a model failure: it is logged once with its
traceback (logger ``hermes_trio.turn``), the turn's result is
:func:`crash_result` (``error_code="internal_error"``), a consumer still
alive gets the same ending as its last event
(``TurnFinished(error=..., error_code="internal_error")``), and the
exception goes no further, so a server, a gateway or a terminal keeps
serving. Cancellation is no crash and propagates as usual.

Three ways to run one::

    import trio

    import hermes_trio
    from hermes_trio import StreamEvent, open_turn, run_turn, start_turn

    async def show(events: trio.MemoryReceiveChannel[StreamEvent]) -> None:
        async for event in events:
            if isinstance(event, hermes_trio.MessageChunk):
                print(event.text, end="", flush=True)

    async def main() -> None:
        async with hermes_trio.open_agent() as agent:
            # Wait for it; the history list is extended in place.
            history = [{"role": "user", "content": "Hi!"}]
            result = await run_turn(agent, history, show)
            print(f" ({result.finish_reason})")

            # In the background, stopped if it takes too long.
            async with trio.open_nursery() as nursery:
                turn = start_turn(nursery, agent, "Count to a million.", show)
                with trio.move_on_after(10):
                    await turn.done.wait()
                turn.cancel(hermes_trio.CancelCause.TIMEOUT)  # "took too long"
            print(f" ({turn.result.finish_reason}: {turn.interrupted})")

            # Or read its events in this task, as Agent.turn does.
            async with open_turn(agent, "What is 2 + 2?") as events:
                async for event in events:
                    if isinstance(event, hermes_trio.TurnFinished):
                        print(event.text)

    trio.run(main)
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableSet, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack

import trio

from . import metrics
from .config import Config
from .endings import CancelCause, ErrorCode, FinishReason
from .events import StreamEvent, TurnFinished, Usage
from .recording.recorder import CANCEL_CAUSE

if TYPE_CHECKING:
    from .approvals import ApprovalChannel
    from .recording import Recorder
    from .tools import ToolContext
    from .wire.chat_chunks import ToolCall

from .wire.context import ContextPolicy
from .wire.messages import ChatTool, ChatToolCall, Message

__all__ = [
    "INTERNAL_ERROR",
    "Consumer",
    "HeldCall",
    "HeldCalls",
    "TokenMeter",
    "Turn",
    "TurnEvents",
    "TurnOptionFields",
    "TurnOptions",
    "TurnResult",
    "TurnRunner",
    "crash_result",
    "open_turn",
    "resolve_options",
    "run_turn",
    "start_turn",
]

log = logging.getLogger("hermes_trio.turn")

INTERNAL_ERROR = ErrorCode.INTERNAL_ERROR
"""``error_code`` of a turn that crashed: a bug, not a model failure."""

Consumer = Callable[[trio.MemoryReceiveChannel[StreamEvent]], Awaitable[object]]
"""Reads one turn's events; runs beside the agent in the turn's nursery.
The channel is closed for it when it returns."""


@dataclass
class TurnResult:
    """How a turn ended. ``text`` is the last step's text (as in
    ``TurnFinished``); ``answer`` is every step's text as a Chat Completions
    stream shows it, the steps separated by a blank line."""

    text: str
    usage: Usage
    finish_reason: FinishReason
    tool_calls: tuple[ChatToolCall, ...] = ()
    error: str | None = None
    error_code: str | None = None
    model_status: int | None = None
    added: list[Message] = field(default_factory=list)
    answer: str = ""
    compacted: bool = False
    """The turn replaced the start of the conversation (a compaction): the
    list it was given is a new base, to be stored whole, not appended to."""


class TurnEvents:
    """Async iterator over a turn's events that takes whatever is already
    waiting without a scheduler pass.

    ``MemoryReceiveChannel.receive`` checkpoints even when an event is ready,
    so a plain ``async for`` wakes its task once per token; this iterator
    waits only when the channel is empty. The channel holds at most
    ``agent.channel_size`` events, which bounds the run between checkpoints.
    """

    __slots__ = ("receive",)

    def __init__(self, receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
        self.receive = receive

    def __aiter__(self) -> TurnEvents:
        return self

    async def __anext__(self) -> StreamEvent:
        try:
            return self.receive.receive_nowait()
        except trio.WouldBlock:
            pass
        except trio.EndOfChannel:
            raise StopAsyncIteration from None
        try:
            return await self.receive.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


class TokenMeter:
    """The model's deltas of one turn, counted as they arrive (about a
    token each): what a turn cut off before the model server reported its
    usage still cost. A caller that charges for turns passes one in the
    turn's options (``meter=``)."""

    __slots__ = ("tokens",)

    def __init__(self) -> None:
        self.tokens = 0

    def spent(self, usage: Usage | None) -> int:
        """The turn's completion tokens: the model server's count where it
        gave one, else (or where it says less, for a turn cut off in a
        later step) the deltas counted here."""
        reported = usage.completion_tokens if usage is not None else 0
        return max(reported, self.tokens)


@dataclass(frozen=True)
class HeldCall:
    """A tool call an earlier turn held for a person's approval
    (``ApprovalChannel.defer``), now answered: ``refusal`` None runs it,
    approved; else the model reads ``refusal`` as its result."""

    call: ToolCall
    refusal: str | None = None


@dataclass(frozen=True)
class HeldCalls:
    """The held calls a turn settles before it asks the model again; their
    results go into the conversation at ``position`` (right after the
    results the earlier turn has, before what the new request adds)."""

    position: int
    calls: tuple[HeldCall, ...]


@dataclass(frozen=True)
class TurnOptions:
    """How one turn runs (what :meth:`hermes_trio.Agent.run_turn` takes
    beside the conversation and the channel).

    ``client_tools`` are OpenAI tool definitions the caller executes itself
    (the turn ends with ``finish_reason "tool_calls"`` when the model calls
    one); ``params`` are extra sampling parameters for the model request;
    ``model`` and ``system`` override the configured model name and add to
    the system prompt. ``tool_context`` is the session's tool context (a
    fresh one by default); ``meter`` counts the model's deltas as they
    arrive; ``approvals`` lets the turn ask the person it runs for;
    ``held`` are calls an earlier turn held, settled first; ``record``
    writes the turn to a file for replay (default: the agent's own)."""

    stream: bool = True
    # Sampling parameters are the client's own JSON.
    client_tools: Sequence[ChatTool] = ()
    params: dict[str, Any] | None = None
    model: str | None = None
    system: str | None = None
    tool_context: ToolContext | None = None
    meter: TokenMeter | None = None
    approvals: ApprovalChannel | None = None
    held: HeldCalls | None = None
    record: Recorder | None = None
    context: ContextPolicy | None = None
    """What to do when the conversation would not fit the model's window
    (None: compact, unless ``compaction.enabled`` is false)."""


class TurnOptionFields(TypedDict, total=False):
    """:class:`TurnOptions`' fields as keyword arguments (``run_turn(agent,
    messages, consumer, stream=False)``)."""

    stream: bool
    client_tools: Sequence[ChatTool]
    params: dict[str, Any] | None
    model: str | None
    system: str | None
    tool_context: ToolContext | None
    meter: TokenMeter | None
    approvals: ApprovalChannel | None
    held: HeldCalls | None
    record: Recorder | None
    context: ContextPolicy | None


def resolve_options(options: TurnOptions | None, fields: TurnOptionFields) -> TurnOptions:
    """``options`` (default: ``TurnOptions()``) with ``fields`` laid over them."""
    if options is None:
        return TurnOptions(**fields)
    return replace(options, **fields) if fields else options


class TurnRunner(Protocol):
    """What a turn runs: :class:`hermes_trio.Agent`, or anything shaped like
    it (the turn sits below the agent, so it names only this much of it)."""

    @property
    def config(self) -> Config: ...

    async def run_turn(
        self,
        messages: list[Message],
        send: trio.MemorySendChannel[StreamEvent],
        options: TurnOptions | None = None,
    ) -> TurnResult:
        """Run the turn over ``messages`` (extended in place), sending its
        events to ``send``."""
        ...


Messages = list[Message] | str


@dataclass(eq=False)
class Turn:
    """The handle of one turn; a turn runs once.

    ``result`` is None while the turn runs; once ``done`` is set it says how
    the turn ended: the agent's result, :func:`crash_result`, or
    ``finish_reason="interrupted"`` when the turn was cancelled first.
    """

    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    done: trio.Event = field(default_factory=trio.Event)
    result: TurnResult | None = None
    interrupted: str | None = None
    """Why the turn was cancelled (the first reason given), in words, if it was."""
    cause: CancelCause | None = None
    """Why the turn was cancelled, for code that decides on it, if it was."""
    _started: bool = field(default=False, init=False, repr=False)

    def cancel(
        self, reason: str | CancelCause = "cancelled", cause: CancelCause | None = None
    ) -> None:
        """Stop the turn (a no-op once it is done). Cancelling before it
        starts is fine: it then ends at once.

        ``reason`` is the words a person reads, or a :class:`CancelCause`
        (its :attr:`~CancelCause.words`); ``cause`` is ``reason``'s when it
        is one, else :attr:`CancelCause.INTERRUPTED`. The first cancel wins."""
        if self.done.is_set():
            return
        if not self.interrupted:
            if isinstance(reason, CancelCause):
                cause, reason = cause or reason, reason.words
            self.interrupted = reason
            self.cause = cause or CancelCause.INTERRUPTED
        self.scope.cancel()

    @property
    def cancel_called(self) -> bool:
        return self.scope.cancel_called

    async def stop(
        self, reason: str | CancelCause, *, grace: float = 5.0, cause: CancelCause | None = None
    ) -> None:
        """Cancel and wait (at most ``grace`` seconds) until its tasks are gone."""
        self.cancel(reason, cause)
        with trio.move_on_after(grace):
            await self.done.wait()

    def _start(self) -> None:
        if self._started:
            raise RuntimeError("a Turn runs once; make a new one for the next turn")
        self._started = True


def crash_result(exc: BaseException) -> TurnResult:
    """How a turn that raised ``exc`` ends. Only the exception's type is
    named: its text may hold anything (a path, a secret from a tool)."""
    leaf = exc
    while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
        leaf = leaf.exceptions[0]
    message = f"internal error: the turn failed ({type(leaf).__name__}); the log has the details"
    return TurnResult("", Usage(), "error", error=message, error_code=INTERNAL_ERROR)


async def run_turn(
    agent: TurnRunner,
    messages: Messages,
    consumer: Consumer,
    *,
    turn: Turn | None = None,
    options: TurnOptions | None = None,
    **fields: Unpack[TurnOptionFields],
) -> TurnResult:
    """Run one turn over ``messages`` (extended in place; a string is one
    user message) with ``consumer`` reading its events, and return how it
    ended. ``options`` (or single ``fields`` of them, laid over them: ``stream``,
    ``model``, ``system``, ``tool_context``, …) go to :meth:`Agent.run_turn`;
    pass ``turn`` to hold its handle (to cancel it from elsewhere). A crash
    ends it as the module doc says; a cancel from outside propagates."""
    turn = turn if turn is not None else Turn()
    opts = resolve_options(options, fields)
    try:
        return await _run(turn, agent, _as_messages(messages), consumer, opts)
    finally:
        turn.done.set()


TurnAround = Callable[[Turn, Callable[[], Awaitable[TurnResult]]], Awaitable[object]]
"""Code around a background turn: called as ``around(turn, run)``, it must
``await run()`` (which runs the turn) and may do more before and after; the
turn is done when it returns."""


def start_turn(
    nursery: trio.Nursery,
    agent: TurnRunner,
    messages: Messages,
    consumer: Consumer,
    *,
    registry: MutableSet[Turn] | None = None,
    on_exit: Callable[[], None] | None = None,
    around: TurnAround | None = None,
    options: TurnOptions | None = None,
    **fields: Unpack[TurnOptionFields],
) -> Turn:
    """Start a turn in ``nursery`` and return its handle at once.

    ``registry`` holds the turn until it ends (so a shutdown can find and
    cancel it) and ``on_exit`` runs then (to give back a slot); ``around``
    wraps it (see :data:`TurnAround`). Cancelling it before its task first
    runs is fine. ``start_soon`` rather than ``start``: waiting for the task
    to report in would cost a scheduler pass before the first token.
    """
    turn = Turn()
    if registry is not None:
        registry.add(turn)
    opts = resolve_options(options, fields)
    run = partial(_run, turn, agent, _as_messages(messages), consumer, opts)
    nursery.start_soon(_background, turn, run, around, registry, on_exit)
    return turn


@asynccontextmanager
async def open_turn(
    agent: TurnRunner,
    messages: Messages,
    *,
    turn: Turn | None = None,
    options: TurnOptions | None = None,
    **fields: Unpack[TurnOptionFields],
) -> AsyncIterator[TurnEvents]:
    """Run a turn in the background of this block, which reads its events
    (the block is the consumer); leaving the block early cancels the turn.

    The agent's crash reaches the block as its ``TurnFinished`` (the one
    policy); an exception raised by the block itself is the caller's own
    and propagates.
    """
    turn = turn if turn is not None else Turn()
    turn._start()
    opts = resolve_options(options, fields)
    history = _as_messages(messages)
    start = len(history)
    send, receive = trio.open_memory_channel[StreamEvent](agent.config.agent.channel_size)
    try:
        with turn.scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_produce, turn, agent, history, send, opts)
                with receive:
                    try:
                        yield TurnEvents(receive)
                    finally:
                        if turn.result is None:
                            turn.cancel("the turn's block ended before the turn")
    finally:
        _settle(turn, history, start)
        turn.done.set()


async def _background(
    turn: Turn,
    run: Callable[[], Awaitable[TurnResult]],
    around: TurnAround | None,
    registry: MutableSet[Turn] | None,
    on_exit: Callable[[], None] | None,
) -> None:
    try:
        if around is None:
            await run()
        else:
            await around(turn, run)
    except Exception as exc:
        # The turn itself never raises one; this is the code around it.
        # Whatever it was, it must not take the caller's nursery down.
        _record_crash(turn, exc, "code around the turn")
    finally:
        if registry is not None:
            registry.discard(turn)
        if on_exit is not None:
            on_exit()
        turn.done.set()


async def _run(
    turn: Turn,
    agent: TurnRunner,
    messages: list[Message],
    consumer: Consumer,
    options: TurnOptions,
) -> TurnResult:
    """The turn itself, up to its result; whoever calls this sets ``done``."""
    turn._start()
    start = len(messages)
    began = trio.current_time()
    metrics.ACTIVE_TURNS.inc()
    try:
        with turn.scope:
            send, receive = trio.open_memory_channel[StreamEvent](agent.config.agent.channel_size)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_consume, consumer, receive)
                await _produce(turn, agent, messages, send, options)
    except BaseException as exc:
        crash, rest = _split_crash(exc)
        if crash is None:
            raise
        # The agent reports its own crash, so this is the consumer's.
        _record_crash(turn, crash, "consumer")
        if rest is not None:
            raise rest from None
    finally:
        _settle(turn, messages, start)
        metrics.ACTIVE_TURNS.dec()
        _count(turn, began)
    assert turn.result is not None
    return turn.result


def _count(turn: Turn, began: float) -> None:
    """The turn's figures, once, as it ends."""
    result = turn.result
    if result is None:
        return
    metrics.TURNS.labels(
        metrics.turn_outcome(result.finish_reason, result.error_code, turn.cause)
    ).inc()
    metrics.TURN_DURATION.observe(trio.current_time() - began)
    if result.usage.completion_tokens:
        metrics.TOKENS_OUT.inc(result.usage.completion_tokens)


async def _consume(consumer: Consumer, receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
    # Closed however the consumer ends, so the agent never waits on a reader
    # that is gone (it then sees BrokenResourceError and stops).
    with receive:
        await consumer(receive)


async def _produce(
    turn: Turn,
    agent: TurnRunner,
    messages: list[Message],
    send: trio.MemorySendChannel[StreamEvent],
    options: TurnOptions,
) -> None:
    # Synchronous close: the crash's ending must reach the consumer before
    # its channel ends, and `async with` could replace an error with
    # Cancelled at close. The agent gets a clone (closed here too, should a
    # crash leave it open); ours stays open for that ending.
    with send:
        # The recording of a cancelled turn names why (``--record``).
        CANCEL_CAUSE.set(lambda: turn.interrupted)
        try:
            with send.clone() as agents:
                turn.result = await agent.run_turn(messages, agents, options=options)
            return
        except BaseException as exc:
            crash, rest = _split_crash(exc)
            if crash is None:
                raise
            end = _record_crash(turn, crash, "agent")
            if rest is not None:
                raise rest from None
        with contextlib.suppress(trio.BrokenResourceError):
            await send.send(
                TurnFinished("", end.usage, "error", error=end.error, error_code=end.error_code)
            )


def _split_crash(exc: BaseException) -> tuple[BaseException | None, BaseException | None]:
    """``exc`` as (the crash, the rest): a turn cancelled at the moment it
    crashed raises both in one group. Only ``Exception`` is a crash;
    ``Cancelled``, ``KeyboardInterrupt`` and the like are the rest."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(Exception)
    if isinstance(exc, Exception):
        return exc, None
    return None, exc


def _record_crash(turn: Turn, exc: BaseException, where: str) -> TurnResult:
    log.error("a turn crashed in its %s", where, exc_info=exc)
    turn.result = crash_result(exc)
    return turn.result


def _settle(turn: Turn, messages: list[Message], start: int) -> None:
    """A turn that ended without a result was cancelled first."""
    if turn.result is None:
        turn.result = TurnResult("", Usage(), "interrupted", added=messages[start:])
    elif not turn.result.added and turn.result.error_code == INTERNAL_ERROR:
        turn.result.added = messages[start:]


def _as_messages(messages: Messages) -> list[Message]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    return messages
