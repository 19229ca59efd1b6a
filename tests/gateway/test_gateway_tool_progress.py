"""Tool progress in chats: ``/verbose`` per chat, and the one-shot hint for
a tool that runs long while progress is hidden (once per user, also across
a restart of the real ``hermes-trio gateway`` process)."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import trio
from support import clean_env, gateway_process, make_config
from test_gateway_runtime import STREAMING, ScriptedAdapter
from trio.testing import MockClock

from hermes_trio.agent import open_agent
from hermes_trio.config import DisplayConfig
from hermes_trio.gateway import Gateway, open_gateway
from hermes_trio.gateway.sessions import LONG_TOOL_HINT
from hermes_trio.testing import ModelDouble, Step, TextReply, ToolCallReply, open_scripted_server
from hermes_trio.testing.fake_telegram import FakeTelegram, open_fake_telegram
from hermes_trio.tools import ToolContext, ToolRegistry, ToolResult

HINT = LONG_TOOL_HINT.replace("{tool}", "nap")


@dataclass
class Nap:
    """A tool that takes its time (on whatever clock the test runs)."""

    name: ClassVar[str] = "nap"
    description: ClassVar[str] = "Sleep for a while."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"seconds": {"type": "number"}},
        "required": ["seconds"],
    }

    def preview(self, args: dict[str, Any]) -> str:
        return f"{args['seconds']} s"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await trio.sleep(args["seconds"])
        return ToolResult(True, "rested")


def nap_turn(seconds: float, answer: str) -> list[Step]:
    return [ToolCallReply([("nap", {"seconds": seconds})]), TextReply(answer)]


@asynccontextmanager
async def napping_gateway(
    script: Sequence[Step], adapter: ScriptedAdapter, *, show_tools: bool = True
) -> AsyncIterator[Gateway]:
    double = ModelDouble(script)
    config = make_config(
        double.base_url,
        streaming=STREAMING,
        agent={"long_tool_hint": 10},
        display=DisplayConfig(show_tools=show_tools),
    )
    async with (
        open_agent(config, transport=double, tools=ToolRegistry([Nap()])) as agent,
        open_gateway(
            config, adapters=[adapter], agent=agent, allowed_users={adapter.name: ["u1", "u2"]}
        ) as gateway,
    ):
        yield gateway


async def _ask(
    gateway: Gateway, adapter: ScriptedAdapter, chat: str, text: str, user: str = "u1"
) -> None:
    await adapter.push(chat, user, text)
    await trio.sleep(0.01)  # on the mock clock: the gateway has taken it
    await gateway.wait_until(gateway.idle)


async def test_verbose_turns_tool_progress_off_and_on_for_that_chat_only(
    autojump_clock: MockClock,
) -> None:
    adapter = ScriptedAdapter()
    script = [*nap_turn(2, "one"), *nap_turn(2, "two"), *nap_turn(2, "three")]
    script += nap_turn(2, "four")
    async with napping_gateway(script, adapter) as gateway:
        await _ask(gateway, adapter, "a", "first")
        assert adapter.messenger("a").visible() == ["🔧 nap: 2 s", "one"]
        await _ask(gateway, adapter, "a", "/verbose")
        await _ask(gateway, adapter, "a", "second")
        # The other chat keeps the default.
        await _ask(gateway, adapter, "b", "third")
        await _ask(gateway, adapter, "a", "/verbose on")
        await _ask(gateway, adapter, "a", "fourth")
    assert adapter.messenger("a").visible() == [
        "🔧 nap: 2 s",
        "one",
        "Tool progress is off. /verbose turns it on.",
        "two",
        "Tool progress is on: each tool is shown while it runs. /verbose turns it off.",
        "🔧 nap: 2 s",
        "four",
    ]
    assert adapter.messenger("b").visible() == ["🔧 nap: 2 s", "three"]


async def test_a_bad_verbose_argument_is_explained(autojump_clock: MockClock) -> None:
    adapter = ScriptedAdapter()
    async with napping_gateway([], adapter) as gateway:
        await _ask(gateway, adapter, "a", "/verbose loud")
    (reply,) = adapter.messenger("a").visible()
    assert reply.startswith("/verbose turns tool progress on or off: /verbose on, /verbose off")


async def test_the_long_tool_hint_comes_once_per_user_and_verbose_acts_at_once(
    autojump_clock: MockClock,
) -> None:
    adapter = ScriptedAdapter()
    script = [*nap_turn(30, "first nap"), *nap_turn(30, "second nap"), *nap_turn(30, "u2's nap")]
    async with napping_gateway(script, adapter, show_tools=False) as gateway:
        await _ask(gateway, adapter, "a", "nap please")
        chat = adapter.messenger("a")
        assert chat.visible() == [HINT, "first nap"]
        hint_call = next(c for c in chat.calls if c.text == HINT)
        assert hint_call.time == 10.0  # when the tool had run agent.long_tool_hint seconds
        # The same user again: no hint. /verbose in the middle shows the tool at once.
        start = trio.current_time()
        await adapter.push("a", "u1", "again")
        await trio.sleep(15)
        await adapter.push("a", "u1", "/verbose")
        await trio.sleep(1)
        shown = [c for c in chat.calls if (c.text or "").startswith("🔧 nap")]
        assert [(round(c.time - start, 6), c.text) for c in shown] == [(15.0, "🔧 nap: 30 s (10s)")]
        await trio.sleep(0.01)
        await gateway.wait_until(gateway.idle)
        assert chat.visible()[2:] == [
            "🔧 nap: 30 s (10s)",
            "second nap",
            "Tool progress is on: each tool is shown while it runs. /verbose turns it off.",
        ]
        # Another user in another chat with tool progress hidden gets the hint once too.
        await _ask(gateway, adapter, "b", "nap too", user="u2")
        assert adapter.messenger("b").visible() == [HINT, "u2's nap"]


# ---------------------------------------------------------------------------
# Across a restart of the real process

TOKEN = "987654:HINT-secret_token_value"
SLEEP = {"command": "sleep 0.7"}


def _shows(telegram: FakeTelegram, chat: int, text: str) -> bool:
    return any(text in shown for shown in telegram.texts(chat))


async def _until_shown(telegram: FakeTelegram, chat: int, text: str) -> None:
    with trio.fail_after(15):
        await telegram.wait_until(partial(_shows, telegram, chat, text))


async def test_the_hint_is_not_repeated_after_a_restart(tmp_path: Path) -> None:
    """Each message makes the terminal tool run past ``agent.long_tool_hint``
    with tool progress hidden; user 7 sees the hint in the first process
    only, user 8 (first seen in the second) sees it there."""
    (tmp_path / "config.yaml").write_text(
        "agent:\n  long_tool_hint: 0.2\n  tools: [terminal]\ndisplay:\n  show_tools: false\n"
    )
    script: list[Step] = []
    for answer in ("first", "second", "third"):
        script += [ToolCallReply([("terminal", SLEEP)]), TextReply(f"{answer} answer")]
    hint = LONG_TOOL_HINT.replace("{tool}", "terminal")
    async with open_scripted_server(script) as model, open_fake_telegram(TOKEN) as telegram:
        env = clean_env(
            TELEGRAM_BOT_TOKEN=TOKEN,
            TELEGRAM_API_BASE_URL=telegram.base_url,
            TELEGRAM_ALLOWED_USERS="7,8",
            HERMES_MODEL_BASE_URL=model.base_url,
            HERMES_STREAMING_ENABLED="1",
            HERMES_DATA_DIR=str(tmp_path / "data"),
        )
        runs = [[(31, 7, "first answer")], [(31, 7, "second answer"), (32, 8, "third answer")]]
        for asks in runs:
            async with gateway_process(env, tmp_path) as (process, out, err):
                with trio.fail_after(15):
                    await out.wait_for(b"running telegram")
                for chat, user, answer in asks:
                    telegram.push_message(chat_id=chat, user_id=user, text="take your time")
                    await _until_shown(telegram, chat, answer)
                process.send_signal(signal.SIGTERM)
                with trio.fail_after(10):
                    assert await process.wait() == 0, err.text()
    assert telegram.texts(31) == [hint, "first answer", "second answer"]
    assert telegram.texts(32) == [hint, "third answer"]


async def test_a_hint_counts_as_seen_when_its_turn_is_stopped(autojump_clock: MockClock) -> None:
    adapter = ScriptedAdapter()
    script = [ToolCallReply([("nap", {"seconds": 30})]), *nap_turn(30, "second nap")]
    async with napping_gateway(script, adapter, show_tools=False) as gateway:
        await adapter.push("a", "u1", "nap please")
        await trio.sleep(12)  # the hint is out at 10 s
        await _ask(gateway, adapter, "a", "/stop")
        await _ask(gateway, adapter, "a", "again")
    visible = adapter.messenger("a").visible()
    assert visible.count(HINT) == 1, visible
    assert visible[-2:] == ["stopped", "second nap"]
