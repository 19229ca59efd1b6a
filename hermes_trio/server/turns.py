"""What the server adds to a turn (:mod:`hermes_trio.turn` runs it).

A request's turn runs in the server's long-lived nursery rather than in the
request task (``hermes_trio.turn.start_turn``), so the request handler can
wait for the first output (and still answer a failure with a JSON status)
before the response starts; the request side cancels the turn when its
client goes away.

Chat and Responses turns start the same way: each holds a :class:`TurnSlots`
slot until it has ended, and sits in the server's registry of running turns,
which a shutdown cancels with its reason, so ``max_concurrent``,
``/health``, the shutdown grace and the shutdown's last words cover both.
"""

from __future__ import annotations

from typing import Any, Protocol

import trio

from ..agent import Agent
from ..config import ApiServerConfig
from .errors import APIError

__all__ = ["TurnRequest", "TurnSlots", "turn_options"]


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
    agent: Agent, settings: ApiServerConfig, req: TurnRequest, request_stream: bool | None
) -> tuple[str, dict[str, Any]]:
    """The model name the response reports, and the keyword arguments of
    ``Agent.run_turn`` for ``req``'s turn (``request_stream`` as
    ``Agent.streams`` takes it) under the server's ``settings``."""
    kwargs: dict[str, Any] = {
        "stream": agent.streams("api_server", request_stream),
        "client_tools": req.tools,
        "params": req.params,
        # Unless overrides are allowed, the configured model answers whatever
        # name the client sent; the response still reports that name.
        "model": req.model if (settings.allow_model_override and req.model) else None,
        "system": req.system,
    }
    return req.model or settings.model_name, kwargs
