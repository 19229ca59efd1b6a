"""Cancellation and approval through a whole agent turn.

The cancellation test runs on trio's MockClock with no autojump: virtual
time only moves if something sleeps it forward, so "no virtual time passed"
means the cancel took effect at once, not after some timeout.
"""

from __future__ import annotations

import os
from functools import partial

import trio
import trio.testing
from support import agent_on_double, make_config, run_turn

from hermes_trio.agent import open_agent
from hermes_trio.events import StreamEvent, ToolCallChunk, ToolCallFinished, Usage
from hermes_trio.testing import Stall, TextReply, ToolCallReply, open_scripted_server
from hermes_trio.tools import ApprovalDecision, ApprovalRequest
from hermes_trio.turn import TokenMeter


async def test_cancel_kills_a_running_terminal_tool(
    mock_clock: trio.testing.MockClock, tmp_path
) -> None:
    fifo = tmp_path / "pid"
    os.mkfifo(fifo)
    command = f"echo $$ > {fifo}; exec sleep 300"
    script = [ToolCallReply(calls=[("terminal", {"command": command})])]
    async with open_scripted_server(script) as server:
        config = make_config(server.base_url, agent={"yolo": True})
        async with open_agent(config) as agent:
            messages = [{"role": "user", "content": "sleep"}]
            send, receive = trio.open_memory_channel[StreamEvent](16)
            with trio.CancelScope() as turn_scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(agent.run_turn, messages, send)
                    async with receive:
                        async for event in receive:
                            if isinstance(event, ToolCallChunk):
                                break
                        # Opening a FIFO blocks until the shell writes its pid.
                        pid = int(await trio.to_thread.run_sync(fifo.read_text))
                        os.kill(pid, 0)  # running
                        cancelled_at = trio.current_time()
                        turn_scope.cancel()
            assert trio.current_time() == cancelled_at
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        pass
    else:  # pragma: no cover - the failure message
        raise AssertionError(f"tool process {pid} is still running after the cancel")
    # Every tool call in the history has a result, so the conversation can go on.
    assert messages[-1]["role"] == "tool"
    assert "interrupted" in messages[-1]["content"]


DANGEROUS = "true || shutdown -h now"  # matches the shutdown pattern; `true` short-circuits


async def _dangerous_turn(config_changes: dict, approve=None):
    script = [
        ToolCallReply(calls=[("terminal", {"command": DANGEROUS + "; echo ran-it"})]),
        TextReply("ok"),
    ]
    async with open_scripted_server(script) as server:
        config = make_config(server.base_url, agent=config_changes)
        async with open_agent(config, approve=approve) as agent:
            events, _ = await run_turn(agent, "do it")
    return next(e for e in events if isinstance(e, ToolCallFinished)), server


async def test_dangerous_command_is_refused_without_approval() -> None:
    finished, server = await _dangerous_turn({})
    assert not finished.ok
    assert "refused" in finished.result and "ran-it" not in finished.result
    tool_message = server.requests[1].json["messages"][-1]
    assert "refused" in tool_message["content"]


async def test_dangerous_command_denied_by_the_user() -> None:
    asked: list[ApprovalRequest] = []

    async def deny(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision.DENY

    finished, _ = await _dangerous_turn({}, approve=deny)
    assert not finished.ok and "ran-it" not in finished.result
    assert asked and "shutdown" in asked[0].command


async def test_dangerous_command_approved_once() -> None:
    async def once(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision.ONCE

    finished, _ = await _dangerous_turn({}, approve=once)
    assert finished.ok and "ran-it" in finished.result


async def test_yolo_runs_dangerous_commands_without_asking() -> None:
    async def never(request: ApprovalRequest) -> ApprovalDecision:  # pragma: no cover
        raise AssertionError("yolo must not ask")

    finished, _ = await _dangerous_turn({"yolo": True}, approve=never)
    assert finished.ok and "ran-it" in finished.result


async def test_a_meter_counts_what_a_turn_cut_off_had_streamed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Nine deltas, then the model thinks an hour: the turn is cut off before
    # the model server's usage arrives, yet the meter says what it cost.
    said = " ".join(f"t{i}" for i in range(9))
    async with agent_on_double([Stall(said, seconds=3600)]) as (agent, _):
        meter = TokenMeter()
        messages = [{"role": "user", "content": "go"}]
        send, receive = trio.open_memory_channel[StreamEvent](16)
        # Cut off after a second: before model.timeouts.idle (5 s) would end it.
        with trio.move_on_after(1) as cut:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(partial(agent.run_turn, messages, send, meter=meter))
                async with receive:
                    async for _ in receive:
                        pass
    assert cut.cancelled_caught and trio.current_time() == 1
    assert meter.tokens == 9
    assert meter.spent(None) == 9
    assert meter.spent(Usage(completion_tokens=20)) == 20
