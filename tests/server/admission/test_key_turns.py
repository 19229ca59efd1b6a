"""A key's limits hold for the work its requests start, however long that
work outlives the HTTP reply: a background response keeps the key's
concurrency place until its turn ends, and the tokens of a relayed answer or
of a stream its client dropped just before the end are charged. Each test
drives a real ``hermes-trio serve`` from outside."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import trio
from support import serve_before

from hermes_trio.llm.http_body import open_body
from hermes_trio.testing import RecordedRequest, Stall, Step, TextReply, open_scripted_server
from hermes_trio.wire.sse import SSEDecoder, SSEEvent

UPSTREAM = "scripted-model"
CHAT = {"messages": [{"role": "user", "content": "hi"}]}


def _config(*keys: dict[str, Any], relay: bool = False) -> str:
    api: dict[str, Any] = {"keys": list(keys), "upstream_models": relay}
    return "api_server: " + json.dumps(api) + "\n"


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _idle(http: httpx.AsyncClient) -> None:
    """Until no turn runs (``/health`` is outside the keys' limits)."""
    health = str(http.base_url.copy_with(path="/health"))
    for _ in range(500):
        if (await http.get(health)).json()["turns_running"] == 0:
            return
        await trio.sleep(0.02)
    raise AssertionError("turns still running after 10 s")


async def test_a_background_response_holds_its_keys_place_until_its_turn_ends(
    tmp_path: Path,
) -> None:
    go_on = trio.Event()

    async def slow(request: RecordedRequest) -> Step:
        await go_on.wait()
        return TextReply("done at last")

    one = {"name": "one", "key": "sk-one-0123456789", "max_concurrent": 1}
    other = {"name": "other", "key": "sk-other-0123456789"}
    body = {"input": "take your time", "background": True}
    async with open_scripted_server(default=slow) as model:
        async with serve_before(model.base_url, tmp_path, _config(one, other)) as (_, http):
            first = await http.post("/responses", json=body, headers=_auth(one["key"]))
            second = await http.post("/responses", json=body, headers=_auth(one["key"]))
            # Reading and polling start no work: never refused for the place.
            polled = await http.get(f"/responses/{first.json()['id']}", headers=_auth(one["key"]))
            # Another key is served meanwhile.
            theirs = await http.post("/responses", json=body, headers=_auth(other["key"]))
            go_on.set()
            await _idle(http)
            third = await http.post(
                "/responses", json={**body, "background": False}, headers=_auth(one["key"])
            )
    assert first.status_code == 200 and first.json()["status"] in ("queued", "in_progress")
    assert second.status_code == 429
    assert second.json()["error"]["code"] == "key_concurrency_exceeded"
    assert "Retry-After" in second.headers
    assert polled.status_code == 200 and polled.json()["status"] in ("queued", "in_progress")
    assert theirs.status_code == 200
    assert third.status_code == 200 and third.json()["status"] == "completed"


async def test_relayed_answers_are_charged_to_the_keys_tokens(tmp_path: Path) -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10}
    plain = {"name": "plain", "key": "sk-plain-0123456789", "tokens_per_minute": 5}
    streamed = {"name": "streamed", "key": "sk-streamed-0123456789", "tokens_per_minute": 5}
    counted = {"name": "counted", "key": "sk-counted-0123456789", "tokens_per_minute": 5}
    ask = {**CHAT, "model": UPSTREAM}
    script = [
        TextReply("seven tokens of a title here", usage=usage),
        TextReply("seven tokens of a title here", usage=usage),
        # Without the usage chunk the relay counts the chunks it passed on.
        TextReply(tokens=["one ", "two ", "three ", "four ", "five ", "six"]),
    ]
    config = _config(plain, streamed, counted, relay=True)
    async with open_scripted_server(script, default=TextReply("more")) as model:
        async with serve_before(model.base_url, tmp_path, config) as (_, http):
            answers = []
            for key, extra in (
                (plain, {}),
                (streamed, {"stream": True, "stream_options": {"include_usage": True}}),
                (counted, {"stream": True}),
            ):
                answers.append(
                    await http.post(
                        "/chat/completions", json={**ask, **extra}, headers=_auth(key["key"])
                    )
                )
                await _idle(http)
                answers.append(
                    await http.post("/chat/completions", json=ask, headers=_auth(key["key"]))
                )
    assert [a.status_code for a in answers] == [200, 429, 200, 429, 200, 429]
    for refused in answers[1::2]:
        assert refused.json()["error"]["code"] == "tokens_per_minute_exceeded"
    # The model server was asked only the three first times.
    assert len(model.model_requests) == 3


async def test_a_stream_dropped_just_before_its_end_is_charged(tmp_path: Path) -> None:
    key = {"name": "k", "key": "sk-k-0123456789", "tokens_per_minute": 5}
    # The model sends nine tokens, then thinks before its last one: the
    # client leaves in that pause, before the model server's usage came.
    said = " ".join(f"t{i}" for i in range(9))
    async with open_scripted_server([Stall(said, seconds=30)], default=TextReply("x")) as model:
        async with serve_before(model.base_url, tmp_path, _config(key)) as (_, http):
            seen = ""
            body = {**CHAT, "stream": True}
            decoder = SSEDecoder()
            async with (
                http.stream("POST", "/chat/completions", json=body, headers=_auth(key["key"])) as r,
                open_body(r) as pieces,
            ):
                async for piece in pieces:
                    for event in decoder.feed(piece):
                        assert isinstance(event, SSEEvent) and event.data.startswith("{")
                        chunk = json.loads(event.data)
                        if chunk.get("choices"):
                            seen += chunk["choices"][0]["delta"].get("content") or ""
                    if seen == said:
                        break
            await _idle(http)
            after = await http.post("/chat/completions", json=CHAT, headers=_auth(key["key"]))
    assert after.status_code == 429
    assert after.json()["error"]["code"] == "tokens_per_minute_exceeded"
    assert len(model.model_requests) == 1
