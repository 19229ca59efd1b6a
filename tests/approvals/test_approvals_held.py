"""Approval held for a later request (``ApprovalChannel(defer=True)``, the
Responses API's way): the turn publishes the question and ends at once with
the call neither run nor answered; a later turn given ``held`` runs the
approved call, or gives the model the refusal as the call's result, and
goes on."""

from __future__ import annotations

from typing import Any

from approval_support import REBOOT, Guarded, calls
from support import agent_on_double, run_turn
from trio.testing import MockClock

from hermes_trio.approvals import PENDING, ApprovalChannel
from hermes_trio.events import ApprovalRequested, ApprovalResolved, ToolCallFinished, TurnFinished
from hermes_trio.testing import TextReply
from hermes_trio.tools import ToolRegistry
from hermes_trio.turn import HeldCall, HeldCalls
from hermes_trio.wire.chat_chunks import ToolCall

HELD = ApprovalChannel(requester="key", timeout=60.0, defer=True)


async def test_a_held_call_ends_the_turn_and_a_later_turn_settles_it(
    autojump_clock: MockClock,
) -> None:
    tool = Guarded()
    script: list[Any] = [*calls(REBOOT)[:1], TextReply("ok, rebooted"), TextReply("fine")]
    async with agent_on_double(script, tools=ToolRegistry([tool])) as (agent, double):
        messages: list[dict[str, Any]] = [{"role": "user", "content": "reboot it"}]
        events, result = await run_turn(agent, messages, approvals=HELD)
        assert result.finish_reason == "approval"
        (asked,) = [e for e in events if isinstance(e, ApprovalRequested)]
        assert asked.tool_name == "guarded" and asked.arguments == {"command": REBOOT}
        assert asked.timeout == 60.0
        assert not [e for e in events if isinstance(e, ApprovalResolved | ToolCallFinished)]
        assert isinstance(events[-1], TurnFinished)
        assert events[-1].finish_reason == "approval"
        assert tool.ran == [] and PENDING.book.pending() == []
        # The call is in the conversation, with no result yet.
        assert messages[-1]["role"] == "assistant" and messages[-1]["tool_calls"]
        assert len(double.model_requests) == 1
        call = messages[-1]["tool_calls"][0]
        held_call = ToolCall(call["id"], call["function"]["name"], call["function"]["arguments"])

        # Approved: it runs, and the model hears its result.
        approved = list(messages)
        position = len(approved)
        approved.append({"role": "user", "content": "and say so"})
        _, result = await run_turn(
            agent, approved, approvals=HELD, held=HeldCalls(position, (HeldCall(held_call),))
        )
        assert tool.ran == [REBOOT]
        assert result.text == "ok, rebooted"
        sent = double.model_requests[1].json["messages"]
        assert sent[-2] == {"role": "tool", "tool_call_id": call["id"], "content": "ran reboot"}
        assert sent[-1] == {"role": "user", "content": "and say so"}

        # Denied: it never runs; the refusal is its result.
        denied = list(messages)
        refusal = HeldCall(held_call, "refused: the user denied this command")
        _, result = await run_turn(
            agent, denied, approvals=HELD, held=HeldCalls(len(denied), (refusal,))
        )
        assert tool.ran == [REBOOT]
        assert result.text == "fine"
        assert double.model_requests[2].json["messages"][-1]["content"] == refusal.refusal


async def test_an_interrupted_settling_leaves_every_call_a_result(
    autojump_clock: MockClock,
) -> None:
    import trio

    class Slow(Guarded):
        async def run(self, args: dict[str, Any], ctx: Any) -> Any:
            await trio.sleep(10)
            return await super().run(args, ctx)

    tool = Slow()
    async with agent_on_double([], tools=ToolRegistry([tool])) as (agent, _):
        call = ToolCall("call_1", "guarded", '{"command": "reboot"}')
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "reboot it"},
            {"role": "assistant", "content": "", "tool_calls": [call.to_message()]},
            {"role": "user", "content": "and say when it is done"},
        ]
        with trio.move_on_after(1):
            await run_turn(agent, messages, held=HeldCalls(2, (HeldCall(call),)))
        assert tool.ran == []
        # The result goes where the call is answered, before the new input.
        assert messages[2] == {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "interrupted by the user before this tool finished",
        }
        assert messages[3]["content"] == "and say when it is done"
