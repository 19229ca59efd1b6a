"""``GET /metrics``: Prometheus text that moves as requests are made."""

from __future__ import annotations

from typing import Any

import httpx
import trio
from prometheus_client.parser import text_string_to_metric_families
from support import api_stack

from hermes_trio.llm.http_body import open_body
from hermes_trio.testing import ErrorReply, TextReply

CHAT = {"model": "hermes-agent", "messages": [{"role": "user", "content": "hi"}]}


async def figures(
    http: httpx.AsyncClient, base: str, **kwargs: Any
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    reply = await http.get(f"{base}/metrics", **kwargs)
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("text/plain")
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def moved(before: dict[Any, float], after: dict[Any, float], name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


async def test_counters_move_with_requests_turns_429s_interrupts_and_upstream_errors() -> None:
    script = [
        TextReply("hello there"),
        TextReply(tokens=[f"w{i} " for i in range(100)], delay=0.05),
        TextReply("newer"),
        ErrorReply(500, "upstream broke"),
    ]
    api_settings = {"max_concurrent": 1}
    async with api_stack(script, api=api_settings, model={"max_retries": 0}) as (api, _):
        root = api.base_url.removesuffix("/v1")
        async with httpx.AsyncClient(timeout=15) as http:
            before = await figures(http, root)
            assert (
                await http.post(f"{api.base_url}/chat/completions", json=CHAT)
            ).status_code == 200
            session = {"X-Session-ID": "m"}
            async with trio.open_nursery() as nursery:
                started = trio.Event()

                async def slow() -> None:
                    body = {**CHAT, "stream": True}
                    async with http.stream(
                        "POST", f"{api.base_url}/chat/completions", json=body, headers=session
                    ) as reply:
                        async for _ in reply.aiter_bytes():
                            started.set()

                nursery.start_soon(slow)
                await started.wait()
                # No slot free: 429.
                busy = await http.post(f"{api.base_url}/chat/completions", json=CHAT)
                assert busy.status_code == 429
                # The same session: interrupts the slow one.
                newer = await http.post(
                    f"{api.base_url}/chat/completions", json=CHAT, headers=session
                )
                assert newer.status_code == 200, newer.text
            failed = await http.post(f"{api.base_url}/chat/completions", json=CHAT)
            assert failed.status_code == 502
            after = await figures(http, root)
    route = "/v1/chat/completions"
    assert moved(before, after, "hermes_requests_total", route=route, status="200") == 3
    assert moved(before, after, "hermes_requests_total", route=route, status="429") == 1
    assert moved(before, after, "hermes_requests_total", route=route, status="502") == 1
    assert (
        moved(before, after, "hermes_rate_limited_total", reason=busy.json()["error"]["code"]) == 1
    )
    assert moved(before, after, "hermes_turns_total", outcome="finished") == 2
    assert moved(before, after, "hermes_turns_total", outcome="interrupted") == 1
    assert moved(before, after, "hermes_turns_total", outcome="error:model_error") == 1
    assert moved(before, after, "hermes_upstream_errors_total", code="model_error") == 1
    assert moved(before, after, "hermes_upstream_requests_total", mode="stream") >= 1
    assert moved(before, after, "hermes_time_to_first_token_seconds_count") == 3
    assert moved(before, after, "hermes_turn_duration_seconds_count") == 4
    assert moved(before, after, "hermes_tokens_out_total") > 0
    assert after[("hermes_active_turns", ())] == 0
    assert after[("hermes_open_streams", ())] == 0


async def test_metrics_are_behind_the_key_unless_public() -> None:
    async with api_stack([], api={"key": "k-metrics"}) as (api, _):
        root = api.base_url.removesuffix("/v1")
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"{root}/metrics")).status_code == 401
            await figures(http, root, headers={"Authorization": "Bearer k-metrics"})
    async with api_stack([], api={"key": "k-metrics", "metrics_public": True}) as (api, _):
        async with httpx.AsyncClient() as http:
            await figures(http, api.base_url.removesuffix("/v1"))


async def test_a_turn_whose_client_went_away_counts_as_client_gone() -> None:
    # The cancel cause is typed (``CancelCause.CLIENT_GONE``); the label is
    # the one it always was.
    script = [TextReply(tokens=[f"w{i} " for i in range(100)], delay=0.05)]
    async with api_stack(script) as (api, _):
        root = api.base_url.removesuffix("/v1")
        async with httpx.AsyncClient(timeout=15) as http:
            before = await figures(http, root)
            body = {**CHAT, "stream": True}
            async with http.stream("POST", f"{api.base_url}/chat/completions", json=body) as reply:
                async with open_body(reply, decode=False) as pieces:
                    async for _ in pieces:
                        break
            with trio.fail_after(10):
                while True:
                    after = await figures(http, root)
                    if after[("hermes_active_turns", ())] == 0:
                        break
                    await trio.sleep(0.05)
    assert moved(before, after, "hermes_turns_total", outcome="client_gone") == 1
    assert moved(before, after, "hermes_turns_total", outcome="interrupted") == 0
