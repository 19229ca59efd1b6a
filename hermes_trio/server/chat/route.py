"""``POST /v1/chat/completions``: each request runs one agent turn
(``hermes_trio.turn.start_turn``) whose consumer is the SSE writer
(streaming) or a collector (non-streaming). ``X-Session-ID`` continues a
server-side conversation; a newer request on a session interrupts the one
still running there.

Client disconnect cancels the request task; the ``finally`` blocks here (and
the stream body's close, :mod:`.stream`) then cancel the turn, which closes
the upstream stream and kills tool processes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import Any

import trio
from quart import Response, request
from quart_trio import QuartTrio

from ...consumers.sse import PreStreamError, SSEOptions, WriterOutput, write_chat_sse
from ...endings import CancelCause
from ...events import StreamEvent
from ...store import wall_clock
from ...turn import Turn, TurnAround, TurnEvents, TurnOptions
from ...wire.chat_out import ChatStreamFrames, completion_body, new_completion_id
from ...wire.messages import Message
from ..admission.turn_place import TurnPlace
from ..admission.turn_slots import turn_options
from ..approvals.route import approval_identity
from ..conversations.sessions import (
    SESSION_INTERRUPTED,
    SessionStore,
    new_turn_id,
    validate_session_id,
)
from ..edge.bodies import (
    json_response,
    read_json,
    read_json_body,
    request_owner,
    sse_response,
    stream_extensions,
    validate_body,
)
from ..parsing.errors import APIError, error_status
from ..state import ServerState
from .request import ChatRequest, parse_chat_request
from .stream import ChatStreamBody, untold_failure

__all__ = ["register_chat_routes"]


Divert = Callable[[dict[str, Any]], Awaitable[Response | None]]
"""Looks at a request body first and answers it instead of the agent (the
plain model routes), or returns None."""


def register_chat_routes(app: QuartTrio, state: ServerState, divert: Divert | None = None) -> None:
    """Add ``POST /v1/chat/completions`` to ``app``."""
    parse_chat = partial(parse_chat_request, extra=state.settings.extra_params)

    @app.post("/v1/chat/completions")
    async def chat_completions() -> Response:
        if divert is None:
            return await _run_chat(state, await read_json_body(parse_chat))
        body = await read_json()
        if isinstance(body.value, dict):
            diverted = await divert(body.value)
            if diverted is not None:
                return diverted
        return await _run_chat(state, await validate_body(parse_chat, body.value, body.size))


async def _run_chat(state: ServerState, chat: ChatRequest) -> Response:
    agent = state.agent
    # A streamed request streams from the model; for a plain one the config
    # decides (then the answer is assembled), as on /v1/responses.
    model, opts = turn_options(agent, state.settings, chat, True if chat.stream else None)
    run = _ChatRun(
        state,
        chat,
        completion_id=new_completion_id(),
        created=int(wall_clock()),
        model=model,
        extensions=stream_extensions(),
    )
    if chat.stream and "approvals" in run.extensions:
        # Asked on the stream, answered with POST /v1/approvals/{id}. A
        # plain request has nowhere to ask: refused as without the opt-in.
        opts = replace(opts, approvals=agent.approval_channel("api_server", approval_identity()))
    session_id = request.headers.get("X-Session-ID")
    if session_id is None:
        async with TurnPlace() as place:
            place.take(state.slots)
            run.begin(list(chat.messages), opts, place)
        return await run.respond()
    validate_session_id(session_id)
    key = SessionStore.key(request_owner(), session_id)
    sessions = state.sessions
    session = await sessions.get_or_create(key, agent.new_tool_context)
    run.headers["X-Session-ID"] = session_id
    async with session.lock:
        if session.running is not None:
            await session.running.stop(SESSION_INTERRUPTED)
        holder = new_turn_id()
        async with TurnPlace() as place:
            history = await sessions.claim(key, holder)
            # A request refused (a 429) leaves the history as it was; once
            # the turn runs, its end stores the history it made.
            place.on_release(partial(sessions.release, key, holder, history, claimed=history))
            place.take(state.slots)
            dropped = sessions.add(session, history, chat.messages)
            opts = replace(opts, tool_context=session.tool_context)
            messages = session.messages

            async def around(turn: Turn, run_turn: Callable[[], Awaitable[object]]) -> None:
                try:
                    await run_turn()
                finally:
                    # Only what the turn added is written (a compaction: all).
                    compacted = turn.result is not None and turn.result.compacted
                    await sessions.release(
                        key, holder, messages, claimed=history, dropped=dropped, compacted=compacted
                    )

            session.running = run.begin(messages, opts, place, around=around)
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

    def begin(
        self,
        messages: list[Message],
        opts: TurnOptions,
        place: TurnPlace,
        *,
        around: TurnAround | None = None,
    ) -> Turn:
        """Start the turn in the caller's place (the turn gives it
        back as it ends; the caller's block when it cannot start)."""
        state = self.state
        if self.chat.stream:
            self.frames = frames = ChatStreamFrames(
                self.completion_id,
                self.created,
                self.model,
                include_usage=self.chat.include_usage,
            )
            out_send, self.out = trio.open_memory_channel[WriterOutput](4)
            options = SSEOptions(
                keepalive=state.settings.keepalive_interval,
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

        self.turn = place.start(
            state.nursery,
            state.agent,
            messages,
            consumer,
            opts,
            registry=state.turns,
            around=around,
        )
        return self.turn

    async def respond(self) -> Response:
        turn = self.turn
        assert turn is not None
        if self.out is not None:
            return await self._stream_response(turn, self.out)
        try:
            await turn.done.wait()
        finally:
            turn.cancel(CancelCause.CLIENT_GONE)
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
                turn.cancel(CancelCause.CLIENT_GONE)
                raise
            first = untold_failure(turn, frames)
        except BaseException:
            turn.cancel(CancelCause.CLIENT_GONE)
            out.close()
            raise
        if isinstance(first, PreStreamError):
            out.close()
            raise APIError(
                error_status(first.code, first.model_status), first.message, code=first.code
            )
        response = sse_response(ChatStreamBody(first, out, turn, frames))
        response.headers.update(self.headers)
        return response
