"""The part of a scripted model that does not care how requests arrive: the
script, the records of what arrived, waiting on them, and planning each
answer. The socket server and the in-process double are built on it."""

from __future__ import annotations

import inspect
import json
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Literal, TypeAlias

import trio

from ..script import (
    Drop,
    ErrorFrame,
    ErrorReply,
    JSONInsteadOfStream,
    RawReply,
    RefuseStream,
    Stall,
    Step,
    TextReply,
    ToolCallReply,
)
from .plan import API_BY_PATH, INVALID_JSON, Plan, plan_answer, too_long_plan
from .prompt_count import prompt_tokens
from .records import ConnectionRecord, RecordedRequest
from .turns import Turn

__all__ = ["Reply", "ReplyFunction", "ScriptedModel"]

#: Computes the answer to one model request from the request itself.
ReplyFunction: TypeAlias = Callable[[RecordedRequest], Step | Awaitable[Step]]
#: One entry of a script: a step, or a function that returns one.
Reply: TypeAlias = Step | ReplyFunction

_SERVER_NAME = b"hermes-trio-scripted"

_STEP_TYPES = (
    TextReply,
    ToolCallReply,
    ErrorReply,
    ErrorFrame,
    Stall,
    Drop,
    RefuseStream,
    JSONInsteadOfStream,
    RawReply,
)


def _check_reply(reply: object) -> None:
    # Fail in the test that scripted it, not later inside the serving task.
    if not (isinstance(reply, _STEP_TYPES) or callable(reply)):
        raise TypeError(f"not a script step or a function returning one: {reply!r}")


async def _resolve(reply: Reply, request: RecordedRequest) -> Step:
    if isinstance(reply, _STEP_TYPES):
        return reply
    step = reply(request)
    if inspect.isawaitable(step):
        step = await step
    if not isinstance(step, _STEP_TYPES):
        raise TypeError(f"reply function {reply!r} returned {step!r}, not a script step")
    return step


class ScriptedModel:
    """An OpenAI-compatible model whose answers come from a script.

    Each ``POST /v1/chat/completions`` or ``POST /v1/responses`` consumes the
    next entry (FIFO): a step, or a function that computes one from the
    :class:`RecordedRequest` (sync or async). An empty script falls back to
    ``default`` (a step or a function, never consumed), or a 500 "script
    exhausted" error so a test notices it asked more than it scripted.
    Every HTTP request (also ``GET /v1/models``) is appended to ``requests``;
    ``model_requests`` leaves out all but those two endpoints.

    ``record=False`` keeps nothing per request or connection (long benchmark
    runs); the ``wait_*`` helpers are then unavailable.

    ``context_window`` (tokens) makes it a model with that window: its
    ``GET /v1/models`` card says it (``max_model_len``, as vLLM's does), a
    request whose prompt counts more tokens (:func:`prompt_tokens`) is
    refused with a 400 ``context_length_exceeded`` before any script entry
    is taken, and its answers' usage counts the prompt the same way.
    """

    def __init__(
        self,
        script: Iterable[Reply] = (),
        *,
        default: Reply | None = None,
        model: str = "scripted-model",
        record: bool = True,
        context_window: int | None = None,
    ) -> None:
        if context_window is not None and context_window < 1:
            raise ValueError(
                f"context_window must be a positive number of tokens, not {context_window}"
            )
        self._script: deque[Reply] = deque()
        self.add(*script)
        if default is not None:
            _check_reply(default)
        self.default = default
        self.model = model
        self.record = record
        self.context_window = context_window
        self.requests: list[RecordedRequest] = []
        self.connections: list[ConnectionRecord] = []
        self._request_count = 0
        self._connection_count = 0
        self._response_count = 0
        self._request_arrived = trio.Event()
        self._closed_events: dict[int, trio.Event] = {}
        # id(step) -> (step, turn): a default reply served thousands of times
        # is tokenized and JSON-encoded once. Holding the step keeps its id
        # from being reused by another object.
        self._turn_cache: dict[int, tuple[Step, Turn]] = {}

    # -- script ------------------------------------------------------------

    def add(self, *steps: Reply) -> None:
        """Append steps (or reply functions) to the script."""
        for step in steps:
            _check_reply(step)
        self._script.extend(steps)

    @property
    def remaining(self) -> list[Reply]:
        """Script entries not consumed yet."""
        return list(self._script)

    @property
    def model_requests(self) -> list[RecordedRequest]:
        """The recorded requests to the chat completions and responses
        endpoints: ``requests`` without ``GET /v1/models`` and the like."""
        return [r for r in self.requests if r.path in API_BY_PATH]

    async def _take_step(self, request: RecordedRequest, streaming: bool) -> Step | None:
        if not self._script:
            return None if self.default is None else await _resolve(self.default, request)
        # Taken before a reply function runs: a concurrent request (while an
        # async one awaits) must not get the same entry.
        entry = self._script.popleft()
        try:
            step = await _resolve(entry, request)
        except BaseException:
            self._script.appendleft(entry)
            raise
        if streaming and isinstance(step, RefuseStream):
            # It stays at the head, so the client's non-streaming fallback
            # gets its reply.
            self._script.appendleft(entry)
        return step

    # -- waiting -----------------------------------------------------------

    async def wait_request(self, n: int = 1) -> RecordedRequest:
        """Wait until at least ``n`` requests were received; return the nth (1-based)."""
        if n < 1:
            raise ValueError("n is 1-based")
        if not self.record:
            raise RuntimeError("wait_request needs record=True")
        while len(self.requests) < n:
            await self._request_arrived.wait()
        return self.requests[n - 1]

    async def wait_connection_closed(self, connection_id: int | None = None) -> ConnectionRecord:
        """Wait until a connection is closed (by either side) and return its record.

        Default: the connection that served the most recent request (waiting
        for a first request if there was none).
        """
        if not self.record:
            raise RuntimeError("wait_connection_closed needs record=True")
        if connection_id is None:
            if not self.requests:
                await self.wait_request(1)
            connection_id = self.requests[-1].connection_id
        if not 1 <= connection_id <= len(self.connections):
            raise LookupError(f"no connection {connection_id}")
        await self._closed_events[connection_id].wait()
        return self.connections[connection_id - 1]

    # -- records -----------------------------------------------------------

    def _open_connection(self) -> ConnectionRecord:
        self._connection_count += 1
        record = ConnectionRecord(id=self._connection_count, opened_at=trio.current_time())
        if self.record:
            self.connections.append(record)
            self._closed_events[record.id] = trio.Event()
        return record

    def _mark_closed(self, record: ConnectionRecord, by: Literal["client", "server"]) -> None:
        if record.closed_at is None:
            record.closed_at = trio.current_time()
            record.closed_by = by
            event = self._closed_events.get(record.id)
            if event is not None:
                event.set()
            if not self.record:
                self._closed_events.pop(record.id, None)

    # -- answering ---------------------------------------------------------

    async def _answer(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        connection: ConnectionRecord,
    ) -> Plan:
        """Record one request and decide its whole response."""
        try:
            payload: Any = json.loads(body) if body else None
        except ValueError:
            payload = INVALID_JSON
        self._request_count += 1
        request = RecordedRequest(
            method=method,
            path=path,
            headers=headers,
            json=None if payload is INVALID_JSON else payload,
            connection_id=connection.id,
            received_at=trio.current_time(),
            body=body,
        )
        number = self._request_count
        if self.record:
            self.requests.append(request)
            # Wake every waiter, then arm a fresh event for the next request.
            self._request_arrived.set()
            self._request_arrived = trio.Event()
        step: Step | None = None
        window = self.context_window
        count: int | None = None
        too_long: Plan | None = None
        if API_BY_PATH.get(path) is not None and method == "POST" and isinstance(payload, dict):
            if window is not None:
                count = prompt_tokens(payload)
                if count > window:
                    too_long = too_long_plan(path, window, count)
            if too_long is None:
                step = await self._take_step(request, payload.get("stream") is True)
                request.step = step
        if step is not None:
            self._response_count += 1
        plan = too_long or plan_answer(
            method,
            path,
            payload,
            body,
            step,
            model=self.model,
            response_number=self._response_count,
            turn_cache=self._turn_cache,
            context_window=window,
            prompt_count=count,
        )
        plan.headers.append((b"server", _SERVER_NAME))
        plan.headers.append((b"x-request-id", f"req_scripted{number}".encode()))
        return plan
