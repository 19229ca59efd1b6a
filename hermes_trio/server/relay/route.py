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
relay, which closes the upstream request at once. Like a turn it holds the
request key's place until it ends, and its end charges the key the tokens
the answer cost (:class:`~hermes_trio.server.admission.turn_place.TurnPlace`).

The model server's key is this server's, never the client's: its errors
and error frames are redacted on their way (:mod:`hermes_trio.wire.relay`),
and its refusal of the key (401, 403) is a 502 naming the model server. A
stream the model server cut off (no ``[DONE]``) ends with an error frame.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import orjson
import trio
from quart import Response

from ...llm import ModelError
from ...redaction import shown_url
from ...wire.chat_types import ChatModel
from ...wire.relay import (
    CUT_CODE,
    RelayedStream,
    completion_tokens,
    error_message,
    redacted_json,
)
from ...wire.sse import SSEError
from ..admission.turn_place import TurnPlace
from ..edge.bodies import StreamedBody, json_response, sse_response
from ..parsing.errors import APIError
from ..state import ServerState

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
    _cards: list[ChatModel] = field(default_factory=list)
    _until: float = float("-inf")
    _failing: bool = False
    _lock: trio.Lock = field(default_factory=trio.Lock)

    async def cards(self) -> list[ChatModel]:
        async with self._lock:
            if trio.current_time() < self._until:
                return self._cards
            try:
                listed = await self.state.agent.client.models()
            except ModelError as exc:
                if not self._failing:
                    log.warning("cannot list the model server's models (%s)", exc.message)
                self._failing = True
                listed = []
            else:
                self._failing = False
            own = self.state.settings.model_name
            self._cards = [
                {
                    "id": name,
                    "object": "model",
                    "created": created if isinstance(created := card.get("created"), int) else 0,
                    "owned_by": str(card.get("owned_by") or "model-server"),
                }
                for card in listed
                if isinstance(name := card.get("id"), str) and name != own
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
    whole: bool
    """``first`` is the whole answer (not a stream's first events)."""


# The model server's answers that say it refused the key it was sent: the
# key is this server's, not the client's, so the client gets a 502.
_KEY_REFUSED = frozenset({401, 403})


async def relay(state: ServerState, body: dict[str, Any]) -> Response:
    """Pass one chat request to the model server and its answer back."""
    # The relay's place (a slot, the key's concurrency) is the relay task's as it
    # starts: given back as it ends, with the tokens the answer cost (or as
    # this block ends, for a task that never ran).
    async with TurnPlace() as place:
        place.take(state.slots)
        head, pieces, scope = await state.nursery.start(_relay_task, state, body, place)
    if head.whole:
        # The task read it all and ended.
        return _whole(head, _where(state))
    return sse_response(_RelayBody(head.first, pieces, scope))


def _where(state: ServerState) -> str:
    return shown_url(state.agent.config.model.base_url or "")


def _whole(head: _Head, where: str) -> Response:
    if head.status == 200:
        answer = _json(head.first)
        if answer is not None:
            return json_response(answer)
    else:
        # An error may quote the key this server sent: redacted, always.
        error = redacted_json(head.first)
        if head.status in _KEY_REFUSED:
            said = error_message(error) if error is not None else None
            raise APIError(
                502,
                f"the model server at {where} refused the API key hermes-trio sent it "
                f"(HTTP {head.status}{': ' + said if said else ''}); check model.api_key",
                code="upstream_auth_failed",
            )
        if error is not None and head.content_type.startswith("application/json"):
            return json_response(error, status=head.status)
    raise APIError(
        502,
        f"the model server at {where} answered {head.status} with a body that is not JSON",
        code="bad_upstream_response",
    )


def _json(raw: bytes) -> Any | None:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


async def _relay_task(
    state: ServerState,
    body: dict[str, Any],
    place: TurnPlace,
    *,
    task_status: trio.TaskStatus[tuple[_Head, trio.MemoryReceiveChannel[bytes], trio.CancelScope]],
) -> None:
    config = state.agent.config.model
    where = _where(state)
    send, receive = trio.open_memory_channel[bytes](4)
    timeouts = config.timeouts
    reported = False
    spent = 0
    stream: RelayedStream | None = None
    tail = b""
    # Given back by this task's end from here on.
    place.hand_off()
    try:
        with trio.CancelScope() as scope, send:
            try:
                # Until the first bytes go out; then only the idle limit.
                with trio.fail_after(timeouts.first_token) as first_deadline:
                    async with state.agent.client.relay(body) as answer:
                        pieces = answer.pieces
                        content_type = answer.headers.get("Content-Type", "")
                        status = answer.status
                        if (
                            status != 200
                            or not body.get("stream")
                            # A server that answers a stream request whole.
                            or content_type.startswith("application/json")
                        ):
                            whole = await _read_all(pieces)
                            if status == 200:
                                spent = completion_tokens(_json(whole))
                            reported = True
                            head = _Head(status, content_type, whole, whole=True)
                            task_status.started((head, receive, scope))
                            return
                        stream = RelayedStream(max_event=MAX_PLAIN_BYTES)
                        first = b""
                        while not first:
                            piece = await anext(pieces, None)
                            if piece is None:
                                raise APIError(
                                    502,
                                    f"the model server at {where} ended the stream before "
                                    "its first event",
                                    code=CUT_CODE,
                                )
                            first = stream.feed(piece)
                        reported = True
                        first_deadline.deadline = math.inf
                        head = _Head(200, content_type, first, whole=False)
                        task_status.started((head, receive, scope))
                        while True:
                            with trio.fail_after(timeouts.idle):
                                piece = await anext(pieces, None)
                            if piece is None:
                                break
                            out = stream.feed(piece)
                            if out:
                                await send.send(out)
                        tail = stream.end(
                            f"the model server at {where} ended the stream before its end ([DONE])"
                        )
            except (trio.TooSlowError, ModelError, SSEError) as exc:
                if not reported:
                    status, code = (
                        (504, "upstream_timeout")
                        if _timed_out(exc)
                        else (502, "upstream_unreachable")
                    )
                    raise APIError(
                        status, f"the model server failed: {_failure(exc)}", code=code
                    ) from None
                log.info("plain model route: the upstream stream ended early (%s)", exc)
                assert stream is not None
                message, code = _cut(where, exc, timeouts.idle)
                tail = stream.end(message, code=code)
            if tail:
                await send.send(tail)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        if stream is not None:
            spent = stream.spent
        place.release(spent)


def _timed_out(exc: Exception) -> bool:
    return isinstance(exc, trio.TooSlowError) or (isinstance(exc, ModelError) and exc.timed_out)


def _failure(exc: Exception) -> str:
    """The kind of failure, as the 5xx before any answer names it."""
    if isinstance(exc, ModelError):
        return exc.cause or exc.message
    return type(exc).__name__


def _cut(where: str, exc: Exception, idle: float) -> tuple[str, str]:
    """What the error frame says of a stream that broke off."""
    if _timed_out(exc):
        return (
            f"the model server at {where} went silent for {idle:g} s in the middle of "
            "its answer (model.timeouts.idle)",
            "upstream_timeout",
        )
    if isinstance(exc, SSEError):
        return f"the model server at {where} sent an event too large to relay", CUT_CODE
    if isinstance(exc, ModelError):
        # Its words: "the model server at … dropped the stream (ReadError: …)".
        return exc.message, CUT_CODE
    return f"the model server at {where} dropped the stream ({type(exc).__name__})", CUT_CODE


async def _read_all(pieces: Any) -> bytes:
    whole = bytearray()
    async for piece in pieces:
        whole += piece
        if len(whole) > MAX_PLAIN_BYTES:
            raise APIError(
                502, "the model server's answer is too large", code="bad_upstream_response"
            )
    return bytes(whole)
