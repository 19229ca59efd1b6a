"""Named API keys with limits: the budget arithmetic (pure) and the real
``hermes-trio serve`` refusing one key while it serves another."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import httpx
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from support import clean_env, start_serve

from hermes_trio.server.admission.keys import (
    WINDOW,
    Budget,
    KeyRing,
    NamedKey,
    Refusal,
    Reservation,
    current_key,
)
from hermes_trio.server.admission.turn_place import TurnPlace
from hermes_trio.server.admission.turn_slots import TurnSlots
from hermes_trio.server.parsing.errors import APIError


def test_requests_per_minute_slide() -> None:
    budget = Budget(requests_per_minute=2, tokens_per_minute=None)
    for at in (0.0, 10.0):
        assert budget.refusal(at) is None
        budget.admit(at)
    refusal = budget.refusal(30.0)
    assert refusal is not None and refusal.code == "requests_per_minute_exceeded"
    assert refusal.retry_after == WINDOW - 30.0
    assert budget.refusal(60.0) is None


def test_tokens_are_charged_after_and_wait_for_the_window() -> None:
    budget = Budget(requests_per_minute=None, tokens_per_minute=100)
    budget.charge(0.0, 70)
    assert budget.refusal(1.0) is None
    budget.charge(20.0, 50)
    refusal = budget.refusal(21.0)
    assert refusal is not None and refusal.code == "tokens_per_minute_exceeded"
    # The first charge leaves the window at 60 s: then 50 < 100.
    assert refusal.retry_after == 60.0 - 21.0
    assert budget.refusal(60.5) is None


@given(
    st.integers(1, 5),
    st.lists(st.floats(0, 1000, allow_nan=False), min_size=1, max_size=40),
)
def test_waiting_as_told_always_admits(rpm: int, times: list[float]) -> None:
    budget = Budget(requests_per_minute=rpm, tokens_per_minute=None)
    now = 0.0
    for step in sorted(times):
        now = max(now, step)
        refusal = budget.refusal(now)
        if refusal is not None:
            assert refusal.retry_after > 0
            now += refusal.retry_after
            assert budget.refusal(now) is None
        budget.admit(now)


def test_the_ring_finds_keys_and_counts_work_in_flight() -> None:
    ring = KeyRing(
        [
            NamedKey("a", b"key-a", max_concurrent=1, tokens_per_minute=10),
            NamedKey("b", b"key-b"),
        ]
    )
    assert ring.find("key-a") is not None and ring.find("key-a").name == "a"  # type: ignore[union-attr]
    assert ring.find("nope") is None and ring.find("") is None
    a = ring.find("key-a")
    assert a is not None
    held = ring.reserve(a)
    assert isinstance(held, Reservation)
    busy = ring.reserve(a)
    assert isinstance(busy, Refusal) and busy.code == "key_concurrency_exceeded"
    # Requests that start no work are admitted meanwhile.
    assert ring.admit(a, 0.5) is None
    held.release(1.0, 10)
    # Given back once: a second release neither frees nor charges again.
    held.release(2.0, 10)
    assert ring.in_flight["a"] == 0
    again = ring.reserve(a)
    assert isinstance(again, Reservation)
    refusal = ring.admit(a, 1.5)
    assert refusal is not None and refusal.code == "tokens_per_minute_exceeded"
    assert refusal.retry_after == WINDOW - 0.5


async def test_a_turns_place_takes_the_keys_place_first_and_gives_back_once() -> None:
    ring = KeyRing([NamedKey("a", b"key-a", max_concurrent=1, tokens_per_minute=5)])
    (key,) = ring.keys
    slots = TurnSlots(4)
    given = current_key.set((ring, key))
    try:
        place = TurnPlace().take(slots)
        with pytest.raises(APIError) as refused:
            TurnPlace().take(slots)
        assert refused.value.status == 429 and refused.value.code == "key_concurrency_exceeded"
        assert refused.value.headers == {"Retry-After": "1"}
        # The refused request took no slot of the server's.
        assert slots.in_use == 1
        place.meter.tokens = 7
        place.release()
        place.release()
        assert slots.in_use == 0 and ring.in_flight["a"] == 0
        spent = ring.admit(key, trio.current_time())
        assert spent is not None and spent.code == "tokens_per_minute_exceeded"
        # A server with no slot free gives the key's place back at once.
        with pytest.raises(APIError) as full:
            TurnPlace().take(TurnSlots(0))
        assert full.value.code == "rate_limit_exceeded" and ring.in_flight["a"] == 0
    finally:
        current_key.reset(given)
    # A request without a named key holds a slot only.
    alone = TurnPlace().take(slots)
    assert alone.reservation is None and slots.in_use == 1
    alone.release()


def _keys_file(path: Path, *entries: dict[str, object]) -> None:
    path.write_text(json.dumps(list(entries)))


async def test_one_key_is_refused_while_another_is_served(tmp_path: Path) -> None:
    keys = tmp_path / "keys.yaml"
    _keys_file(
        keys,
        {"name": "alice", "key": "sk-alice-secret", "requests_per_minute": 2},
        {"name": "bob", "key": "sk-bob-secret"},
        {"name": "tokens", "key": "sk-tokens-secret", "tokens_per_minute": 5},
        {"name": "one", "key": "sk-one-secret", "max_concurrent": 1},
    )
    (tmp_path / "config.yaml").write_text(f"api_server: {{keys_file: '{keys}'}}\n")
    env = clean_env(HERMES_DATA_DIR=str(tmp_path / "data"))
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

    def auth(key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    async with trio.open_nursery() as nursery:
        served = await start_serve(nursery, env, tmp_path, args=["--demo"])
        async with httpx.AsyncClient(base_url=served.base_url, timeout=20) as http:
            alice = [
                await http.post("/chat/completions", json=chat, headers=auth("sk-alice-secret"))
                for _ in range(3)
            ]
            bob = await http.post("/chat/completions", json=chat, headers=auth("sk-bob-secret"))
            first = await http.post(
                "/chat/completions", json=chat, headers=auth("sk-tokens-secret")
            )
            over = await http.post("/chat/completions", json=chat, headers=auth("sk-tokens-secret"))
            stranger = await http.post("/chat/completions", json=chat, headers=auth("sk-nobody"))
            # One stream at a time for "one".
            started = trio.Event()
            second: list[httpx.Response] = []

            async def hold() -> None:
                body = {**chat, "stream": True}
                async with http.stream(
                    "POST", "/chat/completions", json=body, headers=auth("sk-one-secret")
                ) as reply:
                    async for _ in reply.aiter_bytes():
                        if not started.is_set():
                            started.set()
                            second.append(
                                await http.post(
                                    "/chat/completions", json=chat, headers=auth("sk-one-secret")
                                )
                            )

            await hold()
            # SIGHUP: a new key file, no restart; a broken one keeps the keys.
            _keys_file(keys, {"name": "carol", "key": "sk-carol-secret"})
            served.process.send_signal(signal.SIGHUP)
            with trio.fail_after(10):
                await served.wait_for("API keys reloaded: 1 key(s)")
            carol = await http.post("/chat/completions", json=chat, headers=auth("sk-carol-secret"))
            gone = await http.post("/chat/completions", json=chat, headers=auth("sk-bob-secret"))
            keys.write_text("- {name: broken")
            served.process.send_signal(signal.SIGHUP)
            with trio.fail_after(10):
                await served.wait_for("API keys not reloaded")
            still = await http.post("/chat/completions", json=chat, headers=auth("sk-carol-secret"))
        nursery.cancel_scope.cancel()
    assert [r.status_code for r in alice] == [200, 200, 429]
    refusal = alice[2]
    assert refusal.json()["error"]["code"] == "requests_per_minute_exceeded"
    assert 1 <= int(refusal.headers["Retry-After"]) <= 60
    assert bob.status_code == 200
    assert first.status_code == 200 and over.status_code == 429
    assert over.json()["error"]["code"] == "tokens_per_minute_exceeded"
    assert stranger.status_code == 401
    assert second[0].status_code == 429
    assert second[0].json()["error"]["code"] == "key_concurrency_exceeded"
    assert carol.status_code == 200 and gone.status_code == 401 and still.status_code == 200
    log = "\n".join(served.output)
    assert "key=alice" in log and "error=requests_per_minute_exceeded" in log
    for secret in ("sk-alice-secret", "sk-bob-secret", "sk-carol-secret", "sk-one-secret"):
        assert secret not in log
