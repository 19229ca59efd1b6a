"""A model server in memory, for timing tests of the model client on
trio's MockClock: an httpx transport whose response bodies arrive piece by
piece at scripted virtual times, and may then hang for ever.

Real sockets and an autojumping MockClock do not mix (socket waits count as
idle and the clock jumps past every timeout), so tests that assert *when*
the client gives up use this instead of the scripted model server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import trio

from hermes_trio.config import ModelConfig
from hermes_trio.llm import ModelClient

__all__ = ["Timed", "TimedUpstream", "chunk", "sse"]


def sse(payload: Any) -> bytes:
    """One SSE event: ``data: <json>`` (strings are sent as they are)."""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {data}\n\n".encode()


def chunk(content: str | None = None, finish: str | None = None, **delta: Any) -> bytes:
    """A Chat Completions chunk for choice 0."""
    if content is not None:
        delta["content"] = content
    return sse(
        {
            "id": "chatcmpl-timed",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


@dataclass
class Timed:
    """One answer: ``pieces`` as (seconds after the request, bytes); then the
    body ends, or with ``hang`` the connection stays open and silent."""

    pieces: Sequence[tuple[float, bytes]] = ()
    hang: bool = False
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "text/event-stream"})


class _Body(httpx.AsyncByteStream):
    # An iterator class, not an async generator: a generator left early is
    # finalised by the garbage collector with a ResourceWarning.
    def __init__(self, answer: Timed, upstream: TimedUpstream) -> None:
        self.answer = answer
        self.upstream = upstream
        self.start = trio.current_time()
        self.next = 0
        self.closed = False

    def __aiter__(self) -> _Body:
        return self

    async def __anext__(self) -> bytes:
        if self.closed:
            # As a closed socket: nothing more arrives.
            raise httpx.ReadError("the connection was closed")
        if self.next < len(self.answer.pieces):
            at, piece = self.answer.pieces[self.next]
            self.next += 1
            await trio.sleep_until(self.start + at)
            return piece
        if self.answer.hang:
            await trio.sleep_forever()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self.closed = True
        self.upstream.closed.append(trio.current_time())


class TimedUpstream:
    """Answers model requests from ``answers`` in order; records each
    request's JSON body and when every response body was closed."""

    def __init__(
        self,
        answers: Sequence[Timed | Callable[[httpx.Request], httpx.Response]],
    ) -> None:
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []
        self.closed: list[float] = []

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content) if request.content else {})
        answer = self.answers.pop(0)
        if not isinstance(answer, Timed):
            return answer(request)
        return httpx.Response(answer.status, headers=answer.headers, stream=_Body(answer, self))

    def client(self, **model: Any) -> tuple[ModelClient, httpx.AsyncClient]:
        """A model client (default timeouts unless given) on this upstream."""
        fields: dict[str, Any] = {
            "base_url": "http://upstream.test/v1",
            "name": "timed",
            "max_retries": 0,
        }
        fields.update(model)
        http = httpx.AsyncClient(transport=httpx.MockTransport(self.handle))
        return ModelClient(ModelConfig(**fields), http), http
