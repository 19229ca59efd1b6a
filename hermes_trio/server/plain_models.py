"""Plain model routes (``api_server.upstream_models: true``): the model
server's own models, listed beside the agent in ``/v1/models``, and a chat
request naming one of them passed straight through — no agent, no system
prompt, no server-side tools; the client's messages, tools and parameters
go to the model server as they came, and its answer comes back as it was
sent, streamed or not. Frontends use them for their background chores
(titles, tags, follow-up questions) without running the agent.

A relay runs in the server's turns nursery, in a slot like a turn: the
upstream read feeds a small channel the response body reads, so a slow
client slows the upstream read, and a client that goes away cancels the
relay, which closes the upstream request at once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import trio
from quart import Response

from ..llm.endpoints import endpoint
from ..llm.http_body import open_body
from .bodies import StreamedBody, json_response, sse_response
from .errors import APIError
from .state import ServerState

__all__ = ["PlainModels", "relay"]

log = logging.getLogger("hermes_trio.server")

# How long the list of the model server's models is trusted.
LIST_TTL = 60.0
# What a non-streamed answer or an error body may weigh.
MAX_PLAIN_BYTES = 16 * 1024 * 1024


@dataclass
class PlainModels:
    """The model server's models, fetched on demand and kept for
    :data:`LIST_TTL` seconds; an unreachable server lists none (logged once
    per outage)."""

    state: ServerState
    _cards: list[dict[str, Any]] = field(default_factory=list)
    _until: float = float("-inf")
    _failing: bool = False
    _lock: trio.Lock = field(default_factory=trio.Lock)

    async def cards(self) -> list[dict[str, Any]]:
        async with self._lock:
            if trio.current_time() < self._until:
                return self._cards
            try:
                listed = await self.state.agent.client.models()
            except (httpx.HTTPError, ValueError) as exc:
                if not self._failing:
                    log.warning("cannot list the model server's models (%s)", exc)
                self._failing = True
                listed = []
            else:
                self._failing = False
            own = self.state.settings.model_name
            self._cards = [
                {
                    "id": card["id"],
                    "object": "model",
                    "created": card.get("created") if isinstance(card.get("created"), int) else 0,
                    "owned_by": str(card.get("owned_by") or "model-server"),
                }
                for card in listed
                if isinstance(card.get("id"), str) and card["id"] != own
            ]
            self._until = trio.current_time() + LIST_TTL
            return self._cards

    async def names(self) -> set[str]:
        return {card["id"] for card in await self.cards()}


class _RelayBody(StreamedBody):
    def __init__(
        self, first: bytes, pieces: trio.MemoryReceiveChannel[bytes], scope: trio.CancelScope
    ) -> None:
        super().__init__(scope.cancel)
        self._first: bytes | None = first
        self._pieces = pieces
        self._scope = scope

    def close(self) -> None:
        self._scope.cancel()
        self._pieces.close()

    async def __anext__(self) -> bytes:
        if self._first is not None:
            first, self._first = self._first, None
            return first
        try:
            piece = await self._pieces.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None
        # Whatever else is already waiting goes in the same write.
        more = [piece]
        while True:
            try:
                more.append(self._pieces.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
        return b"".join(more)


@dataclass
class _Head:
    status: int
    content_type: str
    first: bytes


async def relay(state: ServerState, body: dict[str, Any]) -> Response:
    """Pass one chat request to the model server and its answer back."""
    head, pieces, scope = await state.nursery.start(_relay_task, state, body)
    if head.status != 200 or not body.get("stream"):
        # Already whole: the task read it all and ended.
        return _whole(head)
    return sse_response(_RelayBody(head.first, pieces, scope))


def _whole(head: _Head) -> Response:
    if head.status == 200 or head.content_type.startswith("application/json"):
        try:
            return json_response(orjson.loads(head.first), status=head.status)
        except orjson.JSONDecodeError:
            pass
    raise APIError(
        502,
        f"the model server answered {head.status} with a body that is not JSON",
        code="bad_upstream_response",
    )


async def _relay_task(
    state: ServerState,
    body: dict[str, Any],
    *,
    task_status: trio.TaskStatus[tuple[_Head, trio.MemoryReceiveChannel[bytes], trio.CancelScope]],
) -> None:
    # A slot like a turn's (429 when none is free), given back as this ends.
    state.slots.acquire()
    config = state.agent.config.model
    url = endpoint(config.base_url or "", "/chat/completions")
    headers = {"Content-Type": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    send, receive = trio.open_memory_channel[bytes](4)
    timeouts = config.timeouts
    reported = False
    try:
        with trio.CancelScope() as scope, send:
            try:
                with trio.fail_after(timeouts.first_token):
                    request = state.agent.client.http.stream(
                        "POST", url, content=orjson.dumps(body), headers=headers
                    )
                    async with request as response, open_body(response) as pieces:
                        content_type = response.headers.get("Content-Type", "")
                        if response.status_code != 200 or not body.get("stream"):
                            whole = await _read_all(pieces)
                            reported = True
                            task_status.started(
                                (_Head(response.status_code, content_type, whole), receive, scope)
                            )
                            return
                        first = await anext(pieces, b"")
                        reported = True
                        task_status.started((_Head(200, content_type, first), receive, scope))
                        while True:
                            with trio.fail_after(timeouts.idle):
                                piece = await anext(pieces, None)
                            if piece is None:
                                return
                            await send.send(piece)
            except (trio.TooSlowError, httpx.HTTPError) as exc:
                if not reported:
                    status, code = (
                        (504, "upstream_timeout")
                        if isinstance(exc, trio.TooSlowError | httpx.TimeoutException)
                        else (502, "upstream_unreachable")
                    )
                    raise APIError(
                        status, f"the model server failed: {type(exc).__name__}", code=code
                    ) from None
                log.info("plain model route: the upstream stream ended early (%s)", exc)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
    finally:
        state.slots.release()


async def _read_all(pieces: Any) -> bytes:
    whole = bytearray()
    async for piece in pieces:
        whole += piece
        if len(whole) > MAX_PLAIN_BYTES:
            raise APIError(
                502, "the model server's answer is too large", code="bad_upstream_response"
            )
    return bytes(whole)
