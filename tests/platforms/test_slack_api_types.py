"""The Slack shapes in ``platforms/slack/api_types.py`` hold for what the fake
Slack sends: each Web API answer and each Socket Mode envelope carries the
keys its ``TypedDict`` requires, so the adapter and the fake keep to one
contract."""

from __future__ import annotations

from collections.abc import Mapping

import httpx
import trio

from hermes_trio.platforms.slack import api_types as t
from hermes_trio.platforms.slack.api import SlackWebApi
from hermes_trio.testing.fake_slack import open_fake_slack


def missing(value: Mapping[str, object], shape: type) -> set[str]:
    required: frozenset[str] = shape.__required_keys__
    return set(required) - set(value)


async def test_every_web_api_answer_has_the_keys_its_shape_requires() -> None:
    async with open_fake_slack() as fake, httpx.AsyncClient() as client:
        api = SlackWebApi(
            client, bot_token=fake.bot_token, app_token=fake.app_token, base_url=fake.base_url
        )
        answers: list[tuple[Mapping[str, object], type]] = []
        answers.append((await api.call(t.AUTH_TEST({})), t.AuthTestResponse))
        opened = await api.call(t.CONNECTIONS_OPEN({}), token="app")
        answers.append((opened, t.ConnectionsOpenResponse))
        posted = await api.call(t.POST_MESSAGE({"channel": "C1", "text": "hi"}))
        answers.append((posted, t.PostMessageResponse))
        answers.append((posted["message"], t.Message))
        ref: t.MessageRef = {"channel": "C1", "ts": posted["ts"]}
        updated = await api.call(t.UPDATE({**ref, "text": "hello"}))
        answers.append((updated, t.UpdateResponse))
        answers.append((updated["message"], t.Message))
        note = await api.call(t.POST_EPHEMERAL({"channel": "C1", "user": "U7", "text": "psst"}))
        answers.append((note, t.PostEphemeralResponse))
        answers.append((await api.call(t.DELETE(ref)), t.DeleteResponse))
        started = await api.call(
            t.START_STREAM({"channel": "D1", "thread_ts": "1.000001", "markdown_text": "a"})
        )
        answers.append((started, t.StartStreamResponse))
        stream: t.MessageRef = {"channel": "D1", "ts": started["ts"]}
        appended = await api.call(t.APPEND_STREAM({**stream, "markdown_text": "b"}))
        answers.append((appended, t.StreamResponse))
        answers.append((await api.call(t.STOP_STREAM(stream)), t.StreamResponse))
    for answer, shape in answers:
        assert not missing(answer, shape), (shape.__name__, answer)
        assert answer.get("ok", True) is True


async def test_every_envelope_has_the_keys_its_shape_requires() -> None:
    async with open_fake_slack() as fake, httpx.AsyncClient() as client:
        api = SlackWebApi(
            client, bot_token=fake.bot_token, app_token=fake.app_token, base_url=fake.base_url
        )
        shared = fake.add_file("a.png", "image/png", b"png")
        assert not missing(shared, t.File)
        message = fake.push_message("D1", "U7", "hi", files=[shared])
        mention = fake.push_mention("C1", "U7", "hi")
        for envelope in (message, mention, fake.redeliver(mention)):
            assert not missing(envelope, t.EventsApiEnvelope)
            assert not missing(envelope["payload"], t.EventCallback)
            event = envelope["payload"]["event"]
            shape = t.MessageEvent if event["type"] == "message" else t.AppMentionEvent
            assert not missing(event, shape)
        section: t.SectionBlock = {"type": "section", "text": {"type": "mrkdwn", "text": "ok?"}}
        button: t.ButtonElement = {
            "type": "button",
            "text": {"type": "plain_text", "text": "Yes"},
            "action_id": "yes",
            "value": "y",
        }
        actions: t.ActionsBlock = {"type": "actions", "elements": [button]}
        posted = await api.call(
            t.POST_MESSAGE({"channel": "C1", "text": "ok?", "blocks": [section, actions]})
        )
        with trio.fail_after(5):
            await fake.wait_until(lambda: bool(fake.visible("C1")))
        press = fake.press_button("C1", posted["ts"], "U7", "Yes")
        assert not missing(press, t.InteractiveEnvelope)
        payload = press["payload"]
        assert not missing(payload, t.BlockActionsPayload)
        assert not missing(payload["user"], t.User)
        assert not missing(payload["container"], t.MessageContainer)
        assert not missing(payload["message"], t.Message)
        assert not missing(payload["actions"][0], t.ButtonAction)
