"""The fakes refuse the buttons and answers the real services refuse:
Telegram's 64-byte callback_data and one answer per callback query,
Discord's component limits and 3-second interaction window, Slack's Block
Kit limits, WhatsApp's three reply buttons of 20-character titles."""

from __future__ import annotations

from typing import Any

import httpx
import trio
from trio.testing import MockClock

from hermes_trio.testing import FakeDiscord, FakeSlack, FakeTelegram, FakeTransport, FakeWhatsApp
from hermes_trio.testing.fake_whatsapp import API_VERSION


def client(handle: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=FakeTransport(handle), base_url="http://fake.test")


def keyboard(data: str) -> dict[str, Any]:
    return {"inline_keyboard": [[{"text": "Approve", "callback_data": data}]]}


async def test_telegram_callback_data_and_answers() -> None:
    fake = FakeTelegram("1:T")
    async with client(fake.handle) as http:
        too_long = {"chat_id": 5, "text": "?", "reply_markup": keyboard("x" * 65)}
        answer = (await http.post("/bot1:T/sendMessage", json=too_long)).json()
        assert answer == {
            "ok": False,
            "error_code": 400,
            "description": "Bad Request: BUTTON_DATA_INVALID",
        }
        sent = {"chat_id": 5, "text": "?", "reply_markup": keyboard("y:" + "a" * 62)}
        message_id = (await http.post("/bot1:T/sendMessage", json=sent)).json()["result"][
            "message_id"
        ]
        update = fake.press_button(5, message_id, 7, "Approve")
        query = update["callback_query"]
        assert query["data"] == "y:" + "a" * 62
        assert query["message"]["reply_markup"] == keyboard("y:" + "a" * 62)
        ok = {"callback_query_id": query["id"], "text": "done"}
        assert (await http.post("/bot1:T/answerCallbackQuery", json=ok)).json()["ok"]
        again = (await http.post("/bot1:T/answerCallbackQuery", json=ok)).json()
        assert "query ID is invalid" in again["description"]
        # An edit without reply_markup takes the keyboard away.
        edit = {"chat_id": 5, "message_id": message_id, "text": "decided"}
        assert (await http.post("/bot1:T/editMessageText", json=edit)).json()["ok"]
        assert fake.messages["5"][0].keyboard == []


async def test_telegram_delivers_only_the_update_types_asked_for() -> None:
    fake = FakeTelegram("1:T")
    fake.push_message(5, 7, "hi")
    fake.push_update({"callback_query": {"id": "1", "data": "x"}})
    async with client(fake.handle) as http:
        polled = {"timeout": 0, "allowed_updates": ["message"]}
        updates = (await http.post("/bot1:T/getUpdates", json=polled)).json()["result"]
    assert [set(u) - {"update_id"} for u in updates] == [{"message"}]


def button(custom_id: str, label: str = "Approve", style: int = 3) -> dict[str, Any]:
    return {"type": 2, "style": style, "label": label, "custom_id": custom_id}


async def test_discord_components_and_the_interaction_window(autojump_clock: MockClock) -> None:
    fake = FakeDiscord("T")
    fake.session_id = "s"  # dispatches are recorded without a connection
    headers = {"authorization": "Bot T"}
    async with client(fake.handle) as http:
        rows = [{"type": 1, "components": [button("x" * 101)]}]
        refused = await http.post(
            "/api/v10/channels/50/messages",
            json={"content": "?", "components": rows},
            headers=headers,
        )
        assert (refused.status_code, refused.json()["code"]) == (400, 50035)
        rows = [{"type": 1, "components": [button("y:1"), button("n:1", "Deny", 4)]}]
        created = await http.post(
            "/api/v10/channels/50/messages",
            json={"content": "?", "components": rows},
            headers=headers,
        )
        message_id = created.json()["id"]
        pressed = fake.press_button("50", message_id, "7", "Deny")
        name, data = fake.events[-1][1:]
        assert name == "INTERACTION_CREATE"
        assert data["type"] == 3 and data["data"]["custom_id"] == "n:1" and "user" in data
        callback = f"/api/v10/interactions/{pressed.id}/{pressed.token}/callback"
        ok = await http.post(callback, json={"type": 6})  # no bot token needed
        assert ok.status_code == 204
        twice = await http.post(callback, json={"type": 6})
        assert twice.json()["code"] == 40060

        late = fake.press_button("50", message_id, "7", "Approve")
        await trio.sleep(3.5)
        too_late = await http.post(
            f"/api/v10/interactions/{late.id}/{late.token}/callback", json={"type": 6}
        )
        assert (too_late.status_code, too_late.json()["code"]) == (404, 10062)


async def test_slack_blocks_are_checked_and_update_keeps_or_clears_them() -> None:
    fake = FakeSlack()
    headers = {"authorization": f"Bearer {fake.bot_token}"}
    element = {
        "type": "button",
        "text": {"type": "plain_text", "text": "A" * 76},
        "action_id": "a",
        "value": "v",
    }
    async with client(fake.handle) as http:
        blocks = [{"type": "actions", "elements": [element]}]
        refused = await http.post(
            "/api/chat.postMessage",
            json={"channel": "D1", "text": "?", "blocks": blocks},
            headers=headers,
        )
        assert refused.json() == {"ok": False, "error": "invalid_blocks"}
        element["text"] = {"type": "plain_text", "text": "Approve"}
        posted = await http.post(
            "/api/chat.postMessage",
            json={"channel": "D1", "text": "?", "blocks": blocks},
            headers=headers,
        )
        ts = posted.json()["ts"]
        (message,) = fake.messages["D1"]
        await http.post(
            "/api/chat.update", json={"channel": "D1", "ts": ts, "text": "!"}, headers=headers
        )
        assert message.buttons() == ["Approve"]  # kept when left out
        envelope = fake.press_button("D1", ts, "U7", "Approve")
        assert envelope["type"] == "interactive"
        assert envelope["payload"]["actions"][0]["value"] == "v"
        await http.post(
            "/api/chat.update",
            json={"channel": "D1", "ts": ts, "text": "!", "blocks": []},
            headers=headers,
        )
        assert message.buttons() == []


async def test_whatsapp_reply_buttons_are_limited() -> None:
    fake = FakeWhatsApp(
        access_token="EAA-token", phone_number_id="100", app_secret="s", verify_token="v"
    )
    path = f"/{API_VERSION}/{fake.phone_number_id}/messages"
    headers = {"authorization": f"Bearer {fake.access_token}"}

    def message(titles: list[str]) -> dict[str, Any]:
        buttons = [{"type": "reply", "reply": {"id": t, "title": t}} for t in titles]
        return {
            "messaging_product": "whatsapp",
            "to": "1555",
            "type": "interactive",
            "interactive": {
                "type": "button",
                "body": {"text": "?"},
                "action": {"buttons": buttons},
            },
        }

    async with client(fake.handle) as http:
        for titles in (["a", "b", "c", "d"], ["x" * 21], []):
            refused = await http.post(path, json=message(titles), headers=headers)
            assert refused.status_code == 400
            assert refused.json()["error"]["code"] == 131009
        ok = await http.post(path, json=message(["Approve", "Deny"]), headers=headers)
        assert ok.status_code == 200
