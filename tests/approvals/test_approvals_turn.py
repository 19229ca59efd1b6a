"""Approval inside a turn, on trio's MockClock against the in-process model
double: the wait ends at exactly the configured timeout (the model hears
"expired"), an interrupt ends it at once (the consumer hears "cancelled"),
an answer by id from another task decides it, and after each of these no
question is pending and no task of the turn is left."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import trio
import trio.testing
from approval_support import REBOOT, Guarded, calls
from support import agent_on_double, run_turn
from trio.testing import MockClock

from hermes_trio import turn as turns
from hermes_trio.approvals import (
    PENDING,
    ApprovalChannel,
    ApprovalQuestion,
    Decision,
    Outcome,
    PendingApprovals,
    Refused,
    answer_approval,
)
from hermes_trio.channels import drain_after_cancel
from hermes_trio.config import ApprovalsConfig, ApprovalTimeoutsConfig
from hermes_trio.events import (
    ApprovalRequested,
    ApprovalResolved,
    StreamEvent,
    ToolCallChunk,
    ToolCallFinished,
    TurnFinished,
)
from hermes_trio.tools import (
    ApprovalDecision,
    ApprovalRequest,
    ToolContext,
    ToolRegistry,
    request_approval,
)


def approvals(timeout: float | None = None, **per_platform: float) -> ApprovalsConfig:
    return ApprovalsConfig(timeout=timeout, per_platform=ApprovalTimeoutsConfig(**per_platform))


def tasks() -> set[trio.lowlevel.Task]:
    """Every task of this trio run."""
    found: set[trio.lowlevel.Task] = set()
    todo = [trio.lowlevel.current_root_task()]
    while todo:
        task = todo.pop()
        found.add(task)
        for nursery in task.child_nurseries:
            todo.extend(nursery.child_tasks)
    return found


def tool_message(double: Any, request: int = 1) -> str:
    message = double.model_requests[request].json["messages"][-1]
    assert message["role"] == "tool"
    return str(message["content"])


def of(kind: type, events: list[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


@pytest.fixture(autouse=True)
def nothing_pending_after() -> Any:
    yield
    assert PENDING.book.pending() == [] and len(PENDING.book) == 0


async def test_no_answer_in_time_expires_at_exactly_the_timeout(autojump_clock: MockClock) -> None:
    tool = Guarded()
    async with agent_on_double(
        calls(REBOOT), tools=ToolRegistry([tool]), approvals=approvals(120.0)
    ) as (agent, double):
        before = tasks()
        seen: list[tuple[float, StreamEvent]] = []

        async def consumer(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
            async for event in receive:
                seen.append((trio.current_time(), event))

        result = await turns.run_turn(
            agent, "reboot it", consumer, approvals=ApprovalChannel(requester="alice")
        )
        assert tasks() == before
    events = [e for _, e in seen]
    (asked,) = of(ApprovalRequested, events)
    asked_at = next(t for t, e in seen if e is asked)
    (started,) = of(ToolCallChunk, events)
    assert (asked.tool_name, asked.command, asked.arguments) == (
        "guarded",
        REBOOT,
        {"command": REBOOT},
    )
    assert asked.reason == "shutting down or rebooting the machine"
    assert (asked.index, asked.call_id) == (started.index, started.call_id)
    assert asked.timeout == 120.0 and asked.deadline == asked_at + 120.0
    (ended,) = of(ApprovalResolved, events)
    ended_at = next(t for t, e in seen if e is ended)
    assert ended == ApprovalResolved(
        asked.id, "expired", None, "no answer in time", False, started.index, started.call_id
    )
    assert ended_at == asked.deadline
    # The model hears it at the deadline, not a tick later.
    assert double.model_requests[1].received_at == asked.deadline
    heard = tool_message(double)
    assert "not approved in time (expired" in heard and "120 s" in heard
    assert "was not run" in heard
    assert tool.ran == []
    assert result.finish_reason == "stop"
    late = answer_approval(asked.id, True, by="alice")
    assert isinstance(late, Refused) and late.code == "ended"
    assert late.message == "no longer pending: expired (no answer in time)"


async def test_the_surface_timeout_overrides_the_common_one(autojump_clock: MockClock) -> None:
    async with agent_on_double(
        calls(REBOOT), tools=ToolRegistry([Guarded()]), approvals=approvals(120.0, telegram=30.0)
    ) as (agent, double):
        ctx = agent.new_tool_context(surface="telegram")
        events, _ = await run_turn(agent, "go", tool_context=ctx, approvals=ApprovalChannel())
    (asked,) = of(ApprovalRequested, events)
    assert asked.timeout == 30.0
    assert double.model_requests[1].received_at == asked.deadline
    # A channel's own timeout wins over the context's.
    async with agent_on_double(calls(REBOOT), tools=ToolRegistry([Guarded()])) as (agent, _):
        events, _ = await run_turn(agent, "go", approvals=ApprovalChannel(timeout=5.0))
    assert of(ApprovalRequested, events)[0].timeout == 5.0


async def test_an_interrupt_ends_the_wait_at_once_and_the_prompt_hears_cancelled(
    autojump_clock: MockClock,
) -> None:
    tool = Guarded()
    async with agent_on_double(calls(REBOOT), tools=ToolRegistry([tool])) as (agent, double):
        before = tasks()
        seen: list[StreamEvent] = []
        after_cancel: list[StreamEvent] = []
        asked = trio.Event()

        async def consumer(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
            try:
                async for event in receive:
                    seen.append(event)
                    if isinstance(event, ApprovalRequested):
                        asked.set()
            except trio.Cancelled:
                after_cancel.extend(await drain_after_cancel(receive))
                raise

        turn = turns.Turn()
        history: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                partial(
                    turns.run_turn, agent, history, consumer, turn=turn, approvals=ApprovalChannel()
                )
            )
            await asked.wait()
            await trio.sleep(42)
            (question,) = PENDING.book.pending()
            cancelled_at = trio.current_time()
            turn.cancel("a new message")  # gateway.on_new_message: interrupt
            await turn.done.wait()
            assert trio.current_time() == cancelled_at
        assert tasks() == before
    (request,) = of(ApprovalRequested, seen)
    assert question.id == request.id
    assert after_cancel == [
        ApprovalResolved(
            request.id, "cancelled", None, "the turn was interrupted", False, 0, request.call_id
        )
    ]
    assert turn.result is not None and turn.result.finish_reason == "interrupted"
    assert history[-1]["role"] == "tool" and "interrupted" in history[-1]["content"]
    assert tool.ran == [] and len(double.model_requests) == 1
    late = answer_approval(request.id, True, by="anyone")
    assert isinstance(late, Refused)
    assert late.message == "no longer pending: cancelled (the turn was interrupted)"


async def test_a_cancel_from_outside_the_turn_cancels_the_question_too(
    autojump_clock: MockClock,
) -> None:
    async with agent_on_double(calls(REBOOT), tools=ToolRegistry([Guarded()])) as (agent, _):
        before = tasks()
        with trio.move_on_after(10) as scope:  # an embedding's own deadline
            async with agent.turn("go", approvals=ApprovalChannel()) as events:
                async for event in events:
                    assert not isinstance(event, ApprovalResolved)
        assert scope.cancelled_caught and trio.current_time() == 10
        assert tasks() == before


async def test_an_answer_by_id_from_another_task_decides(autojump_clock: MockClock) -> None:
    tool = Guarded()
    async with agent_on_double(calls(REBOOT), tools=ToolRegistry([tool])) as (agent, double):
        asked: list[ApprovalRequested] = []
        refusals: list[Decision | Refused] = []
        show = trio.Event()

        async def surface() -> None:
            # A button's callback: someone else first, then the one who asked.
            await show.wait()
            await trio.sleep(5)
            refusals.append(answer_approval(asked[0].id, True, by="mallory"))
            refusals.append(answer_approval(asked[0].id, True, by="alice", reason="go ahead"))
            refusals.append(answer_approval(asked[0].id, False, by="alice"))

        async def consumer(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
            async for event in receive:
                if isinstance(event, ApprovalRequested):
                    asked.append(event)
                    show.set()
                elif isinstance(event, ApprovalResolved):
                    assert event.outcome == "approved" and event.by == "alice"

        async with trio.open_nursery() as nursery:
            nursery.start_soon(surface)
            await turns.run_turn(
                agent, "go", consumer, approvals=ApprovalChannel("alice", frozenset({"bob"}))
            )
    not_allowed, decided, twice = refusals
    assert isinstance(not_allowed, Refused) and not_allowed.code == "not_allowed"
    assert decided == Decision(Outcome.APPROVED, "alice", "go ahead")
    assert isinstance(twice, Refused) and twice.message == "no longer pending: approved by alice"
    assert tool.ran == [REBOOT]
    assert tool_message(double) == f"ran {REBOOT}"
    assert double.model_requests[1].received_at == asked[0].deadline - 300 + 5


async def test_a_denial_tells_the_model_the_persons_reason(autojump_clock: MockClock) -> None:
    tool = Guarded()
    async with agent_on_double(calls(REBOOT), tools=ToolRegistry([tool])) as (agent, double):
        seen: list[StreamEvent] = []

        async def consumer(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
            async for event in receive:
                seen.append(event)
                if isinstance(event, ApprovalRequested):
                    answer_approval(event.id, False, by="me", reason="not on a Friday")

        await turns.run_turn(agent, "go", consumer, approvals=ApprovalChannel())
    heard = tool_message(double)
    assert heard.startswith("refused: the user denied this command; their reason: not on a Friday")
    assert "was not run" in heard
    assert of(ApprovalResolved, seen)[0].outcome == "denied"
    (finished,) = of(ToolCallFinished, seen)
    assert not finished.ok
    assert tool.ran == []


async def test_parallel_calls_are_asked_and_answered_apart(autojump_clock: MockClock) -> None:
    tool = Guarded()
    script = calls(REBOOT, "true && shutdown -h now")
    async with agent_on_double(script, tools=ToolRegistry([tool])) as (agent, double):

        async def consumer(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
            async for event in receive:
                if isinstance(event, ApprovalRequested):
                    answer_approval(event.id, event.index == 1, by="me")

        await turns.run_turn(agent, "go", consumer, approvals=ApprovalChannel())
    tools = [m for m in double.model_requests[1].json["messages"] if m["role"] == "tool"]
    assert "denied" in tools[0]["content"]
    assert tools[1]["content"] == "ran true && shutdown -h now"
    assert tool.ran == ["true && shutdown -h now"]


async def test_always_covers_the_rule_for_the_rest_of_the_context(
    autojump_clock: MockClock,
) -> None:
    tool = Guarded()
    script = [*calls(REBOOT), *calls("sudo reboot")]
    async with agent_on_double(script, tools=ToolRegistry([tool])) as (agent, _):
        ctx = agent.new_tool_context()
        asked: list[ApprovalRequested] = []

        async def consumer(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
            async for event in receive:
                if isinstance(event, ApprovalRequested):
                    asked.append(event)
                    answer_approval(event.id, True, by="me", always=True)

        history: list[dict[str, Any]] = []
        for prompt in ("one", "two"):
            history.append({"role": "user", "content": prompt})
            await turns.run_turn(
                agent, history, consumer, tool_context=ctx, approvals=ApprovalChannel()
            )
    assert len(asked) == 1
    assert tool.ran == [REBOOT, "sudo reboot"]
    assert ctx.approved_patterns == {"power"}


async def test_without_a_way_to_ask_it_is_refused_as_before(autojump_clock: MockClock) -> None:
    # The API server and the gateway give no channel (yet): refused, no events.
    tool = Guarded()
    async with agent_on_double(calls(REBOOT), tools=ToolRegistry([tool])) as (agent, double):
        events, _ = await run_turn(agent, "go")
    assert of(ApprovalRequested, events) == [] and of(ApprovalResolved, events) == []
    heard = tool_message(double)
    assert "there is no approval channel" in heard and "--yolo" in heard
    assert tool.ran == []


async def test_yolo_never_asks(autojump_clock: MockClock) -> None:
    tool = Guarded()
    async with agent_on_double(calls(REBOOT), tools=ToolRegistry([tool]), agent={"yolo": True}) as (
        agent,
        _,
    ):
        events, _ = await run_turn(agent, "go", approvals=ApprovalChannel())
    assert of(ApprovalRequested, events) == []
    assert tool.ran == [REBOOT]


async def test_the_callback_answers_through_the_same_events(autojump_clock: MockClock) -> None:
    got: list[ApprovalRequest] = []

    async def once(request: ApprovalRequest) -> ApprovalDecision:
        got.append(request)
        await trio.sleep(3)
        return ApprovalDecision.ONCE

    tool = Guarded()
    async with agent_on_double(calls(REBOOT), tools=ToolRegistry([tool]), approve=once) as (
        agent,
        _,
    ):
        events, _ = await run_turn(agent, "go")
    (asked,) = of(ApprovalRequested, events)
    (ended,) = of(ApprovalResolved, events)
    assert got == [ApprovalRequest("guarded", REBOOT, asked.reason)]
    assert (got[0].id, got[0].deadline) == (asked.id, asked.deadline)
    assert (ended.outcome, ended.by) == ("approved", "callback")
    assert tool.ran == [REBOOT]
    # Events in order: the call, its question, the answer, its end.
    kinds = [type(e) for e in events if not isinstance(e, TurnFinished)]
    start = kinds.index(ToolCallChunk)
    assert kinds[start : start + 4] == [
        ToolCallChunk,
        ApprovalRequested,
        ApprovalResolved,
        ToolCallFinished,
    ]


async def test_a_callback_that_never_answers_expires_and_is_cancelled(
    autojump_clock: MockClock,
) -> None:
    stopped: list[float] = []

    async def never(request: ApprovalRequest) -> ApprovalDecision:
        try:
            await trio.sleep_forever()
        finally:
            stopped.append(trio.current_time())
        raise AssertionError("unreachable")

    async with agent_on_double(
        calls(REBOOT), tools=ToolRegistry([Guarded()]), approve=never, approvals=approvals(60.0)
    ) as (agent, double):
        before = tasks()
        events, _ = await run_turn(agent, "go")
        assert tasks() == before
    (asked,) = of(ApprovalRequested, events)
    assert stopped == [asked.deadline] and asked.timeout == 60.0
    assert of(ApprovalResolved, events)[0].outcome == "expired"
    assert "expired" in tool_message(double)


async def test_a_surface_may_answer_before_the_callback(autojump_clock: MockClock) -> None:
    async def slow(request: ApprovalRequest) -> ApprovalDecision:
        await trio.sleep(100)
        return ApprovalDecision.DENY

    tool = Guarded()
    async with agent_on_double(calls(REBOOT), tools=ToolRegistry([tool]), approve=slow) as (
        agent,
        _,
    ):

        async def consumer(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
            async for event in receive:
                if isinstance(event, ApprovalRequested):
                    answer_approval(event.id, True, by="operator")

        await turns.run_turn(agent, "go", consumer)
    assert tool.ran == [REBOOT]


async def test_any_tool_can_ask_through_the_same_path(autojump_clock: MockClock) -> None:
    # What a tool other than the terminal (an MCP server's) would do.
    assert await request_approval(ToolContext(), tool_name="x", command="y", reason="z") is None
    ctx = ToolContext(approvals=ApprovalChannel(requester="ann", timeout=30))

    async def deny_later() -> None:
        await trio.sleep(1)
        (question,) = PENDING.book.pending()
        assert (question.tool_name, question.command) == ("github.delete_repo", "delete hermes")
        answer_approval(question.id, False, by="ann", reason="keep it")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(deny_later)
        answer = await request_approval(
            ctx, tool_name="github.delete_repo", command="delete hermes", reason="it deletes"
        )
    assert answer is not None and answer.decision == Decision(Outcome.DENIED, "ann", "keep it")
    assert answer.refusal("it deletes", "this repository deletion") == (
        "refused: the user denied this repository deletion; their reason: keep it. It needs "
        "approval (it deletes). This repository deletion was not run. Do not retry it; ask "
        "the user or choose something safer."
    )
    expired = await request_approval(ctx, tool_name="t", command="c", reason="r")
    assert expired is not None and trio.current_time() == 31
    assert "expired: nobody answered within 30 s" in (expired.refusal("r") or "")


async def test_every_question_gets_its_ending_even_when_the_channel_was_full(
    autojump_clock: MockClock,
) -> None:
    # Decided, then cancelled while the full channel held up the news.
    pending = PendingApprovals()
    send, receive = trio.open_memory_channel[StreamEvent](1)
    scope = trio.CancelScope()

    async def asker() -> None:
        with scope:
            await pending.ask(tool_name="t", command="c", reason="r", seconds=60, publish=send.send)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(asker)
        await trio.testing.wait_all_tasks_blocked()
        (question,) = pending.book.pending()
        assert isinstance(pending.answer(question.id, True, by="a"), Decision)
        await trio.testing.wait_all_tasks_blocked()
        scope.cancel()
        with trio.fail_after(1):
            got = [await receive.receive(), await receive.receive()]
    assert [type(e) for e in got] == [ApprovalRequested, ApprovalResolved]
    assert isinstance(got[1], ApprovalResolved) and got[1].outcome == "approved"
    assert len(pending.book) == 0


async def test_a_question_is_listed_before_anyone_sees_its_id(
    autojump_clock: MockClock,
) -> None:
    # The store's note of which process asked: an answer to the id the
    # event shows may reach another process at once.
    pending = PendingApprovals()
    order: list[str] = []

    async def listing(question: ApprovalQuestion, seconds: float) -> None:
        order.append(f"listed {question.id} {seconds:g}")

    async def publish(event: StreamEvent) -> None:
        if isinstance(event, ApprovalRequested):
            order.append(f"shown {event.id}")
            pending.answer(event.id, True, by="a")

    with pending.listed_with(listing):
        await pending.ask(tool_name="t", command="c", reason="r", seconds=60, publish=publish)
    await pending.ask(tool_name="t", command="c", reason="r", seconds=5)  # expires unlisted
    qid = order[0].split()[1]
    assert order == [f"listed {qid} 60", f"shown {qid}"]


async def test_a_surface_gets_its_channel_from_the_config(autojump_clock: MockClock) -> None:
    settings = ApprovalsConfig(
        timeout=100.0, approvers=["ops"], per_platform=ApprovalTimeoutsConfig(slack=20.0)
    )
    async with agent_on_double([], approvals=settings) as (agent, _):
        assert agent.approval_channel("slack", "U1") == ApprovalChannel(
            "U1", frozenset({"ops"}), 20.0
        )
        assert agent.approval_channel("api_server", None).timeout == 100.0
