"""Gateway runtime: adapter supervision, WhatsApp and Home Assistant end to
end, the API server in the same nursery, shutdown."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import httpx
import pytest
import trio
from gateway_support import homeassistant_platforms, whatsapp_platforms
from support import make_config
from trio.testing import MockClock

from hermes_trio.agent import open_agent
from hermes_trio.config import (
    ApiServerConfig,
    PlatformsConfig,
    StreamingConfig,
    TelegramConfig,
)
from hermes_trio.consumers.messenger import PlatformError
from hermes_trio.gateway import Gateway, open_gateway, run_gateway_async
from hermes_trio.gateway.sessions import RESTART_NOTICE
from hermes_trio.platforms.base import InboundMessage
from hermes_trio.platforms.telegram.adapter import TelegramAdapter
from hermes_trio.testing import (
    FakeMessenger,
    FakeTelegram,
    FakeTransport,
    ModelDouble,
    ScriptedModelServer,
    Stall,
    Step,
    TextReply,
    open_fake_homeassistant,
    open_fake_telegram,
    open_fake_whatsapp,
    open_scripted_server,
)

STREAMING = StreamingConfig(enabled=True, edit_interval=0.05, min_tokens=1)


class ChatMessenger(FakeMessenger):
    """A ``FakeMessenger`` that says when its first message is out."""

    def __init__(self) -> None:
        super().__init__()
        self.first_sent = trio.Event()

    async def send(self, text: str) -> str:
        message_id = await super().send(text)
        self.first_sent.set()
        return message_id


class ScriptedAdapter:
    """An in-memory platform whose ``run`` fails as scripted, then serves."""

    def __init__(self, name: str = "memory", failures: Sequence[BaseException] = ()) -> None:
        self.name = name
        self.failures = list(failures)
        self.runs = 0
        self.run_times: list[float] = []
        self.chats: dict[str, ChatMessenger] = {}
        self._inbound: trio.MemorySendChannel[InboundMessage] | None = None

    async def run(
        self,
        inbound: trio.MemorySendChannel[InboundMessage],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        self.runs += 1
        self.run_times.append(trio.current_time())
        task_status.started()
        if self.failures:
            raise self.failures.pop(0)
        self._inbound = inbound
        await trio.sleep_forever()

    def messenger(self, chat_id: str, thread_id: str | None = None) -> ChatMessenger:
        return self.chats.setdefault(chat_id, ChatMessenger())

    async def push(self, chat_id: str, user_id: str, text: str) -> None:
        assert self._inbound is not None, "adapter is not running"
        await self._inbound.send(InboundMessage(self.name, chat_id, user_id, text))


@asynccontextmanager
async def gateway_stack(
    script: Sequence[Step], adapters: Sequence[Any] | None = None, **config: Any
) -> AsyncIterator[tuple[Gateway, ScriptedModelServer]]:
    """The gateway with ``adapters`` (each letting user "u1" in), or else with
    the platforms ``config`` enables, in front of a scripted model server."""
    async with open_scripted_server(script) as model:
        cfg = make_config(model.base_url, streaming=STREAMING, **config)
        allowed = None if adapters is None else {adapter.name: ["u1"] for adapter in adapters}
        async with open_gateway(
            cfg, adapters=adapters, allowed_users=allowed, restart_backoff_initial=0.01
        ) as gateway:
            yield gateway, model


@asynccontextmanager
async def gateway_on_double(
    script: Sequence[Step], adapters: Sequence[Any], **gateway: Any
) -> AsyncIterator[tuple[Gateway, ModelDouble]]:
    """The gateway with ``adapters`` (each letting user "u1" in) in front of
    an in-process model double: no socket, so it runs on MockClock."""
    double = ModelDouble(script)
    config = make_config(double.base_url, streaming=STREAMING)
    async with open_agent(config, transport=double) as agent:
        allowed = {adapter.name: ["u1"] for adapter in adapters}
        async with open_gateway(
            config, adapters=adapters, agent=agent, allowed_users=allowed, **gateway
        ) as opened:
            yield opened, double


async def test_crashing_adapter_is_restarted_without_stopping_the_others(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    flaky = ScriptedAdapter("flaky", [RuntimeError("boom"), PlatformError("network down")])
    steady = ScriptedAdapter("steady")
    script = [TextReply("steady answer"), TextReply("flaky answer")]
    async with gateway_on_double(script, [flaky, steady], restart_backoff_initial=1.5) as (
        gateway,
        _,
    ):
        await steady.push("c", "u1", "hi")
        await gateway.wait_until(
            lambda: flaky.runs == 3 and gateway.adapter_status["flaky"].state == "running"
        )
        await gateway.wait_until(lambda: gateway.turns_done("steady", "c") == 1)
        assert steady.run_times == [0.0]
        assert steady.chats["c"].visible() == ["steady answer"]
        # Restarted after 1.5 s, then after twice that.
        assert flaky.run_times == [0.0, 1.5, 4.5]
        assert gateway.adapter_status["flaky"].restarts == 2
        await flaky.push("c", "u1", "hi")
        await gateway.wait_until(lambda: gateway.turns_done("flaky", "c") == 1)
        assert flaky.chats["c"].visible() == ["flaky answer"]
    crashed = [r for r in caplog.records if "flaky: adapter crashed" in r.getMessage()]
    assert crashed and crashed[0].exc_info is not None
    assert any("network down" in r.getMessage() for r in caplog.records)


async def test_rejected_token_stops_that_adapter_only(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    token = "111:WRONG-token-never-logged"
    steady = ScriptedAdapter("steady")
    telegram = FakeTelegram("222:the-real-token")
    async with httpx.AsyncClient(transport=FakeTransport(telegram.handle)) as client:
        config = TelegramConfig(token=token, api_base_url="http://telegram.test")
        bad = TelegramAdapter(config, client)
        async with gateway_on_double([TextReply("still here")], [bad, steady]) as (gateway, _):
            status = gateway.adapter_status["telegram"]
            assert status.state == "failed"
            assert status.last_error is not None and "rejected" in status.last_error
            await trio.sleep(3600)  # an hour of backoff periods: no restart happens
            assert status.restarts == 0 and status.state == "failed"
            await steady.push("c", "u1", "hi")
            await gateway.wait_until(lambda: gateway.turns_done("steady", "c") == 1)
            assert steady.chats["c"].visible() == ["still here"]
    stopped = [r.getMessage() for r in caplog.records if "Not restarting" in r.getMessage()]
    assert len(stopped) == 1
    assert stopped[0].startswith("telegram: the bot token was rejected")
    assert all(token not in r.getMessage() for r in caplog.records)


async def test_shutdown_during_a_turn_leaves_the_restart_notice(
    autojump_clock: MockClock,
) -> None:
    adapter = ScriptedAdapter()
    model = ModelDouble([Stall("Halfway there", seconds=3600)])
    config = make_config(model.base_url, streaming=STREAMING, model={"timeouts": {"idle": 600}})
    async with open_agent(config, transport=model) as agent:
        async with trio.open_nursery() as nursery:
            await nursery.start(
                partial(
                    run_gateway_async,
                    config,
                    adapters=[adapter],
                    agent=agent,
                    allowed_users={"memory": ["u1"]},
                )
            )
            await trio.sleep(10)
            await adapter.push("c", "u1", "go")
            chat = adapter.messenger("c")
            await chat.first_sent.wait()
            await trio.sleep(20)
            nursery.cancel_scope.cancel()
    # Everything stopped at the instant of the shutdown, the last edit too.
    assert trio.current_time() == 30.0
    (text,) = chat.visible()
    # The chat learns the gateway stopped, not that someone interrupted it.
    assert text == f"Halfway there\n\n{RESTART_NOTICE.text}"
    assert chat.calls[-1].time == 30.0
    record = model.connections[-1]
    assert (record.closed_at, record.closed_by) == (30.0, "client")


async def test_whatsapp_gets_exactly_one_final_message_per_answer() -> None:
    user = "15551234567"
    script = [TextReply("first answer", delay=0.02), TextReply("second answer", delay=0.02)]
    async with open_fake_whatsapp() as whatsapp:
        platforms = whatsapp_platforms(whatsapp, user)
        async with gateway_stack(script, platforms=platforms) as (gateway, model):
            url = gateway.adapters["whatsapp"].webhook_url  # type: ignore[attr-defined]
            for n, text in enumerate(["one", "two"], start=1):
                response = await whatsapp.deliver_text(url, user, text)
                assert response.status_code == 200
                with trio.fail_after(5):
                    await gateway.wait_until(lambda n=n: gateway.turns_done("whatsapp", user) == n)
            assert whatsapp.texts_to(user) == ["first answer", "second answer"]
            # A stranger is refused with one short message and never reaches the model.
            await whatsapp.deliver_text(url, "15559999999", "hello?")
            with trio.fail_after(5):
                await gateway.wait_until(lambda: bool(whatsapp.texts_to("15559999999")))
            (refusal,) = whatsapp.texts_to("15559999999")
            assert "allowed users" in refusal
            assert len([r for r in model.requests if r.path.endswith("/completions")]) == 2


async def test_homeassistant_gets_exactly_one_final_reply_per_answer() -> None:
    script = [TextReply("lights are on", delay=0.02), TextReply("lights are off", delay=0.02)]
    async with open_fake_homeassistant() as ha:
        platforms = homeassistant_platforms(ha, "ana")
        async with gateway_stack(script, platforms=platforms) as (gateway, model):
            url = gateway.adapters["homeassistant"].webhook_url  # type: ignore[attr-defined]
            for n, text in enumerate(["lights on", "lights off"], start=1):
                response = await ha.post_message(
                    url, text, conversation_id="kitchen", user_id="ana"
                )
                assert response.status_code == 200
                with trio.fail_after(5):
                    await gateway.wait_until(
                        lambda n=n: gateway.turns_done("homeassistant", "kitchen") == n
                    )
            assert ha.replies("kitchen") == ["lights are on", "lights are off"]
            await ha.post_message(url, "unlock the door", conversation_id="porch", user_id="bob")
            with trio.fail_after(5):
                await gateway.wait_until(lambda: bool(ha.replies("porch")))
            assert len(ha.replies("porch")) == 1
            assert len([r for r in model.requests if r.path.endswith("/completions")]) == 2


async def test_api_server_runs_in_the_same_nursery() -> None:
    adapter = ScriptedAdapter()
    async with gateway_stack(
        [TextReply("from the api"), TextReply("from the chat")],
        [adapter],
        api_server=ApiServerConfig(enabled=True, port=0),
    ) as (gateway, _):
        assert gateway.api_server is not None
        async with httpx.AsyncClient(base_url=gateway.api_server.base_url) as client:
            models = await client.get("/models")
            assert models.status_code == 200
            answer = await client.post(
                "/chat/completions",
                json={"model": "hermes-agent", "messages": [{"role": "user", "content": "hi"}]},
            )
            assert answer.status_code == 200
            assert answer.json()["choices"][0]["message"]["content"] == "from the api"
        await adapter.push("c", "u1", "hi")
        with trio.fail_after(5):
            await gateway.wait_until(lambda: gateway.turns_done("memory", "c") == 1)
        assert adapter.chats["c"].visible() == ["from the chat"]


async def test_failing_turn_is_reported_and_the_session_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter = ScriptedAdapter()
    async with gateway_stack([TextReply("recovered")], [adapter]) as (gateway, _):
        original = gateway.agent.run_turn
        calls = 0

        async def broken(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise RuntimeError("tool exploded")
            return await original(*args, **kwargs)

        gateway.agent.run_turn = broken  # type: ignore[method-assign]
        await adapter.push("c", "u1", "one")
        with trio.fail_after(5):
            await gateway.wait_until(lambda: gateway.turns_done("memory", "c") == 1)
            await gateway.wait_until(gateway.idle)
        await adapter.push("c", "u1", "two")
        with trio.fail_after(5):
            await gateway.wait_until(lambda: gateway.turns_done("memory", "c") == 2)
        assert adapter.messenger("c").visible()[-1] == "recovered"
        # The turn's one crash policy, as the editor shows an error.
        assert any(
            t.startswith("⚠️ internal error: the turn failed (RuntimeError)")
            for t in adapter.messenger("c").visible()
        )
    crashes = [r for r in caplog.records if r.name == "hermes_trio.turn" and r.exc_info]
    assert len(crashes) == 1


async def test_commands_from_strangers_are_refused_too() -> None:
    adapter = ScriptedAdapter()
    async with gateway_stack([], [adapter]) as (gateway, _):
        await adapter.push("c", "intruder", "/new")
        with trio.fail_after(5):
            await gateway.wait_until(lambda: bool(adapter.messenger("c").visible()))
        assert gateway.session("memory", "c") is None
        assert [m.text for m in gateway.refused] == ["/new"]


async def test_logging_at_debug_never_shows_the_token(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    token = "333:DEBUG-token-secret"
    async with open_fake_telegram(token) as telegram:
        platforms = PlatformsConfig(
            telegram=TelegramConfig(
                token=token, api_base_url=telegram.base_url, allowed_users=[5], poll_timeout=5
            )
        )
        async with gateway_stack([TextReply("hello")], platforms=platforms) as (gateway, _):
            telegram.push_message(9, 5, "hi")
            with trio.fail_after(5):
                await gateway.wait_until(lambda: gateway.turns_done("telegram", 9) == 1)
    assert caplog.records
    assert all(token not in r.getMessage() for r in caplog.records)
