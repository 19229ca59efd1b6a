"""The responses running now: a registry by id, and the runner that takes
each one from its first store write to its last.

Each running response is a :class:`LiveResponse`: its turn writes events
into an :class:`EventLog` (and, in batches, into the store), and every HTTP
stream is a follower of that log, so a client that lost its connection
resumes without a gap or a repeat. A ``background`` turn keeps running
without a client; otherwise the stream that started the turn owns it and its
disconnect cancels the turn. Either way the response ends in the store as
``completed``, ``failed``, ``incomplete`` or ``cancelled`` — the last write
runs shielded, so a shutdown records the interruption too.

The client and the store agree on what a stored response holds — durable,
then visible:

- an event reaches readers only once the store has it: the response's log
  is durable, and the store writer publishes each batch after its
  transaction committed (the batches of all running responses are written
  together, ``store/grouped.py``). After a crash the client's events are a
  prefix of the stored stream; recovery numbers its ending right after the
  last stored event, so a stream resumed from the client's last sequence
  number continues without a gap or a repeat;
- the ending (``response.completed`` and the like) reaches readers only
  after the store accepted it, with the response's final state. If the
  store refuses (disk full, read-only), the events it does not have are
  dropped unseen and readers get ``response.failed`` with the store's error
  code after the stored ones; this process keeps that response in memory,
  so ``GET`` says ``failed`` too, and the next start's recovery ends the
  row the store still has as running.

A response with ``store: false`` has no store to wait for: its events are
visible as they are built.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial

import trio

from ...agent import Agent
from ...approvals import ApprovalChannel
from ...consumers.responses_sse import EventLog, LogFollower, write_response_events
from ...endings import CancelCause
from ...events import StreamEvent
from ...store import HeldApproval, StoredResponse, StoreError, wall_clock
from ...tools.registry import ToolRegistry
from ...turn import INTERNAL_ERROR, HeldCalls, Turn, TurnResult
from ...wire.messages import Message
from ...wire.responses_out import TERMINAL_TYPES, ResponseBuilder, ResponseEvent, new_response_id
from ...wire.sealed import Sealer
from ..admission.turn_place import TurnPlace
from ..admission.turn_slots import turn_options
from ..edge.bodies import StreamedBody
from ..state import ServerState
from .request import ResponsesRequest
from .request_tools import turn_registry

__all__ = ["FollowBody", "LiveResponse", "LiveResponses"]

log = logging.getLogger("hermes_trio.server.responses")

# How long the last store write of a response may take once its turn ended
# (also on shutdown, when everything else is cancelled).
FINALIZE_GRACE = 5.0
# How long /cancel and DELETE wait for a cancelled turn to record its end.
STOP_WAIT = 5.0
# Responses the store refused to finish, answered from memory until restart.
UNSTORED_KEPT = 64


@dataclass(eq=False)
class LiveResponse:
    id: str
    owner: str
    builder: ResponseBuilder
    conversation: list[Message]
    background: bool
    log: EventLog = field(default_factory=EventLog)
    turn: Turn = field(default_factory=Turn)
    """Its ``done`` is set once the response's end is recorded (the turn
    that runs it replaces this placeholder as it starts)."""
    persisted: int = 0
    """Events before this position are in the store (and visible)."""
    inherited: int = 0
    """The leading messages of ``conversation`` that the previous response
    holds (stored once, with it)."""
    previous: str | None = None
    """The response those inherited messages come from."""
    held: list[ResponseEvent] = field(default_factory=list)
    """Built but not yet in the log: the ending, until the store has it."""
    store_error: StoreError | None = None
    """Set when the store refused this response: it ends ``failed``."""
    cancelled: bool = False
    """Cancelled through ``/cancel``: ends as ``cancelled``, not ``incomplete``."""


class FollowBody(StreamedBody):
    """An SSE response body following a response's event log; its end
    detaches the reader and, for a turn its client owns, cancels it."""

    def __init__(self, follower: LogFollower, on_close: Callable[[], None] | None) -> None:
        super().__init__(on_close or _nothing)
        self._follower = follower
        self._on_close = on_close

    def close(self) -> None:
        self._follower.detach()
        if self._on_close is not None:
            self._on_close()

    async def __anext__(self) -> bytes:
        try:
            return await self._follower.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


class LiveResponses:
    """Runs the turns of responses, and keeps the stored ones findable by id
    while they run, each by its owner only."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.running: dict[str, LiveResponse] = {}
        self.unstored: dict[str, LiveResponse] = {}
        """Ended responses whose end the store refused (see the module doc)."""
        self._sealer: Sealer | None = None
        # Other processes sharing the store ask for these by response id.
        state.signals.on("cancel_response", self._cancel_asked)
        state.signals.on("stop_response", self._stop_asked)

    def _cancel_asked(self, response_id: str) -> None:
        live = self.running.get(response_id)
        if live is not None and live.background:
            live.cancelled = True
            live.turn.cancel("cancelled by the client")

    def _stop_asked(self, response_id: str) -> None:
        live = self.running.get(response_id)
        if live is not None:
            self.unstored.pop(live.id, None)
            live.turn.cancel("the response was deleted")

    async def sealer(self) -> Sealer:
        """What seals ``compaction`` items: the install's key, from the
        store (asked once)."""
        if self._sealer is None:
            self._sealer = Sealer(await self.state.store.sealing_key())
        return self._sealer

    def find(self, response_id: str, owner: str) -> LiveResponse | None:
        live = self.running.get(response_id) or self.unstored.get(response_id)
        return live if live is not None and live.owner == owner else None

    async def start(
        self,
        req: ResponsesRequest,
        owner: str,
        conversation: list[Message],
        *,
        inherited: int = 0,
        tool_events: bool = False,
        held: HeldCalls | None = None,
        approved: Mapping[str, str] | None = None,
        response_id: str | None = None,
        mcp_listed: frozenset[str] = frozenset(),
    ) -> LiveResponse:
        """Start a response's turn; returns once the response is stored (when
        it is to be) and running, so a store failure is the request's error.
        The first ``inherited`` messages of ``conversation`` are the previous
        response's. ``tool_events`` shows the agent's own tool runs in its
        stream. ``held`` are the previous response's held calls, settled
        (``approved``: the approval ids of those that run, by call id).
        ``mcp_listed``: the request's MCP servers whose tools the
        conversation has listed already (no ``mcp_list_tools`` again)."""
        state = self.state
        # Streamed upstream whenever someone may watch the events.
        model, opts = turn_options(
            state.agent, state.settings, req, True if req.stream or req.background else None
        )
        if req.store:
            # A flagged call ends the response with an mcp_approval_request;
            # the answer comes with a later request, on any process.
            opts = replace(
                opts,
                approvals=ApprovalChannel(
                    timeout=state.agent.config.approval_timeout("api_server"), defer=True
                ),
            )
        if held is not None:
            opts = replace(opts, held=held)
        opts = replace(opts, context=req.context)
        builder = ResponseBuilder(
            response_id or new_response_id(),
            created_at=int(wall_clock()),
            model=model,
            echo=req.echo,
            clock=wall_clock,
            tool_events=tool_events,
            approved_calls=approved,
            sealer=await self.sealer() if req.context.mode == "compact" else None,
        )
        live = LiveResponse(
            builder.id,
            owner,
            builder,
            conversation,
            background=req.background,
            log=EventLog(durable=req.store),
            inherited=inherited,
            previous=req.previous_response_id if inherited else None,
        )
        live.log.extend(builder.start())
        # The turn's place (a slot, the key's concurrency) is its own once it starts:
        # given back when it ends, however long after this reply (or as
        # this block ends when it never starts).
        async with TurnPlace() as place:
            place.take(state.slots)
            if req.store:
                record = StoredResponse(
                    id=builder.id,
                    owner=owner,
                    status="in_progress",
                    created_at=builder.created_at,
                    response=builder.snapshot(),
                    messages=conversation,
                    input_items=req.input_items,
                    background=req.background,
                    parent=live.previous,
                    inherited=live.inherited,
                )
                # A failure here is the request's own error. Shielded: once
                # the row exists, a turn must run to record its end, even
                # for a client that is gone already.
                with trio.CancelScope(shield=True):
                    await state.store.create(record, events=live.log.events)
                live.persisted = len(live.log)
                live.log.publish(live.persisted)
                self.running[live.id] = live
            agent, around = self._runner(live, req, mcp_listed)
            live.turn = place.start(
                state.nursery,
                agent,
                live.conversation,
                partial(self._consume, live, req.store),
                opts,
                registry=state.turns,
                around=around,
            )
        return live

    def follow(self, live: LiveResponse, *, after: int = -1, owns_turn: bool = False) -> FollowBody:
        """An SSE body of the response's events after sequence number
        ``after``; with ``owns_turn`` the turn is cancelled when it ends."""
        follower = LogFollower(
            live.log,
            after=after,
            keepalive=self.state.settings.keepalive_interval,
            primary=owns_turn,
        )
        on_close = partial(live.turn.cancel, CancelCause.CLIENT_GONE) if owns_turn else None
        return FollowBody(follower, on_close)

    async def stop(self, live: LiveResponse, reason: str) -> None:
        """Cancel the response's turn and give it a moment to record its end
        (for a response to be deleted: the memory of it goes too)."""
        self.unstored.pop(live.id, None)
        await live.turn.stop(reason, grace=STOP_WAIT)

    async def cancel(self, live: LiveResponse) -> None:
        """Stop a response at the client's request: it ends as ``cancelled``."""
        live.cancelled = True
        await live.turn.stop("cancelled by the client", grace=STOP_WAIT)

    async def _consume(
        self, live: LiveResponse, stored: bool, receive: trio.MemoryReceiveChannel[StreamEvent]
    ) -> None:
        await write_response_events(
            receive,
            live.builder,
            live.log,
            admit=partial(self._admit, live) if stored else None,
        )

    async def _run(
        self,
        live: LiveResponse,
        stored: bool,
        turn: Turn,
        run: Callable[[], Awaitable[TurnResult]],
    ) -> None:
        """One response's turn, from its first event to its last store write.
        The turn's own crash policy covers the agent, its tools and the
        writer (the response ends failed, ``internal_error``)."""
        failure: str | None = None
        try:
            async with trio.open_nursery() as outer:
                if stored:
                    outer.start_soon(self._persist, live)
                await run()
                # What the persister has not written yet goes with the
                # final write below.
                outer.cancel_scope.cancel()
        except Exception as exc:
            # A bug in the store writer fails this response, not the server.
            log.exception("response %s failed", live.id)
            failure = f"internal error: {type(exc).__name__}"
        finally:
            with trio.move_on_after(FINALIZE_GRACE, shield=True):
                await self._finalize(live, failure, stored=stored)
            self.running.pop(live.id, None)

    def _runner(
        self, live: LiveResponse, req: ResponsesRequest, mcp_listed: frozenset[str]
    ) -> tuple[Agent, Callable[[Turn, Callable[[], Awaitable[TurnResult]]], Awaitable[None]]]:
        """The agent a response's turn runs on, and what runs around it."""
        agent = self.state.agent
        if not req.mcp:
            return agent, partial(self._run, live, req.store)
        # The request's MCP servers' tools: this turn's alone.
        tools = turn_registry(agent.tools)
        return agent.with_tools(tools), partial(self._run_with_mcp, live, req, tools, mcp_listed)

    async def _run_with_mcp(
        self,
        live: LiveResponse,
        req: ResponsesRequest,
        tools: ToolRegistry,
        listed: frozenset[str],
        turn: Turn,
        run: Callable[[], Awaitable[TurnResult]],
    ) -> None:
        """:meth:`_run` with the request's MCP servers connected around it;
        what they offer is an ``mcp_list_tools`` item before the model speaks."""

        # Imported here: the MCP SDK costs ~34 MB and most of a second, so
        # only a request with an ``mcp`` tool loads it.
        from .mcp_run import RequestMcpTool, open_request_servers

        async def connected() -> TurnResult:
            async with open_request_servers(req.mcp, tools) as (listings, names):
                builder = live.builder
                builder.mcp_tools.update(names)
                if req.store:
                    # Asked with a deferring channel: held, answered later.
                    builder.mcp_held.update(
                        name
                        for name in names
                        if isinstance(tool := tools.get(name), RequestMcpTool) and tool.asks()
                    )
                events: list[ResponseEvent] = []
                for listing in listings:
                    if listing.error is not None or listing.label not in listed:
                        events += builder.mcp_list_tools(
                            listing.label, listing.tools, listing.error
                        )
                if req.store:
                    events = await self._admit(live, events)
                live.log.extend(events)
                return await run()

        await self._run(live, req.store, turn, connected)

    async def _admit(self, live: LiveResponse, events: list[ResponseEvent]) -> list[ResponseEvent]:
        """What goes into the log of a stored response now: not its ending
        (:meth:`_finalize` stores that with the response's final state),
        and nothing once the store has refused the response."""
        held = live.held
        held += events
        if live.store_error is not None:
            return []
        cut = _ending_start(held)
        ready = held[:cut]
        del held[:cut]
        return ready

    async def _persist(self, live: LiveResponse) -> None:
        """Write the response's events to the store as they come, and show
        each batch to readers once it is stored. A refused write fails the
        response (the store already waited out a lock for its busy timeout):
        nothing more could be shown anyway."""
        store = self.state.store
        while True:
            await live.log.wait_grown(live.persisted)
            batch = live.log.events[live.persisted :]
            if not batch:
                return
            try:
                await store.append_events(live.id, batch)
            except StoreError as exc:
                # Logged by the store, once per outage.
                live.store_error = exc
                live.turn.cancel("the response store failed")
                return
            live.persisted += len(batch)
            live.log.publish(live.persisted)

    async def _finalize(self, live: LiveResponse, failure: str | None, *, stored: bool) -> None:
        builder = live.builder
        crash = live.turn.result
        if not builder.ended:
            if live.store_error is not None:
                live.held += _store_failure(builder, live.store_error)
            elif failure is not None:
                live.held += builder.fail(failure, INTERNAL_ERROR)
            elif crash is not None and crash.error_code == INTERNAL_ERROR:
                # The writer crashed: the turn recorded it, nobody told the builder.
                live.held += builder.fail(crash.error or "internal error", INTERNAL_ERROR)
            elif live.cancelled:
                live.held += builder.cancel()
            else:
                live.held += builder.interrupt()
        # Until the store says otherwise (a cancel may cut the wait short).
        refusal = (
            StoreError("store_busy", "the response store did not answer in time")
            if stored
            else None
        )
        try:
            if stored:
                try:
                    # Held first: once the ending shows, they can be answered.
                    await self.state.store.hold_approvals(_held(live))
                    await self.state.store.finish(
                        live.id,
                        status=builder.status,
                        response=builder.snapshot(),
                        messages=live.conversation,
                        events=live.log.events[live.persisted :] + live.held,
                        # Compacted: the conversation no longer starts with
                        # the previous response's messages.
                        rebase=builder.compacted,
                    )
                    refusal = None
                except StoreError as exc:
                    refusal = exc
                except Exception:
                    log.exception("could not record the end of response %s", live.id)
                    refusal = StoreError("store_error", "the response store failed")
        finally:
            if refusal is not None:
                self._refused(live, refusal)
            live.log.extend(live.held)
            live.held = []
            live.log.close()

    def _refused(self, live: LiveResponse, exc: StoreError) -> None:
        """The store would not take the response's end: its readers get
        ``response.failed`` with the store's code right after the events the
        store has (the rest were never visible and are dropped), and this
        process keeps the response to answer later requests the same way."""
        live.store_error = exc
        live.log.truncate(live.persisted)
        _rewind(live.builder, live.persisted)
        live.held = _store_failure(live.builder, exc)
        self.unstored[live.id] = live
        while len(self.unstored) > UNSTORED_KEPT:
            del self.unstored[next(iter(self.unstored))]


def _nothing() -> None:
    pass


def _held(live: LiveResponse) -> list[HeldApproval]:
    """The approvals the response asks for, as the store keeps them (their
    trio deadlines as Unix seconds)."""
    now, wall = trio.current_time(), wall_clock()
    return [
        HeldApproval(
            asked.id,
            live.owner,
            live.id,
            asked.call_id,
            asked.reason,
            wall + asked.deadline - now,
        )
        for asked in live.builder.approval_requests
    ]


def _ending_start(events: list[ResponseEvent]) -> int:
    """Where the ending of a response starts in ``events`` (its terminal
    event, and the ``error`` event before it), or ``len(events)``."""
    for n, event in enumerate(events):
        if event.type in TERMINAL_TYPES:
            return n - 1 if n and events[n - 1].type == "error" else n
    return len(events)


def _rewind(builder: ResponseBuilder, seq: int) -> None:
    """Take back an ending that never reached anyone, from sequence number
    ``seq`` on, so the builder can end the response another way."""
    builder.seq = seq
    builder.status = "in_progress"
    builder.completed_at = None
    builder.incomplete_reason = None
    builder.error = None
    builder.error_code = None


def _store_failure(builder: ResponseBuilder, exc: StoreError) -> list[ResponseEvent]:
    return builder.fail(f"the response could not be stored: {exc.message}", exc.code)
