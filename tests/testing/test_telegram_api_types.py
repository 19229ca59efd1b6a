"""The adapter and the fake Bot API hold to one contract,
``platforms/telegram/api_types.py``: every request the adapter makes has
the keys and value types of its method's parameters, and every answer the
fake gives has those of the Bot API object it stands for."""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

import httpx
import trio
from trio.testing import MockClock

from hermes_trio.config import TelegramConfig
from hermes_trio.consumers.messenger import Button, RateLimited
from hermes_trio.platforms.base import InboundMessage
from hermes_trio.platforms.telegram import api_types as api
from hermes_trio.platforms.telegram.adapter import TelegramAdapter, TelegramDraftMessenger
from hermes_trio.testing import FakeTelegram, FakeTransport

TOKEN = "424242:AAH-secret_token_value_XYZ"

PARAMS: dict[str, object] = {
    "getMe": None,
    "getUpdates": api.GetUpdatesParams,
    "getFile": api.GetFileParams,
    "sendMessage": api.SendMessageParams,
    "editMessageText": api.EditMessageTextParams,
    "sendMessageDraft": api.SendMessageDraftParams,
    "deleteMessage": api.DeleteMessageParams,
    "sendChatAction": api.SendChatActionParams,
    "answerCallbackQuery": api.AnswerCallbackQueryParams,
}
RESULTS: dict[str, object] = {
    "getMe": api.User,
    "getUpdates": list[api.Update],
    "getFile": api.File,
    "sendMessage": api.Message,
    "editMessageText": api.Message,
    "sendMessageDraft": Literal[True],
    "deleteMessage": Literal[True],
    "sendChatAction": Literal[True],
    "answerCallbackQuery": Literal[True],
}


def problems(value: object, shape: Any, where: str = "$") -> list[str]:
    """Where ``value`` differs from the type ``shape`` (empty: it fits)."""
    if is_typeddict(shape):
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not an object"]
        hints = get_type_hints(shape)
        found = [f"{where}: no {key!r}" for key in shape.__required_keys__ if key not in value]
        for key, item in value.items():
            if key not in hints:
                found.append(f"{where}: {key!r} is not a field of {shape.__name__}")
            else:
                found += problems(item, hints[key], f"{where}.{key}")
        return found
    origin = get_origin(shape)
    if origin is Literal:
        return [] if value in get_args(shape) else [f"{where}: {value!r} not in {shape}"]
    if origin in (Union, types.UnionType):
        if any(not problems(value, arm, where) for arm in get_args(shape)):
            return []
        return [f"{where}: {value!r} is not {shape}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {value!r} is not a list"]
        (item_shape,) = get_args(shape)
        return [
            p for i, item in enumerate(value) for p in problems(item, item_shape, f"{where}[{i}]")
        ]
    if shape is int:
        fits = isinstance(value, int) and not isinstance(value, bool)
    elif shape in (str, bool):
        fits = isinstance(value, shape)
    else:
        raise AssertionError(f"{where}: the checker does not know {shape!r}")
    return [] if fits else [f"{where}: {value!r} is not {shape.__name__}"]


def answer_problems(method: str, response: dict[str, Any]) -> list[str]:
    """Where the fake's answer to ``method`` differs from ``ApiOk`` of the
    method's result, or from ``ApiError``."""
    if response.get("ok") is not True:
        return problems(response, api.ApiError)
    fields = get_type_hints(api.ApiOk)
    found = [f"$: {key!r} is not a field of ApiOk" for key in set(response) - set(fields)]
    return found + problems(response["result"], RESULTS[method], "$.result")


def test_the_checker_finds_what_differs() -> None:
    assert problems({"id": 1, "is_bot": False, "first_name": "A"}, api.User) == []
    assert problems({"id": "1", "is_bot": False}, api.User) == [
        "$: no 'first_name'",
        "$.id: '1' is not int",
    ]
    assert problems({"chat_id": 1, "text": "x", "colour": 1}, api.SendMessageParams) == [
        "$: 'colour' is not a field of SendMessageParams"
    ]


async def test_requests_and_answers_follow_the_bot_api_types(autojump_clock: MockClock) -> None:
    fake = FakeTelegram(TOKEN)
    client = httpx.AsyncClient(transport=FakeTransport(fake.handle))
    config = TelegramConfig(token=TOKEN, api_base_url="http://telegram.test", poll_timeout=30)
    adapter = TelegramAdapter(config, client)
    fake.push_message(5, 7, "hi", user_name=None)
    fake.push_message(-100, 7, "in a topic", topic=3)
    fake.push_message(5, 7, "a photo", photo=b"\xff\xd8jpeg")
    fake.push_message(5, 7, "", document=("notes.txt", "text/plain", b"notes"))
    send, recv = trio.open_memory_channel[InboundMessage](10)
    async with client, trio.open_nursery() as nursery:
        await nursery.start(adapter.run, send)
        with trio.fail_after(5):
            got = [await recv.receive() for _ in range(4)]
        for attachment in got[2].attachments + got[3].attachments:
            await attachment.fetch()

        private = adapter.messenger("5")
        assert isinstance(private, TelegramDraftMessenger)
        await private.draft("**partial**")
        first = await private.send("**bold** and `code` and [a link](https://example.com)")
        await private.edit(first, "```python\nprint(1)\n```", final=True)
        asked = await private.send_buttons("Allow?", [Button("Yes", "y:1"), Button("No", "n:1")])
        await private.typing()
        await private.delete(first)
        topic = adapter.messenger("-100", "3")
        await topic.send("in the topic")
        await topic.typing()

        fake.press_button(5, int(asked), 7, "Yes")
        with trio.fail_after(5):
            press = (await recv.receive()).press
        assert press is not None
        await press.acknowledge("noted")
        await private.close_buttons(asked, "Allowed")

        slow_down = "Too Many Requests: retry after 3"
        fake.fail_next("sendMessage", 429, slow_down, parameters={"retry_after": 3})
        try:
            await private.send("later")
        except RateLimited:
            pass
        nursery.cancel_scope.cancel()

    called = {call.method for call in fake.calls}
    assert called == set(PARAMS), called
    found: list[str] = []
    for call in fake.calls:
        shape = PARAMS[call.method]
        if shape is None:
            found += [f"{call.method} {p}" for p in ([] if not call.params else ["takes none"])]
        else:
            found += [f"{call.method} request {p}" for p in problems(call.params, shape)]
        if call.response:  # the poll the stop cut off has no answer
            found += [
                f"{call.method} answer {p}" for p in answer_problems(call.method, call.response)
            ]
    assert found == []
    # The error answer and the update kinds were all seen.
    assert any(call.status == 429 and "parameters" in call.response for call in fake.calls)
    kinds = {
        kind
        for call in fake.calls_to("getUpdates")
        for update in call.response.get("result", [])
        for kind in update
    }
    assert kinds == {"update_id", "message", "callback_query"}
