"""The turn loop: model → tool calls → model … → final text, as events.

One call to :meth:`Agent.run_turn` is one turn. It sends events into a
bounded memory channel and closes it at the end; ``TurnFinished`` is always
the last event (unless the turn is cancelled, when consumers see their own
cancellation or the end of the channel). The conversation list passed in is
extended in place with what the turn adds, including an interrupted turn.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from functools import partial
from typing import TYPE_CHECKING, Any, Unpack

import trio

from . import metrics
from .approvals import ApprovalChannel
from .compaction import ContextKeeper, ContextTooLarge
from .config import Config, load_config
from .endings import ErrorCode, FinishReason
from .events import (
    Commentary,
    ContextCompacted,
    LongToolHint,
    MessageChunk,
    MessageStop,
    ReasoningChunk,
    StreamEvent,
    ToolCallChunk,
    ToolCallFinished,
    TurnFinished,
    Usage,
)
from .llm import ModelClient, ModelError, ModelRequest, ModelResponse, make_http_client
from .recording import Recorder, note_tool, record_turn
from .recording.document import RecordedOptions
from .tools import (
    ApprovalCallback,
    ToolCallScope,
    ToolContext,
    ToolRegistry,
    ToolResult,
    default_registry,
)
from .turn import (
    HeldCalls,
    TokenMeter,
    TurnEvents,
    TurnOptionFields,
    TurnOptions,
    TurnResult,
    open_turn,
    resolve_options,
)
from .wire.chat_chunks import AssistantMessage, ChunkDelta, ToolCall
from .wire.client_calls import ClientCallStream
from .wire.context import ContextPolicy, overflow_of
from .wire.interrupted import interrupted_answer
from .wire.messages import Message
from .wire.think import ThinkFilter

if TYPE_CHECKING:
    # Annotations only: the model client (llm/) makes and uses the client.
    import httpx

__all__ = ["Agent", "open_agent"]

log = logging.getLogger("hermes_trio.agent")

_TOOL_INTERRUPTED = "interrupted by the user before this tool finished"


class _Marks:
    """One turn's time to first token, counted when it happens (a turn cut
    off later still counts)."""

    __slots__ = ("started", "waiting")

    def __init__(self) -> None:
        self.started = trio.current_time()
        self.waiting = True

    def first_token(self) -> None:
        self.waiting = False
        metrics.TIME_TO_FIRST_TOKEN.observe(trio.current_time() - self.started)


async def _end(
    send: trio.MemorySendChannel[StreamEvent],
    text: str,
    usage: Usage,
    reason: FinishReason,
    *,
    answer: str = "",
    **extra: Any,
) -> TurnResult:
    """Tell the consumers how the turn ended, and return the same ending."""
    await send.send(TurnFinished(text, usage, reason, **extra))
    return TurnResult(text, usage, reason, answer=answer, **extra)


class _Step:
    """What one model step has shown so far: its text (also for the
    interrupt record) and the client tool calls it announced."""

    def __init__(self, tags: Sequence[str], client_names: frozenset[str]) -> None:
        self.think = ThinkFilter(tags)
        self.parts: list[str] = []
        self.calls = ClientCallStream(client_names)
        # Anything of the answer reached the turn (a refused request may be
        # asked again only before).
        self.heard = False

    @property
    def shown(self) -> str:
        return "".join(self.parts)


class Agent:
    """Runs turns against one model configuration and tool registry."""

    def __init__(
        self,
        config: Config,
        http: httpx.AsyncClient,
        *,
        tools: ToolRegistry | None = None,
        approve: ApprovalCallback | None = None,
        record: Recorder | None = None,
    ) -> None:
        self.config = config
        self.client = ModelClient(config.model, http)
        #: The model's window and the compaction of conversations that pass it.
        self.context = ContextKeeper(self.client, config)
        self.tools = tools if tools is not None else default_registry(config.agent.tools)
        self.approve = approve
        #: Where every turn is recorded (``record.dir``), unless a turn says.
        self.record = record if record is not None else _config_recorder(config)

    def with_tools(self, tools: ToolRegistry) -> Agent:
        """This agent with ``tools`` instead of its own (a request that
        brings tools of its own: the Responses API's ``mcp`` tool)."""
        other = copy.copy(self)
        other.tools = tools
        return other

    def new_tool_context(
        self, *, approve: ApprovalCallback | None = None, surface: str | None = None
    ) -> ToolContext:
        """A tool context for one session (it remembers "always" approvals);
        its approvals wait as long as ``surface``'s setting says
        (:meth:`Config.approval_timeout`)."""
        return ToolContext(
            approve=approve or self.approve,
            yolo=self.config.agent.yolo,
            cwd=self.config.agent.workdir,
            file_access=self.config.agent.file_access,
            file_roots=tuple(self.config.agent.file_roots),
            approval_timeout=self.config.approval_timeout(surface),
        )

    def approval_channel(self, surface: str, requester: str | None) -> ApprovalChannel:
        """How a turn for ``requester`` on ``surface`` asks (pass it as
        ``approvals=``): they and ``approvals.approvers`` may answer, for
        ``surface``'s timeout (:meth:`Config.approval_timeout`)."""
        return ApprovalChannel(
            requester=requester,
            approvers=frozenset(self.config.approvals.approvers),
            timeout=self.config.approval_timeout(surface),
        )

    def streams(self, consumer: str, request_stream: bool | None = None) -> bool:
        return self.config.streaming.enabled_for(consumer, request_stream)

    def turn(
        self,
        messages: list[Message] | str,
        options: TurnOptions | None = None,
        **fields: Unpack[TurnOptionFields],
    ) -> AbstractAsyncContextManager[TurnEvents]:
        """Run a turn in the background of this block; iterate its events.

        ``messages`` may be a plain prompt. Leaving the block early cancels
        the turn. A crash ends it with ``TurnFinished(error_code=
        "internal_error")`` (see :func:`hermes_trio.turn.open_turn`).
        """
        return open_turn(self, messages, options=options, **fields)

    async def ask(
        self,
        prompt: str,
        options: TurnOptions | None = None,
        **fields: Unpack[TurnOptionFields],
    ) -> str:
        """Run one turn and return its final text (raises on a model error)."""
        end: TurnFinished | None = None
        async with self.turn(prompt, options, **fields) as events:
            async for event in events:
                if isinstance(event, TurnFinished):
                    end = event
        if end is None:
            raise ModelError("the turn ended without an answer")
        if end.error:
            raise ModelError(
                end.error, code=end.error_code or ErrorCode.MODEL_ERROR, status=end.model_status
            )
        return end.text

    def _head(self) -> list[Message]:
        prompt = self.config.agent.system_prompt
        return [{"role": "system", "content": prompt}] if prompt else []

    async def compact(
        self, messages: list[Message], *, model: str | None = None
    ) -> ContextCompacted | None:
        """Summarise ``messages`` now, in place, whatever their size (a
        person's ``/compact``): everything before the newest exchange
        becomes one summary. None when there is nothing before it; raises
        :class:`ModelError` when no summary could be had, leaving
        ``messages`` as they were."""
        return await self.context.fit(
            messages,
            head=self._head(),
            schemas=self.tools.schemas(),
            policy=ContextPolicy(),
            model=model,
            force=True,
        )

    async def context_size(
        self, messages: list[Message], *, model: str | None = None
    ) -> tuple[int, int]:
        """``(tokens, window)``: the estimated size of the next request over
        ``messages`` (the system prompt and tool schemas included) and the
        model's context window."""
        window = await self.context.window(model)
        return self.context.estimate(self._head(), messages, self.tools.schemas()), window

    async def run_turn(
        self,
        messages: list[Message],
        send: trio.MemorySendChannel[StreamEvent],
        options: TurnOptions | None = None,
        **fields: Unpack[TurnOptionFields],
    ) -> TurnResult:
        """Run one turn over ``messages`` (extended in place), sending events.

        ``options.client_tools`` are OpenAI tool definitions the caller
        executes itself: when the model calls one, the turn ends with
        ``finish_reason "tool_calls"`` and the calls in
        ``TurnFinished.tool_calls``. ``meter`` counts the model's deltas as
        they arrive.

        ``approvals`` lets this turn ask the person it runs for: a tool call
        that needs approval sends ``ApprovalRequested`` and waits for
        :func:`hermes_trio.approvals.answer_approval` (or the context's
        callback); without it nor a callback, such a call is refused. With
        a ``defer`` channel the turn ends there instead (``finish_reason
        "approval"``, the call neither run nor answered in ``messages``),
        and a later turn settles the answers with ``held`` first.

        ``record`` writes this turn to a file for replay (default: the
        agent's ``record``, from ``record.dir``; see
        :mod:`hermes_trio.testing.replay`).
        """
        o = resolve_options(options, fields)
        ctx = o.tool_context or self.new_tool_context()
        if o.approvals is not None:
            # A copy for this turn; the "always" approvals stay shared.
            ctx = dataclasses.replace(ctx, approvals=o.approvals)
        held = o.held
        shown: RecordedOptions = {
            "stream": o.stream,
            "client_tools": list(o.client_tools),
            "params": o.params,
            "model": o.model,
            "system": o.system,
        }
        record = o.record or self.record
        # Synchronous close: `async with` could replace a producer error with
        # Cancelled at close (a trio trap; see docs/architecture.md).
        learned = self.context.learned() if record is not None else None
        with send, record_turn(record, self.config, messages, shown, send, learned) as out:
            # Held calls' results go in before what this request added.
            start = len(messages) if held is None else min(len(messages), held.position)
            marks = _Marks()
            try:
                loop = _TurnLoop(
                    self,
                    messages,
                    out,
                    o,
                    marks=marks,
                    ctx=ctx,
                    meter=o.meter or TokenMeter(),
                )
                result = await loop.run(held)
            except trio.BrokenResourceError:
                # The consumer went away; the turn is over for everyone.
                result = TurnResult("", Usage(), "interrupted")
            # A compaction replaced the start of the list (a summary first).
            first = max(start + loop.shift, 1 if loop.compacted else 0)
            result.added = messages[first:]
            result.compacted = loop.compacted
            return result

    async def _flush(self, step: _Step, send: trio.MemorySendChannel[StreamEvent]) -> None:
        rest = step.think.flush()
        if rest.reasoning:
            await send.send(ReasoningChunk(rest.reasoning))
        if rest.text:
            step.parts.append(rest.text)
            await send.send(MessageChunk(rest.text))

    async def _fail(
        self,
        messages: list[Message],
        send: trio.MemorySendChannel[StreamEvent],
        step: _Step,
        usage: Usage,
        exc: ModelError,
    ) -> TurnResult:
        partial_text = step.shown
        if partial_text:
            messages.append(
                {"role": "assistant", "content": f"{partial_text}\n\n[error: {exc.message}]"}
            )
        log.warning("turn failed: %s", exc.message)
        await send.send(MessageStop(final=True))
        return await _end(
            send,
            partial_text,
            usage,
            "error",
            error=exc.message,
            error_code=exc.code,
            model_status=exc.status,
        )

    def _record_interrupt(self, messages: list[Message], shown: str) -> None:
        """Leave a history the model can continue from after an interrupt."""
        last = messages[-1] if messages else None
        if last is not None and last["role"] == "assistant" and last.get("tool_calls"):
            # Every tool call needs a result, or the next request is invalid.
            for call in last.get("tool_calls", []):
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": _TOOL_INTERRUPTED}
                )
            return
        messages.append(interrupted_answer(shown))

    async def _run_tools(
        self,
        calls: Sequence[ToolCall],
        messages: list[Message],
        send: trio.MemorySendChannel[StreamEvent],
        ctx: ToolContext,
        *,
        first_index: int = 0,
        approved: bool = False,
    ) -> list[str]:
        """Run one step's tool calls concurrently; results keep call order.
        Their events are numbered from ``first_index``. Returns the ids of
        the calls held for a later answer (they have no result); with
        ``approved`` the person said yes to every call already."""
        results: list[ToolResult | None] = [None] * len(calls)
        waiting: list[str] = []
        async with trio.open_nursery() as nursery:
            for slot, call in enumerate(calls):
                nursery.start_soon(
                    partial(
                        self._run_tool,
                        slot,
                        first_index + slot,
                        call,
                        results,
                        send,
                        ctx,
                        approved=approved,
                    )
                )
        for call, result in zip(calls, results, strict=True):
            if result is None:
                waiting.append(call.id)
                continue
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result.content})
        return waiting

    async def _settle(
        self,
        held: HeldCalls,
        messages: list[Message],
        send: trio.MemorySendChannel[StreamEvent],
        ctx: ToolContext,
    ) -> int:
        """Run the approved held calls and put every held call's result in
        the conversation at ``held.position``; returns how many ran."""
        run = [h.call for h in held.calls if h.refusal is None]
        ran: list[Message] = []
        try:
            if run:
                await self._run_tools(run, ran, send, ctx, approved=True)
        finally:
            # Every call gets a result, even when the turn is interrupted
            # while they run, or the conversation could not go on.
            results = {m["tool_call_id"]: m for m in ran if m["role"] == "tool"}
            messages[held.position : held.position] = [
                results.get(h.call.id)
                or {
                    "role": "tool",
                    "tool_call_id": h.call.id,
                    "content": h.refusal or _TOOL_INTERRUPTED,
                }
                for h in held.calls
            ]
        return len(run)

    async def _run_tool(
        self,
        slot: int,
        index: int,
        call: ToolCall,
        results: list[ToolResult | None],
        send: trio.MemorySendChannel[StreamEvent],
        ctx: ToolContext,
        *,
        approved: bool = False,
    ) -> None:
        args, preview = self.tools.preview(call.name, call.arguments)
        await send.send(ToolCallChunk(call.name, preview, args, index, call.id))
        started = trio.current_time()
        mark = note_tool()
        threshold = self.config.agent.long_tool_hint

        async def hint() -> None:
            await trio.sleep(threshold)
            await send.send(LongToolHint(call.name, trio.current_time() - started))

        # The call's own context: an approval it asks for names the call
        # and goes into the turn's channel.
        scope = ToolCallScope(index, call.id, args, send.send, approved=approved)
        ctx = dataclasses.replace(ctx, call=scope)
        async with trio.open_nursery() as nursery:
            if threshold > 0:
                nursery.start_soon(hint)
            result = await self.tools.execute(call.name, call.arguments, ctx)
            nursery.cancel_scope.cancel()
        if scope.held:
            # Not run: it waits for an answer in a later request.
            return
        result = _encodable_result(result)
        results[slot] = result
        duration = trio.current_time() - started
        if mark is not None:
            mark.finished(
                index=index,
                call_id=call.id,
                name=call.name,
                arguments=call.arguments,
                ok=result.ok,
                result=result.content,
                duration=duration,
            )
        await send.send(
            ToolCallFinished(call.name, duration, result.ok, index, call.id, result.content)
        )


class _TurnLoop:
    """One turn's model steps: ``step`` asks the model once and acts on its
    answer, ``on_delta`` shows the answer as it streams, ``finish`` ends a
    turn that ran out of steps. The state lives here so each job reads on
    its own."""

    def __init__(
        self,
        agent: Agent,
        messages: list[Message],
        send: trio.MemorySendChannel[StreamEvent],
        options: TurnOptions,
        *,
        ctx: ToolContext,
        marks: _Marks,
        meter: TokenMeter,
    ) -> None:
        self.agent = agent
        self.messages = messages
        self.send = send
        self.options = options
        self.params = options.params or {}
        self.ctx = ctx
        self.marks = marks
        self.meter = meter
        cfg = agent.config.agent
        self.cfg = cfg
        prompt, system = cfg.system_prompt, options.system
        if system:
            prompt = f"{prompt}\n\n{system}" if prompt else system
        self.prompt = prompt
        client_tools = options.client_tools
        client_names = frozenset(str(t.get("function", {}).get("name")) for t in client_tools)
        self.client_names = client_names
        schemas = [s for s in agent.tools.schemas() if s["function"]["name"] not in client_names]
        schemas += list(client_tools)
        self.schemas = schemas
        self.usage = Usage()
        self.current = _Step(cfg.think_tags, client_names)
        # Tool calls run so far: indexes count over the whole turn, so a
        # consumer can key on them across steps.
        self.tools_run = 0
        # Every step's text, for the whole answer of a non-streamed reply.
        self.said_so_far: list[str] = []
        # Set once the history holds this turn's outcome; an exception after
        # that (a consumer gone while we send TurnFinished) must not add a
        # second, "interrupted" ending.
        self.recorded = False
        policy = options.context
        if policy is None and agent.config.compaction.enabled:
            policy = ContextPolicy()
        self.policy = policy
        # Whether a compaction replaced the start of the conversation, and
        # by how many messages it moved what came after.
        self.compacted = False
        self.shift = 0
        self.retried_overflow = False

    async def run(self, held: HeldCalls | None) -> TurnResult:
        agent = self.agent
        try:
            if held is not None:
                self.tools_run = await agent._settle(held, self.messages, self.send, self.ctx)
            for _ in range(self.cfg.max_iterations):
                result = await self.step()
                if result is not None:
                    return result
            return await self.finish()
        except BaseException:
            # Cancelled may arrive bare or grouped from the tool nursery;
            # either way the turn ended without finishing.
            if not self.recorded:
                agent._record_interrupt(self.messages, self.current.shown)
            raise

    async def emit(self, event: StreamEvent) -> None:
        # The stream read just checkpointed; waiting here only when the
        # channel is full saves a scheduler pass per token.
        try:
            self.send.send_nowait(event)
        except trio.WouldBlock:
            await self.send.send(event)

    async def on_delta(self, delta: ChunkDelta) -> None:
        step, meter, emit = self.current, self.meter, self.emit
        step.heard = True
        if self.marks.waiting and (delta.content or delta.reasoning):
            self.marks.first_token()
        # A merged delta counts its content's tokens only; one without
        # content (reasoning, a tool call's fragment) counts one.
        if delta.content:
            meter.tokens += delta.tokens
        elif delta.reasoning or delta.tool_calls:
            meter.tokens += 1
        # Reasoning first: a delta that carries both (a whole
        # non-streamed answer) was reasoned before it was said.
        if delta.reasoning:
            await emit(ReasoningChunk(delta.reasoning))
        if delta.content:
            filtered = step.think.feed(delta.content)
            if filtered.reasoning:
                await emit(ReasoningChunk(filtered.reasoning))
            if filtered.text:
                step.parts.append(filtered.text)
                await emit(MessageChunk(filtered.text, delta.tokens))
        if delta.tool_calls:
            first = not step.calls.started
            pieces = step.calls.feed(delta.tool_calls)
            if pieces and first:
                # The text before the calls is over: a tail the think
                # filter still holds must come out before them.
                await self.agent._flush(step, self.send)
            for piece in pieces:
                await emit(piece)

    async def step(self) -> TurnResult | None:
        """One model step: the turn's result if it ends here, else None."""
        agent, messages, send = self.agent, self.messages, self.send
        step = self.current = _Step(self.cfg.think_tags, self.client_names)
        head: list[Message] = [{"role": "system", "content": self.prompt}] if self.prompt else []
        try:
            response = await self.ask(step, head)
        except ModelError as exc:
            await agent._flush(step, send)
            self.recorded = True
            return await agent._fail(messages, send, step, self.usage, exc)
        await agent._flush(step, send)
        if response.usage is not None:
            self.usage = self.usage + response.usage
        usage = self.usage
        message = response.message
        # Every piece of the answer went through the step's think
        # filter on its way out, so what it showed is the answer,
        # kept as it was streamed (whitespace included).
        said = step.shown
        if said:
            self.said_so_far.append(said)
        answer = "\n\n".join(self.said_so_far)
        if not message.tool_calls:
            messages.append({"role": "assistant", "content": said})
            self.recorded = True
            await send.send(MessageStop(final=True))
            reason: FinishReason = "length" if message.finish_reason == "length" else "stop"
            return await _end(send, said, usage, reason, answer=answer)

        late, all_calls, theirs = step.calls.finish(message.tool_calls)
        for piece in late:
            await send.send(piece)
        spoken = said if said.strip() else None
        assistant = AssistantMessage(
            spoken or "", message.reasoning, tuple(all_calls), message.finish_reason
        ).to_message()
        messages.append(assistant)
        if spoken:
            await send.send(Commentary(said))
        await send.send(MessageStop(final=False))
        mine = [c for c in all_calls if c.name not in self.client_names]
        waiting: list[str] = []
        if mine:
            waiting = await agent._run_tools(
                mine, messages, send, self.ctx, first_index=self.tools_run
            )
            self.tools_run += len(mine)
        if waiting or theirs:
            # Held for a person's answer in a later request (``waiting``:
            # the turn ends here, those calls not run) or left to the client.
            self.recorded = True
            calls = tuple(c.to_message() for c in theirs)
            why: FinishReason = "approval" if waiting else "tool_calls"
            return await _end(send, said, usage, why, tool_calls=calls, answer=answer)
        return None

    async def ask(self, step: _Step, head: list[Message]) -> ModelResponse:
        """One model request over a conversation that fits the window: made
        to fit first (between requests, never during one), and when the
        server still refuses it as too long before saying anything,
        compacted harder and asked once more."""
        keeper = self.agent.context
        await self.fit(head, harder=False)
        size = keeper.estimate(head, self.messages, self.schemas)
        try:
            response = await self.request(head)
        except ModelError as exc:
            overflow = overflow_of(exc.code, exc.message, exc.status)
            if overflow is None or self.policy is None or step.heard or self.retried_overflow:
                raise
            self.retried_overflow = True
            keeper.refused(overflow, size)
            if self.policy.mode == "refuse":
                raise
            try:
                smaller = await self.fit(head, harder=True)
            except ContextTooLarge:
                # Nothing can be folded: the server's own words say more.
                smaller = None
            if smaller is None:
                raise exc from None
            size = keeper.estimate(head, self.messages, self.schemas)
            response = await self.request(head)
        if response.usage is not None and response.usage.prompt_tokens:
            keeper.measured(size, response.usage.prompt_tokens)
        return response

    async def request(self, head: list[Message]) -> ModelResponse:
        return await self.agent.client.complete(
            ModelRequest(head + self.messages, self.schemas, self.params),
            stream=self.options.stream,
            on_delta=self.on_delta,
            model=self.options.model,
        )

    async def fit(self, head: list[Message], *, harder: bool) -> ContextCompacted | None:
        """Compact the conversation if the next request would not fit; the
        event goes to the consumers."""
        if self.policy is None:
            return None
        before = len(self.messages)
        event = await self.agent.context.fit(
            self.messages,
            head=head,
            schemas=self.schemas,
            policy=self.policy,
            model=self.options.model,
            harder=harder,
        )
        if event is None:
            return None
        self.compacted = True
        self.shift += len(self.messages) - before
        await self.send.send(event)
        return event

    async def finish(self) -> TurnResult:
        """End a turn that used up its model steps without a final answer."""
        send = self.send
        note = (
            f"(Stopped: the agent reached its limit of {self.cfg.max_iterations} model steps "
            "in one turn without a final answer; raise agent.max_iterations to allow more.)"
        )
        self.messages.append({"role": "assistant", "content": note})
        self.recorded = True
        await send.send(MessageChunk(note))
        await send.send(MessageStop(final=True))
        answer = "\n\n".join([*self.said_so_far, note])
        return await _end(send, note, self.usage, "length", answer=answer)


def _encodable_result(result: ToolResult) -> ToolResult:
    """``result`` with any lone surrogate in its text as U+FFFD.

    A tool's output can carry one (a path the model wrote with ``\\ud800``
    in it, quoted back in an error; a file name that is not UTF-8): the
    result joins the conversation, which goes to the model server, to
    stores and to clients as UTF-8, where a lone surrogate cannot go.
    """
    text = result.content
    if text.isascii():
        return result
    try:
        text.encode()
    except UnicodeEncodeError:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return dataclasses.replace(result, content=text)
    return result


@asynccontextmanager
async def open_agent(
    config: Config | None = None,
    *,
    tools: ToolRegistry | None = None,
    approve: ApprovalCallback | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    http_client: httpx.AsyncClient | None = None,
    record: Recorder | None = None,
) -> AsyncIterator[Agent]:
    """Open an agent for the life of this block.

    By default the agent owns its HTTP client and closes it at the end.
    ``transport`` replaces the network under that client (e.g.
    :class:`hermes_trio.testing.ModelDouble`, an in-process model for
    tests); ``http_client`` is a client you own and close yourself. Give
    one of them, not both. ``record`` records every turn (default:
    ``record.dir`` of the config); a recorded turn's model requests are
    copied where they pass through this module's HTTP client, so with
    ``http_client`` they are recorded only if its transport is a
    :class:`hermes_trio.recording.TapTransport`.
    """
    if transport is not None and http_client is not None:
        raise TypeError("open_agent takes transport= or http_client=, not both")
    config = config or load_config()
    registry = tools if tools is not None else default_registry(config.agent.tools)
    # The configured MCP servers run as long as the agent does.
    async with _mcp_servers(config, registry):
        if http_client is not None:
            yield Agent(config, http_client, tools=registry, approve=approve, record=record)
            return
        async with make_http_client(config.model, transport=transport) as http:
            yield Agent(config, http, tools=registry, approve=approve, record=record)


def _mcp_servers(config: Config, registry: ToolRegistry) -> AbstractAsyncContextManager[object]:
    """The enabled servers of ``mcp_servers`` for the life of the block
    (their tools join ``registry``); nothing to run without one."""
    if not any(server.enabled for server in config.mcp_servers.values()):
        return nullcontext()
    # Imported here: the MCP SDK costs ~34 MB and most of a second of
    # start-up, so only a config with an MCP server loads it.
    from .mcp import open_mcp_servers

    return open_mcp_servers(config.mcp_servers, registry)


def _config_recorder(config: Config) -> Recorder | None:
    rec = config.record
    if not rec.dir:
        return None
    return Recorder(
        rec.dir, max_file_bytes=rec.max_file_bytes, max_total_bytes=rec.max_total_bytes
    )
