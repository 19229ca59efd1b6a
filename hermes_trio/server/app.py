"""The quart-trio app: routes, auth and the turn plumbing; :func:`asgi_app`
puts the request gate (origin, host, content type, CORS) and the body
deadlines in front of it (:mod:`.front`).

Each chat request runs one agent turn (``hermes_trio.turn.start_turn``)
whose consumer is the SSE writer (streaming) or a collector (non-streaming).
Client disconnect cancels the request task; the ``finally`` blocks here then
cancel the turn, which closes the upstream stream and kills tool processes.
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import trio
from quart import Response, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from ..agent import Agent
from ..consumers.sse import (
    LastPiece,
    PreStreamError,
    SSEOptions,
    WriterOutput,
    write_chat_sse,
)
from ..events import StreamEvent
from ..serving.errors import error_body
from ..turn import INTERNAL_ERROR, Turn, TurnEvents, start_turn
from ..wire.chat_out import ChatStreamFrames, completion_body, new_completion_id
from .bodies import (
    StreamedBody,
    bearer_token,
    json_response,
    read_json_body,
    request_owner,
    sse_response,
    stream_extensions,
)
from .chat_request import ChatRequest, parse_chat_request
from .errors import APIError, error_status
from .front import Front
from .gate import GateSettings
from .responses_routes import register_responses_routes
from .sessions import SessionStore, new_messages, validate_session_id
from .store import ResponseStore, wall_clock
from .turns import TurnSlots, turn_options

__all__ = ["ServerState", "asgi_app", "create_app"]

log = logging.getLogger("hermes_trio.server")

@dataclass(eq=False)
class ServerState:
    agent: Agent
    nursery: trio.Nursery
    slots: TurnSlots
    sessions: SessionStore
    store: ResponseStore
    """The durable response store, opened by ``open_api_server``."""
    created: int = 0
    turns: set[Turn] = field(default_factory=set)
    """Every running turn, chat and Responses."""

    def stop_turns(self, reason: str) -> None:
        """Cancel every running turn; its stream ends saying ``reason``
        (a Responses stream with ``response.incomplete``)."""
        for turn in list(self.turns):
            turn.cancel(reason)


def create_app(state: ServerState) -> QuartTrio:
    config = state.agent.config
    api = config.api_server
    app = QuartTrio(__name__)
    # The one body size limit: Quart applies it to a declared length at
    # once and to a chunked body as it arrives.
    app.config["MAX_CONTENT_LENGTH"] = api.max_body_bytes
    # Quart would silently end a long stream after RESPONSE_TIMEOUT (60 s).
    app.config["RESPONSE_TIMEOUT"] = None
    # The front's body deadlines replace Quart's single total one.
    app.config["BODY_TIMEOUT"] = None

    @app.errorhandler(APIError)
    async def on_api_error(exc: APIError) -> Response:
        return json_response(exc.body(), exc.status, exc.headers)

    @app.errorhandler(HTTPException)
    async def on_http_error(exc: HTTPException) -> Response:
        status = exc.code or 500
        if status == 413:
            message = f"request body too large (limit {api.max_body_bytes} bytes)"
        elif status == 404:
            message = f"no such endpoint: {request.method} {request.path}"
        elif status == 405:
            message = f"method {request.method} not allowed for {request.path}"
        else:
            message = exc.description or exc.name
        return json_response(error_body(message, status=status), status)

    @app.errorhandler(Exception)
    async def on_unexpected(exc: Exception) -> Response:
        log.exception("unexpected error in %s %s", request.method, request.path)
        body = error_body(
            f"internal error: {type(exc).__name__}", status=500, code=INTERNAL_ERROR
        )
        return json_response(body, 500)

    @app.before_request
    async def check_key() -> None:
        if request.path.startswith("/v1") and api.key:
            if not hmac.compare_digest(bearer_token().encode(), api.key.encode()):
                raise APIError(
                    401,
                    "invalid or missing API key: send 'Authorization: Bearer <key>'",
                    code="invalid_api_key",
                )

    @app.get("/health")
    async def health() -> Response:
        return json_response({"status": "ok", "turns_running": state.slots.in_use})

    def model_card() -> dict[str, Any]:
        return {
            "id": api.model_name,
            "object": "model",
            "created": state.created,
            "owned_by": "hermes-trio",
        }

    @app.get("/v1/models")
    async def models() -> Response:
        return json_response({"object": "list", "data": [model_card()]})

    @app.get("/v1/models/<model_id>")
    async def model(model_id: str) -> Response:
        if model_id != api.model_name:
            raise APIError(
                404, f"model '{model_id}' does not exist", param="model", code="model_not_found"
            )
        return json_response(model_card())

    parse_chat = partial(parse_chat_request, extra=api.extra_params)

    @app.post("/v1/chat/completions")
    async def chat_completions() -> Response:
        return await _run_chat(state, await read_json_body(parse_chat))

    register_responses_routes(app, state)
    return app


def asgi_app(state: ServerState) -> Front:
    """The whole server as one ASGI app: the gate and the body deadlines in
    front of :func:`create_app`'s routes."""
    api = state.agent.config.api_server
    gate = GateSettings.of(
        key=api.key, allowed_hosts=api.allowed_hosts, cors_origins=api.cors_origins
    )
    return Front(
        create_app(state),
        gate,
        body_timeout=api.body_timeout,
        body_total_timeout=api.body_total_timeout,
    )


async def _run_chat(state: ServerState, chat: ChatRequest) -> Response:
    agent = state.agent
    # A streamed request streams from the model; for a plain one the config
    # decides (then the answer is assembled), as on /v1/responses.
    model, kwargs = turn_options(agent, chat, True if chat.stream else None)
    run = _ChatRun(
        state,
        chat,
        completion_id=new_completion_id(),
        created=int(wall_clock()),
        model=model,
        extensions=stream_extensions(),
    )
    session_id = request.headers.get("X-Session-ID")
    if session_id is None:
        state.slots.acquire()
        run.begin(list(chat.messages), kwargs)
        return await run.respond()
    validate_session_id(session_id)
    key = SessionStore.key(request_owner(), session_id)
    session = state.sessions.get_or_create(key, agent.new_tool_context)
    run.headers["X-Session-ID"] = session_id
    async with session.lock:
        if session.running is not None:
            await session.running.stop("interrupted by a newer request on this session")
        # Before the history changes: a request refused with 429 leaves it
        # as it was.
        state.slots.acquire()
        try:
            state.sessions.add(session, new_messages(session.messages, chat.messages))
        except BaseException:
            state.slots.release()
            raise
        kwargs["tool_context"] = session.tool_context
        session.running = run.begin(session.messages, kwargs)
    return await run.respond()


class _ChatRun:
    """One chat request's turn: started under the session lock, answered
    outside it, so a newer request can interrupt while this one waits."""

    def __init__(
        self,
        state: ServerState,
        chat: ChatRequest,
        *,
        completion_id: str,
        created: int,
        model: str,
        extensions: frozenset[str],
    ) -> None:
        self.state = state
        self.chat = chat
        self.completion_id = completion_id
        self.created = created
        self.model = model
        self.extensions = extensions
        self.headers: dict[str, str] = {}
        self.turn: Turn | None = None
        self.out: trio.MemoryReceiveChannel[WriterOutput] | None = None
        self.frames: ChatStreamFrames | None = None

    def begin(self, messages: list[dict[str, Any]], kwargs: dict[str, Any]) -> Turn:
        """Start the turn in the slot the caller acquired (released when the
        turn ends, or here when it cannot start)."""
        state = self.state
        try:
            if self.chat.stream:
                self.frames = frames = ChatStreamFrames(
                    self.completion_id,
                    self.created,
                    self.model,
                    include_usage=self.chat.include_usage,
                )
                out_send, self.out = trio.open_memory_channel[WriterOutput](4)
                options = SSEOptions(
                    keepalive=state.agent.config.api_server.keepalive_interval,
                    extensions=self.extensions,
                )

                async def consumer(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
                    await write_chat_sse(receive, out_send, frames, options)

            else:

                async def consumer(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
                    # The answer is the turn's result; the events only drain.
                    with receive:
                        async for _ in TurnEvents(receive):
                            pass

            self.turn = start_turn(
                state.nursery,
                state.agent,
                messages,
                consumer,
                on_exit=state.slots.release,
                registry=state.turns,
                **kwargs,
            )
        except BaseException:
            if self.turn is None:
                state.slots.release()
            raise
        return self.turn

    async def respond(self) -> Response:
        turn = self.turn
        assert turn is not None
        if self.out is not None:
            return await self._stream_response(turn, self.out)
        try:
            await turn.done.wait()
        finally:
            turn.cancel("client went away")
        end = turn.result
        if end is None or end.finish_reason == "interrupted":
            raise APIError(409, turn.interrupted or "the turn was interrupted", code="interrupted")
        if end.finish_reason == "error":
            raise APIError(
                error_status(end.error_code, end.model_status),
                end.error or "the model server failed",
                code=end.error_code,
            )
        body = completion_body(
            id=self.completion_id,
            created=self.created,
            model=self.model,
            content=end.answer if (end.answer or not end.tool_calls) else None,
            finish_reason=end.finish_reason,
            usage=end.usage,
            tool_calls=end.tool_calls,
        )
        return json_response(body, headers=self.headers)

    async def _stream_response(
        self, turn: Turn, out: trio.MemoryReceiveChannel[WriterOutput]
    ) -> Response:
        frames = self.frames
        assert frames is not None
        first: WriterOutput | None
        try:
            first = await out.receive()
        except trio.EndOfChannel:
            # The writer is gone without a word: cancelled, or it crashed.
            try:
                await turn.done.wait()
            except BaseException:
                turn.cancel("client went away")
                raise
            first = _untold_failure(turn, frames)
        except BaseException:
            turn.cancel("client went away")
            out.close()
            raise
        if isinstance(first, PreStreamError):
            out.close()
            raise APIError(
                error_status(first.code, first.model_status), first.message, code=first.code
            )
        response = sse_response(_StreamBody(first, out, turn, frames))
        response.headers.update(self.headers)
        return response


def _untold_failure(turn: Turn, frames: ChatStreamFrames) -> PreStreamError | None:
    """A turn that failed before its writer sent anything: still a plain
    JSON error. None when the stream must start and say how it ended."""
    end = turn.result
    if end is not None and end.finish_reason == "error" and not frames.started:
        return PreStreamError(end.error or "the turn failed", end.error_code, end.model_status)
    return None


def _untold_end(turn: Turn, frames: ChatStreamFrames) -> bytes:
    """The last frame of a stream whose writer stopped before its own last
    frame reached the body (it crashed, or was cancelled with its turn
    while that frame waited): the failure, or the interruption. The 200 is
    out, so it is always a frame; its numbering continues the writer's."""
    end = turn.result
    if end is not None and end.finish_reason == "error":
        message = end.error or "the turn failed"
        return frames.error(message, type="server_error", code=end.error_code)
    reason = turn.interrupted or (
        "the turn ended without an answer"
        if end is None or end.finish_reason == "interrupted"
        else "the stream ended before its last frames were written"
    )
    return frames.error(reason, type="interrupted", code="interrupted")


def _release(turn: Turn, out: trio.MemoryReceiveChannel[WriterOutput]) -> None:
    """Nobody reads the stream any more: stop the turn and its writer."""
    turn.cancel("client went away")
    out.close()


class _StreamBody(StreamedBody):
    """The SSE response body: bytes from the turn's writer, and the cancel
    of the turn when the response ends for any reason (client gone)."""

    def __init__(
        self,
        first: bytes | LastPiece | None,
        out: trio.MemoryReceiveChannel[WriterOutput],
        turn: Turn,
        frames: ChatStreamFrames,
    ) -> None:
        super().__init__(partial(_release, turn, out))
        self._pending: list[WriterOutput] = [first] if first is not None else []
        self._out = out
        self._turn = turn
        self._frames = frames
        self._told = False
        """The writer's terminal frame is in hand: the stream has its end."""

    def close(self) -> None:
        _release(self._turn, self._out)

    async def __anext__(self) -> bytes:
        items, self._pending = self._pending, []
        if not items:
            try:
                items.append(await self._out.receive())
            except (trio.EndOfChannel, trio.ClosedResourceError):
                if self._told:
                    raise StopAsyncIteration from None
                self._told = True
                await self._turn.done.wait()
                return _untold_end(self._turn, self._frames)
        # Coalesce whatever else is already waiting into the same socket write.
        while True:
            try:
                items.append(self._out.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
        parts: list[bytes] = []
        for item in items:
            if isinstance(item, LastPiece):
                self._told = True
                parts.append(item.data)
            elif isinstance(item, bytes):
                parts.append(item)
            # A PreStreamError only ever comes first, before this body exists.
        return b"".join(parts)
