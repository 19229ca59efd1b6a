"""Running one agent turn for a request: its own cancel scope and nursery,
with the agent task and one consumer task as siblings ("The turn" in
docs/architecture.md).

The turn runs in the server's long-lived nursery rather than in the request
task, so the request handler can wait for the first output (and still answer
a failure with a JSON status) before the response starts; the request side
cancels the turn's scope when its client goes away.

Chat and Responses turns start the same way (:func:`start_turn`): each
holds a :class:`TurnSlots` slot until it has ended, and sits in the
server's registry of running turns, which a shutdown cancels with its
reason, so ``max_concurrent``, ``/health``, the shutdown grace and the
shutdown's last words cover both.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import trio

from ..agent import Agent, TurnResult
from ..events import StreamEvent, TurnFinished, Usage
from .errors import APIError

__all__ = [
    "INTERNAL_ERROR",
    "RunningTurn",
    "TurnBody",
    "TurnRequest",
    "TurnSlots",
    "agent_turn",
    "crash_result",
    "run_with_consumer",
    "start_turn",
    "turn_options",
]

log = logging.getLogger("hermes_trio.server")

Consumer = Callable[[trio.MemoryReceiveChannel[StreamEvent]], Awaitable[None]]


@dataclass(eq=False)
class RunningTurn:
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    done: trio.Event = field(default_factory=trio.Event)
    result: TurnResult | None = None
    """How the turn ended (a crash too); None when it was cancelled."""
    interrupted: str | None = None

    def cancel(self, reason: str) -> None:
        if not self.done.is_set():
            self.interrupted = self.interrupted or reason
            self.scope.cancel()

    async def stop(self, reason: str, *, grace: float = 5.0) -> None:
        """Cancel and wait until its tasks are gone."""
        self.cancel(reason)
        with trio.move_on_after(grace):
            await self.done.wait()


class TurnSlots:
    """At most ``limit`` turns at once; beyond that, 429 at once (no queue)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._semaphore = trio.Semaphore(limit)
        self._idle = trio.Event()
        self._idle.set()

    @property
    def in_use(self) -> int:
        return self.limit - self._semaphore.value

    def acquire(self) -> None:
        try:
            self._semaphore.acquire_nowait()
        except trio.WouldBlock:
            raise APIError(
                429,
                f"too many turns running at once (limit {self.limit}); retry shortly",
                code="rate_limit_exceeded",
                headers={"Retry-After": "1"},
            ) from None
        if self._idle.is_set():
            self._idle = trio.Event()

    def release(self) -> None:
        self._semaphore.release()
        if self.in_use == 0:
            self._idle.set()

    async def wait_idle(self) -> None:
        """Return once no turn is running."""
        while not self._idle.is_set():
            await self._idle.wait()


class TurnRequest(Protocol):
    """What a chat or Responses request says about how to run its turn."""

    @property
    def model(self) -> str | None: ...

    @property
    def system(self) -> str | None: ...

    @property
    def tools(self) -> list[dict[str, Any]]: ...

    @property
    def params(self) -> dict[str, Any]: ...


def turn_options(
    agent: Agent, req: TurnRequest, request_stream: bool | None
) -> tuple[str, dict[str, Any]]:
    """The model name the response reports, and the keyword arguments of
    ``Agent.run_turn`` for ``req``'s turn (``request_stream`` as
    ``Agent.streams`` takes it)."""
    api = agent.config.api_server
    kwargs: dict[str, Any] = {
        "stream": agent.streams("api_server", request_stream),
        "client_tools": req.tools,
        "params": req.params,
        # Unless overrides are allowed, the configured model answers whatever
        # name the client sent; the response still reports that name.
        "model": req.model if (api.allow_model_override and req.model) else None,
        "system": req.system,
    }
    return req.model or api.model_name, kwargs


INTERNAL_ERROR = "internal_error"
"""``error_code`` of a turn that crashed: a bug, not a model failure."""


def crash_result(exc: BaseException) -> TurnResult:
    """How a turn that raised ``exc`` ends. Only the exception's type is
    named: its text may hold anything (a path, a secret from a tool)."""
    leaf = exc
    while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
        leaf = leaf.exceptions[0]
    message = (
        f"internal error: the turn failed ({type(leaf).__name__}); the server log has the details"
    )
    return TurnResult("", Usage(), "error", error=message, error_code=INTERNAL_ERROR)


def _split_crash(exc: BaseException) -> tuple[BaseException | None, BaseException | None]:
    """``exc`` as (the crash, the cancellation): a turn cancelled at the
    moment it crashed raises both in one group."""
    if isinstance(exc, BaseExceptionGroup):
        cancelled, rest = exc.split(trio.Cancelled)
        return rest, cancelled
    if isinstance(exc, Exception):
        return exc, None
    return None, exc


async def run_with_consumer(
    turn: RunningTurn,
    agent: Agent,
    messages: list[dict[str, Any]],
    consumer: Consumer,
    kwargs: dict[str, Any],
) -> None:
    """Run ``turn``'s agent and ``consumer`` side by side in the turn's scope.

    One crash policy for every turn: an exception out of the agent or the
    consumer is logged once with its traceback, ends the turn with
    :func:`crash_result` (``turn.result``) and never leaves this function.
    A crashing agent's ending is sent to the consumer as the turn's last
    event, so the client hears it like any other failure; a crashing
    consumer is gone, so whoever reads its output must say it.
    """
    try:
        with turn.scope:
            send, receive = trio.open_memory_channel[StreamEvent](agent.config.agent.channel_size)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(consumer, receive)
                await _run_agent(turn, agent, messages, send, kwargs)
    except BaseException as exc:
        crash, cancelled = _split_crash(exc)
        if crash is None:
            raise
        _record_crash(turn, crash)
        if cancelled is not None:
            raise cancelled from None


async def _run_agent(
    turn: RunningTurn,
    agent: Agent,
    messages: list[dict[str, Any]],
    send: trio.MemorySendChannel[StreamEvent],
    kwargs: dict[str, Any],
) -> None:
    # Synchronous close: the crash's ending must reach the consumer before
    # its channel ends, and `async with` could replace an error with
    # Cancelled. The agent closes its clone; ours stays open for that ending.
    with send:
        try:
            turn.result = await agent.run_turn(messages, send.clone(), **kwargs)
            return
        except BaseException as exc:
            crash, cancelled = _split_crash(exc)
            if crash is None:
                raise
            end = _record_crash(turn, crash)
            if cancelled is not None:
                raise cancelled from None
        with contextlib.suppress(trio.BrokenResourceError):
            await send.send(
                TurnFinished("", end.usage, "error", error=end.error, error_code=end.error_code)
            )


def _record_crash(turn: RunningTurn, exc: BaseException) -> TurnResult:
    log.error("a turn failed unexpectedly", exc_info=exc)
    turn.result = crash_result(exc)
    return turn.result


TurnBody = Callable[[RunningTurn], Awaitable[None]]
"""What a turn does, given its :class:`RunningTurn`: it must run the agent
in the turn's scope (``run_with_consumer`` does) and may do more around it
(record the turn's end); it is done once it returns."""


def agent_turn(
    agent: Agent, messages: list[dict[str, Any]], consumer: Consumer, kwargs: dict[str, Any]
) -> TurnBody:
    """The plain turn: ``agent`` over ``messages``, events to ``consumer``."""
    return lambda turn: run_with_consumer(turn, agent, messages, consumer, kwargs)


async def _run(
    turn: RunningTurn,
    body: TurnBody,
    on_exit: Callable[[], None],
    registry: set[RunningTurn],
) -> None:
    try:
        await body(turn)
    finally:
        registry.discard(turn)
        on_exit()
        turn.done.set()


def start_turn(
    nursery: trio.Nursery,
    body: TurnBody,
    *,
    on_exit: Callable[[], None] = lambda: None,
    registry: set[RunningTurn] | None = None,
) -> RunningTurn:
    """Start a turn running ``body`` in ``nursery``. ``registry`` holds it
    until it ends (so a shutdown can find it) and ``on_exit`` runs then (to
    give back its slot); cancelling it before its task first runs is fine.

    ``start_soon`` rather than ``start``: waiting for the task to report in
    would cost the request a scheduler pass before its first token.
    """
    registry = registry if registry is not None else set()
    turn = RunningTurn()
    registry.add(turn)
    nursery.start_soon(partial(_run, turn, body, on_exit, registry))
    return turn
