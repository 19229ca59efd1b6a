"""Telegram's native drafts (``sendMessageDraft``) through the gateway.

End to end: the real ``hermes-trio gateway`` process against the fake Bot
API and the scripted model server on loopback ports. In process, on
MockClock: the fallback to edits (logged once per chat, or once for a
server without the method) and a 429 on a draft, with exact times."""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
import trio
from support import clean_env, gateway_process, make_config
from trio.testing import MockClock

from hermes_trio.agent import open_agent
from hermes_trio.config import (
    Config,
    PlatformsConfig,
    StreamingConfig,
    TelegramConfig,
    load_config,
)
from hermes_trio.gateway import Gateway, build_adapters, open_gateway
from hermes_trio.platforms.registry import TELEGRAM
from hermes_trio.platforms.telegram.adapter import (
    TelegramAdapter,
    TelegramDraftMessenger,
    TelegramMessenger,
)
from hermes_trio.testing import (
    FakeTelegram,
    FakeTransport,
    ModelDouble,
    RecordedRequest,
    Step,
    TextReply,
    ToolCallReply,
    open_fake_telegram,
    open_scripted_server,
)
from hermes_trio.tools import ToolContext, ToolRegistry, ToolResult

TOKEN = "424242:DRAFTS-secret_token_value"
USER = 7
PRIVATE = 31  # a user's private chat has the user's (positive) id
# Not a run of digits another test's key ends in: secrets registered by
# other tests in this process (the partial-echo rule) would redact it.
GROUP = -1002468013579
FORUM = -1009876543210
CURSOR = " ▌"


def answer_for(question: str) -> str:
    return f"Answer to {question}: " + " ".join(f"word{i}" for i in range(30))


def answer(request: RecordedRequest) -> Step:
    question = request.json["messages"][-1]["content"]
    # Half a second of tokens: several drafts or edits at the 0.1 s interval.
    return TextReply(answer_for(question), delay=0.015)


def chat_calls(telegram: FakeTelegram, method: str, chat: int) -> list[Any]:
    return [c for c in telegram.calls_to(method) if str(c.params.get("chat_id")) == str(chat)]


async def ask(telegram: FakeTelegram, chat: int, question: str, **push: Any) -> None:
    telegram.push_message(chat, USER, question, **push)
    with trio.fail_after(15):
        await telegram.wait_until(lambda: answer_for(question) in telegram.texts(chat))


def assert_drafted(telegram: FakeTelegram, chat: int, question: str) -> None:
    """Several drafts of one id with growing text, then exactly one
    message with the model's text, and no edit."""
    final = answer_for(question)
    drafts = telegram.drafts[str(chat)]
    assert len(drafts) >= 2, drafts
    assert len({d.draft_id for d in drafts}) == 1 and drafts[0].draft_id != 0
    texts = [d.text for d in drafts]
    assert all(len(b) > len(a) for a, b in pairwise(texts)), texts
    assert all(final.startswith(t) for t in texts), texts
    sends = chat_calls(telegram, "sendMessage", chat)
    assert len(sends) == 1 and sends[0].status == 200
    # Both in MarkdownV2, as the adapter writes every text.
    assert sends[0].params["parse_mode"] == "MarkdownV2"
    assert all(d.parse_mode == "MarkdownV2" for d in drafts)
    assert [m.text for m in telegram.visible(chat)] == [final]
    assert telegram.visible(chat)[0].history == [final]
    assert chat_calls(telegram, "editMessageText", chat) == []


def assert_edited(telegram: FakeTelegram, chat: int, question: str) -> None:
    """One message, edited as it grew (the cursor while growing), the
    model's text once at the end."""
    final = answer_for(question)
    (message,) = telegram.visible(chat)
    assert message.text == final and message.history.count(final) == 1
    interim = message.history[:-1]
    assert interim and all(t.endswith(CURSOR) for t in interim), message.history
    assert len(chat_calls(telegram, "sendMessage", chat)) == 1


CONFIG = """\
streaming:
  enabled: true
  edit_interval: 0.1
  min_tokens: 2
"""


def process_env(tmp_path: Path, telegram: FakeTelegram, model_url: str, **extra: str) -> dict:
    (tmp_path / "config.yaml").write_text(CONFIG)
    return clean_env(
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_API_BASE_URL=telegram.base_url,
        TELEGRAM_ALLOWED_USERS=str(USER),
        HERMES_MODEL_BASE_URL=model_url,
        HERMES_DATA_DIR=str(tmp_path / "data"),
        **extra,
    )


async def test_gateway_process_drafts_in_private_chats_and_edits_elsewhere(
    tmp_path: Path,
) -> None:
    async with (
        open_scripted_server(default=answer) as model,
        open_fake_telegram(TOKEN) as telegram,
    ):
        env = process_env(tmp_path, telegram, model.base_url)
        async with gateway_process(env, tmp_path) as (process, out, err):
            with trio.fail_after(15):
                await out.wait_for(b"running telegram")

            # A private chat, transport left to its default (auto): a draft.
            await ask(telegram, PRIVATE, "in private")
            assert_drafted(telegram, PRIVATE, "in private")

            # A group: the answer is edited, as before; no draft is tried.
            await ask(telegram, GROUP, "in a group", chat_type="supergroup")
            assert_edited(telegram, GROUP, "in a group")
            assert telegram.drafts[str(GROUP)] == []
            assert chat_calls(telegram, "sendMessageDraft", GROUP) == []
            # A forum topic of a group: edits too, in the topic.
            await ask(telegram, FORUM, "in a topic", topic=3)
            assert_edited(telegram, FORUM, "in a topic")
            assert telegram.texts(FORUM, topic=3) == [answer_for("in a topic")]
            assert chat_calls(telegram, "sendMessageDraft", FORUM) == []

            # A Bot API server without the method (404): edits, the final
            # text intact, and one log line for every chat.
            telegram.drafts_supported = False
            await ask(telegram, PRIVATE + 1, "on an old server")
            assert_edited(telegram, PRIVATE + 1, "on an old server")
            refused = chat_calls(telegram, "sendMessageDraft", PRIVATE + 1)
            assert [c.status for c in refused] == [404]
            await ask(telegram, PRIVATE + 2, "on an old server again")
            assert_edited(telegram, PRIVATE + 2, "on an old server again")
            assert chat_calls(telegram, "sendMessageDraft", PRIVATE + 2) == []

            process.send_signal(signal.SIGTERM)
            with trio.fail_after(10):
                assert await process.wait() == 0, err.text()
        assert err.text().count("does not offer sendMessageDraft") == 1, err.text()
        assert TOKEN not in out.text() + err.text()


async def test_gateway_process_transport_edit_restores_edits_in_private_chats(
    tmp_path: Path,
) -> None:
    async with (
        open_scripted_server(default=answer) as model,
        open_fake_telegram(TOKEN) as telegram,
    ):
        env = process_env(tmp_path, telegram, model.base_url, HERMES_STREAMING_TRANSPORT="edit")
        async with gateway_process(env, tmp_path) as (process, out, err):
            with trio.fail_after(15):
                await out.wait_for(b"running telegram")
            await ask(telegram, PRIVATE, "edits please")
            assert_edited(telegram, PRIVATE, "edits please")
            assert telegram.calls_to("sendMessageDraft") == []
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(10):
                assert await process.wait() == 0, err.text()


async def test_gateway_process_refused_draft_falls_back_with_the_final_text_intact(
    tmp_path: Path,
) -> None:
    async with (
        open_scripted_server(default=answer) as model,
        open_fake_telegram(TOKEN) as telegram,
    ):
        # transport: draft tries drafts in a group too; Telegram refuses
        # them there (400 TEXTDRAFT_PEER_INVALID): that chat turns to edits.
        env = process_env(tmp_path, telegram, model.base_url, HERMES_STREAMING_TRANSPORT="draft")
        async with gateway_process(env, tmp_path) as (process, out, err):
            with trio.fail_after(15):
                await out.wait_for(b"running telegram")
            await ask(telegram, GROUP, "first", chat_type="supergroup")
            assert_edited(telegram, GROUP, "first")
            (refused,) = chat_calls(telegram, "sendMessageDraft", GROUP)
            assert refused.status == 400
            assert refused.response["description"] == "Bad Request: TEXTDRAFT_PEER_INVALID"
            # The next answer there goes straight to edits ...
            await ask(telegram, GROUP, "second", chat_type="supergroup")
            assert len(chat_calls(telegram, "sendMessageDraft", GROUP)) == 1
            first, second = telegram.visible(GROUP)
            assert second.text == answer_for("second")
            assert second.edits >= 1 and second.history.count(second.text) == 1
            # ... while a private chat still gets its draft.
            await ask(telegram, PRIVATE, "private")
            assert_drafted(telegram, PRIVATE, "private")
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(10):
                assert await process.wait() == 0, err.text()
        assert err.text().count(f"chat {GROUP} refused a draft") == 1, err.text()


# -- in process, on MockClock -------------------------------------------------


def gateway_config(model_url: str, **telegram: Any) -> Config:
    return make_config(
        model_url,
        # Virtual time costs nothing: the product's own limits.
        model={"timeouts": {"first_token": 120, "idle": 60, "request": 600}},
        streaming=StreamingConfig(enabled=True, edit_interval=1.0, min_tokens=2),
        platforms=PlatformsConfig(
            telegram=TelegramConfig(
                token=TOKEN,
                api_base_url="http://telegram.test",
                allowed_users=[USER],
                poll_timeout=5,
                **telegram,
            )
        ),
    )


@asynccontextmanager
async def in_process(
    script: Sequence[Step], *, tools: ToolRegistry | None = None, **telegram: Any
) -> AsyncIterator[tuple[Gateway, FakeTelegram]]:
    model = ModelDouble(script)
    fake = FakeTelegram(TOKEN)
    config = gateway_config(model.base_url, **telegram)
    async with (
        httpx.AsyncClient(transport=FakeTransport(fake.handle)) as client,
        open_agent(config, transport=model, tools=tools) as agent,
        open_gateway(config, adapters=build_adapters(config, client), agent=agent) as gateway,
    ):
        yield gateway, fake


async def answered(gateway: Gateway, chat: int, n: int) -> None:
    with trio.fail_after(300):
        await gateway.wait_until(
            lambda: gateway.turns_done("telegram", chat) >= n and gateway.idle()
        )


SLOW = " ".join(f"w{i}" for i in range(12))


async def test_drafts_on_the_grid_then_one_message(autojump_clock: MockClock) -> None:
    async with in_process([TextReply(SLOW, delay=0.5)]) as (gateway, telegram):
        telegram.push_message(PRIVATE, USER, "hi")
        await answered(gateway, PRIVATE, 1)
    drafts = telegram.drafts[str(PRIVATE)]
    start = drafts[0].time
    # Tokens every 0.5 s for 6 s: a draft each second from the second token on.
    assert [d.time - start for d in drafts] == pytest.approx([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    assert len({d.draft_id for d in drafts}) == 1
    (message,) = telegram.visible(PRIVATE)
    assert message.text == SLOW and message.history == [SLOW]
    assert telegram.calls_to("editMessageText") == []


class _Wait:
    """A tool that takes 70 seconds (of the trio clock)."""

    name = "wait"
    description = "Waits a while."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    def preview(self, args: dict[str, Any]) -> str:
        return "70 s"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await trio.sleep(70)
        return ToolResult(True, "waited")


async def test_the_draft_is_refreshed_through_a_long_tool_run(autojump_clock: MockClock) -> None:
    script: list[Step] = [
        ToolCallReply([("wait", {})], text="Let me wait.", delay=0.5),
        TextReply(SLOW, delay=0.5),
    ]
    async with in_process(script, tools=ToolRegistry([_Wait()])) as (gateway, telegram):
        telegram.push_message(PRIVATE, USER, "wait for it")
        await answered(gateway, PRIVATE, 1)
    drafts = telegram.drafts[str(PRIVATE)]
    # The text before the call, a message at 2.0; then the tool's progress
    # is the draft, re-sent every 20 s while the tool runs (until 72.0) ...
    progress = [d.time for d in drafts if d.text == "🔧 wait: 70 s"]
    assert progress == pytest.approx([2.5, 22.5, 42.5, 62.5])
    # ... so the preview never goes 30 s without a call.
    assert all(b.time - a.time <= 20.0 + 1e-6 for a, b in pairwise(drafts))
    assert len({d.draft_id for d in drafts}) == 1
    assert telegram.texts(PRIVATE) == ["Let me wait.", SLOW]
    assert telegram.calls_to("editMessageText") == []


async def test_a_429_on_a_draft_waits_retry_after(autojump_clock: MockClock) -> None:
    async with in_process([TextReply(SLOW, delay=0.5)]) as (gateway, telegram):
        telegram.fail_next(
            "sendMessageDraft",
            429,
            "Too Many Requests: retry after 3",
            parameters={"retry_after": 3},
        )
        telegram.push_message(PRIVATE, USER, "hi")
        await answered(gateway, PRIVATE, 1)
    calls = telegram.calls_to("sendMessageDraft")
    assert calls[0].status == 429
    assert calls[1].status == 200 and calls[1].time - calls[0].time == pytest.approx(3.0)
    (message,) = telegram.visible(PRIVATE)
    assert message.text == SLOW and message.history == [SLOW]


async def test_a_refused_draft_is_logged_once_per_chat(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="hermes_trio.platforms.telegram")
    script = [TextReply(SLOW, delay=0.5) for _ in range(3)]
    async with in_process(script, transport="draft") as (gateway, telegram):
        for chat, n in [(GROUP, 1), (GROUP, 2), (GROUP - 1, 1)]:
            telegram.push_message(chat, USER, "hi", chat_type="group")
            await answered(gateway, chat, n)
    lines = [r.getMessage() for r in caplog.records if "refused a draft" in r.getMessage()]
    assert lines == [
        f"telegram: chat {GROUP} refused a draft (Bad Request: TEXTDRAFT_PEER_INVALID); "
        "editing messages there instead",
        f"telegram: chat {GROUP - 1} refused a draft (Bad Request: TEXTDRAFT_PEER_INVALID); "
        "editing messages there instead",
    ]
    # One draft tried per chat; every answer there edited, its text whole.
    assert len(chat_calls(telegram, "sendMessageDraft", GROUP)) == 1
    assert len(chat_calls(telegram, "sendMessageDraft", GROUP - 1)) == 1
    assert telegram.texts(GROUP) == [SLOW, SLOW] and telegram.texts(GROUP - 1) == [SLOW]
    assert all(m.history.count(SLOW) == 1 for m in telegram.visible(GROUP))


async def test_transport_settings_reach_the_adapter(tmp_path: Path) -> None:
    async with httpx.AsyncClient() as client:

        def adapter(yaml_text: str, env: dict[str, str] | None = None) -> TelegramAdapter:
            path = tmp_path / "config.yaml"
            path.write_text("platforms:\n  telegram:\n    token: '1:abc'\n" + yaml_text)
            config = load_config(path, env=env or {})
            built = TELEGRAM.build(config, client)
            assert isinstance(built, TelegramAdapter)
            return built

        assert adapter("").transport == "auto"
        assert adapter("streaming:\n  transport: edit\n").transport == "edit"
        assert adapter("", {"HERMES_STREAMING_TRANSPORT": "edit"}).transport == "edit"
        # The platform's own key wins over the global one.
        both = "    transport: draft\nstreaming:\n  transport: edit\n"
        assert adapter(both).transport == "draft"
        with pytest.raises(ValueError, match=r"streaming\.transport: expected 'auto' or 'draft'"):
            adapter("streaming:\n  transport: drafts\n")

        auto = adapter("")
        assert auto.drafts_in("31") and not auto.drafts_in(str(GROUP))
        assert not auto.drafts_in("@channel")
        first, second = auto.messenger("31"), auto.messenger("31", "5")
        assert isinstance(first, TelegramDraftMessenger) and first.draft_id > 0
        assert isinstance(second, TelegramDraftMessenger) and second.draft_id != first.draft_id
        assert type(auto.messenger(str(GROUP))) is TelegramMessenger
        assert type(adapter("    transport: edit\n").messenger("31")) is TelegramMessenger
        assert isinstance(
            adapter("    transport: draft\n").messenger(str(GROUP)), TelegramDraftMessenger
        )


async def test_the_fake_bot_api_takes_drafts_as_telegram_does() -> None:
    fake = FakeTelegram(TOKEN)
    fake.push_message(PRIVATE, USER, "hi")
    fake.push_message(GROUP, USER, "hi", chat_type="supergroup")
    async with httpx.AsyncClient(
        transport=FakeTransport(fake.handle), base_url=f"http://telegram.test/bot{TOKEN}/"
    ) as http:

        async def draft(**params: Any) -> tuple[int, Any]:
            response = await http.post("sendMessageDraft", json=params)
            body = response.json()
            return response.status_code, body.get("result", body.get("description"))

        assert await draft(chat_id=PRIVATE, draft_id=5, text="Hel") == (200, True)
        # Empty text is the "Thinking…" placeholder; text may be left out.
        assert await draft(chat_id=PRIVATE, draft_id=5, text="") == (200, True)
        assert await draft(chat_id=PRIVATE, draft_id=5) == (200, True)
        assert await draft(chat_id=PRIVATE, draft_id=5, text="*bold*", parse_mode="MarkdownV2") == (
            200,
            True,
        )
        assert [d.text for d in fake.drafts[str(PRIVATE)]] == ["Hel", "", "", "bold"]
        assert {d.draft_id for d in fake.drafts[str(PRIVATE)]} == {5}
        # Only private chats; a non-zero integer draft_id; at most 4096 characters.
        assert await draft(chat_id=GROUP, draft_id=5, text="x") == (
            400,
            "Bad Request: TEXTDRAFT_PEER_INVALID",
        )
        assert (await draft(chat_id=PRIVATE, draft_id=0, text="x"))[0] == 400
        assert (await draft(chat_id=PRIVATE, draft_id="five", text="x"))[0] == 400
        assert (await draft(chat_id=PRIVATE, text="x"))[0] == 400
        assert (await draft(chat_id="@somechannel", draft_id=5, text="x"))[0] == 400
        # Integers may come as strings, as with every Bot API method.
        assert await draft(chat_id=str(PRIVATE), draft_id="5", text="y") == (200, True)
        assert (await draft(chat_id=PRIVATE, draft_id=5, text="x" * 4097))[0] == 400
        assert (await draft(chat_id=PRIVATE, draft_id=5, text="*open", parse_mode="MarkdownV2"))[
            1
        ].startswith("Bad Request: can't parse entities")
        # Drafts are previews: no message appears.
        assert fake.visible(PRIVATE) == []
        # A Bot API server older than the method.
        fake.drafts_supported = False
        assert await draft(chat_id=PRIVATE, draft_id=5, text="x") == (404, "Not Found")
