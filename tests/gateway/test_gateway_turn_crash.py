"""A crashing turn in the gateway: a bug in a tool or in the chat's editor
ends that turn with the turn's one crash policy (``internal_error``, logged
once), the chat is told, and the next message is answered."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import pytest
from support import crashing_tools, make_config
from test_gateway_runtime import STREAMING, ChatMessenger, ScriptedAdapter
from trio.testing import MockClock

from hermes_trio.agent import open_agent
from hermes_trio.gateway import Gateway, open_gateway
from hermes_trio.testing import ModelDouble, Step, TextReply, ToolCallReply

CRASH_NOTE = "⚠️ internal error: the turn failed (RuntimeError); the log has the details"


@asynccontextmanager
async def crashing_gateway(
    script: Sequence[Step], adapter: ScriptedAdapter
) -> AsyncIterator[Gateway]:
    double = ModelDouble(script)
    config = make_config(double.base_url, streaming=STREAMING)
    async with (
        open_agent(config, transport=double, tools=crashing_tools()) as agent,
        open_gateway(
            config, adapters=[adapter], agent=agent, allowed_users={adapter.name: ["u1"]}
        ) as gateway,
    ):
        yield gateway


def _crashes(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "hermes_trio.turn" and r.exc_info]


async def test_a_crashing_tool_ends_the_turn_and_the_chat_goes_on(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    adapter = ScriptedAdapter()
    script = [ToolCallReply([("probe", {})], text="Let me look."), TextReply("second answer")]
    async with crashing_gateway(script, adapter) as gateway:
        await adapter.push("c", "u1", "one")
        await gateway.wait_until(lambda: gateway.turns_done("memory", "c") == 1)
        await gateway.wait_until(gateway.idle)
        chat = adapter.messenger("c").visible()
        assert chat[-1].endswith(CRASH_NOTE), chat
        await adapter.push("c", "u1", "two")
        await gateway.wait_until(lambda: gateway.turns_done("memory", "c") == 2)
        assert adapter.messenger("c").visible()[-1] == "second answer"
    assert len(_crashes(caplog)) == 1
    assert any("turn failed after" in r.getMessage() for r in caplog.records)


class _BuggyMessenger(ChatMessenger):
    """A chat whose first message send hits a bug (not a platform error)."""

    def __init__(self) -> None:
        super().__init__()
        self.bugs = 1

    async def send(self, text: str) -> str:
        if self.bugs:
            self.bugs -= 1
            raise RuntimeError("messenger bug")
        return await super().send(text)


async def test_a_crashing_editor_ends_the_turn_and_the_chat_is_told(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = ScriptedAdapter()
    adapter.chats["c"] = _BuggyMessenger()
    async with crashing_gateway([TextReply("lost"), TextReply("second answer")], adapter) as (
        gateway
    ):
        await adapter.push("c", "u1", "one")
        await gateway.wait_until(lambda: gateway.turns_done("memory", "c") == 1)
        await gateway.wait_until(gateway.idle)
        # The editor's own cleanup leaves what it had marked as cut off; the
        # crash itself reached nobody, so the gateway says it.
        assert adapter.messenger("c").visible() == ["lost\n\n⏹ interrupted", CRASH_NOTE]
        await adapter.push("c", "u1", "two")
        await gateway.wait_until(lambda: gateway.turns_done("memory", "c") == 2)
        assert adapter.messenger("c").visible()[-1] == "second answer"
    crashes = _crashes(caplog)
    assert len(crashes) == 1 and "consumer" in crashes[0].getMessage()
