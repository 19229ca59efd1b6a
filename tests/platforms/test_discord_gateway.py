"""The Gateway protocol state machine, fed frames and times by hand."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.platforms.discord.gateway import (
    INTENTS,
    TOKEN_REJECTED,
    Dispatch,
    Fatal,
    GatewayProtocol,
    Reconnect,
    Send,
    gateway_url,
)

TOKEN = "bot-token-for-protocol-tests"


def frame(op: int, d: Any = None, **extra: Any) -> str:
    return json.dumps({"op": op, "d": d, **extra})


def hello(ms: float = 40000) -> str:
    return frame(10, {"heartbeat_interval": ms})


def ready(seq: int = 1, session: str = "s1") -> str:
    data = {"session_id": session, "resume_gateway_url": "wss://resume.test", "user": {"id": 42}}
    return frame(0, data, t="READY", s=seq)


def sent(actions: list[Any]) -> list[dict[str, Any]]:
    return [a.payload for a in actions if isinstance(a, Send)]


def identified(rng_seed: int = 1) -> GatewayProtocol:
    protocol = GatewayProtocol(TOKEN, rng=random.Random(rng_seed))
    protocol.connected()
    protocol.receive(hello(), 0.0)
    protocol.receive(ready(), 0.1)
    return protocol


def test_hello_identifies_with_the_intents_and_schedules_a_jittered_beat() -> None:
    protocol = GatewayProtocol(TOKEN, rng=random.Random(7))
    protocol.connected()
    (identify,) = sent(protocol.receive(hello(41250), 100.0))
    assert identify["op"] == 2
    assert identify["d"]["token"] == TOKEN and identify["d"]["intents"] == INTENTS == 37376
    assert protocol.heartbeat_interval == 41.25
    assert protocol.heartbeat_at == pytest.approx(100.0 + 41.25 * random.Random(7).random())


def test_ready_keeps_session_resume_url_and_bot_id() -> None:
    protocol = identified()
    assert protocol.session_id == "s1" and protocol.resume_url == "wss://resume.test"
    assert protocol.bot_user_id == "42" and protocol.seq == 1 and protocol.can_resume
    assert protocol.url("wss://gateway.test") == "wss://resume.test/?v=10&encoding=json"


def test_first_connection_goes_to_the_gateway_url() -> None:
    protocol = GatewayProtocol(TOKEN)
    assert protocol.url("wss://gateway.test/") == "wss://gateway.test/?v=10&encoding=json"
    assert gateway_url("wss://g.test?v=9") == "wss://g.test/?v=10&encoding=json"


def test_heartbeats_carry_the_last_sequence_and_follow_the_interval() -> None:
    protocol = identified()
    first = protocol.heartbeat_at
    assert first is not None
    (beat,) = sent(protocol.heartbeat_due(first))
    assert beat == {"op": 1, "d": 1}
    assert protocol.heartbeat_at == first + 40.0
    protocol.receive(frame(11), first + 0.05)
    assert protocol.latency == pytest.approx(0.05)
    protocol.receive(frame(0, {}, t="MESSAGE_CREATE", s=5), first + 1)
    (beat,) = sent(protocol.heartbeat_due(first + 40.0))
    assert beat == {"op": 1, "d": 5}


def test_a_missing_ack_makes_the_connection_a_zombie() -> None:
    protocol = identified()
    first = protocol.heartbeat_at
    assert first is not None
    protocol.heartbeat_due(first)  # no ACK follows
    (action,) = protocol.heartbeat_due(first + 40.0)
    assert isinstance(action, Reconnect) and action.close and not action.expected
    assert "zombie" in action.reason
    assert protocol.can_resume  # resumes, not a new session


def test_discord_asking_for_a_heartbeat_gets_one_now() -> None:
    protocol = identified()
    before = protocol.heartbeat_at
    assert sent(protocol.receive(frame(1), 3.0)) == [{"op": 1, "d": 1}]
    assert protocol.heartbeat_at == before


def test_a_new_socket_resumes_with_the_session() -> None:
    protocol = identified()
    protocol.receive(frame(0, {}, t="MESSAGE_CREATE", s=9), 1.0)
    assert isinstance(protocol.closed(None), Reconnect)
    protocol.connected()
    (resume,) = sent(protocol.receive(hello(), 5.0))
    assert resume == {"op": 6, "d": {"token": TOKEN, "session_id": "s1", "seq": 9}}
    dispatches = protocol.receive(frame(0, None, t="RESUMED", s=10), 5.1)
    assert dispatches == [Dispatch("RESUMED", None, 10)]


def test_reconnect_op_asks_to_resume() -> None:
    protocol = identified()
    (action,) = protocol.receive(frame(7), 1.0)
    assert isinstance(action, Reconnect) and action.expected and action.close
    assert action.delay == 0.0 and protocol.can_resume


def test_invalid_session_not_resumable_waits_and_identifies_afresh() -> None:
    protocol = identified(rng_seed=3)
    (action,) = protocol.receive(frame(9, False), 1.0)
    assert isinstance(action, Reconnect) and 1.0 <= action.delay <= 5.0
    assert not protocol.can_resume and protocol.seq is None
    protocol.connected()
    (identify,) = sent(protocol.receive(hello(), 9.0))
    assert identify["op"] == 2


def test_invalid_session_resumable_resumes_at_once() -> None:
    protocol = identified()
    (action,) = protocol.receive(frame(9, True), 1.0)
    assert isinstance(action, Reconnect) and action.delay == 0 and protocol.can_resume


@pytest.mark.parametrize(
    ("code", "words", "credentials"),
    [
        (4004, "DISCORD_BOT_TOKEN", True),
        (4010, "shard", False),
        (4011, "sharding", False),
        (4012, "API version", False),
        (4013, "intents", False),
        (4014, "Developer Portal", False),
    ],
)
def test_fatal_close_codes(code: int, words: str, credentials: bool) -> None:
    end = identified().closed(code)
    assert isinstance(end, Fatal) and end.code == code and end.credentials is credentials
    assert words in end.message and "\n" not in end.message


def test_token_line_is_the_same_for_rest_and_gateway() -> None:
    end = identified().closed(4004)
    assert isinstance(end, Fatal) and end.message == TOKEN_REJECTED
    assert "platforms.discord.token" in TOKEN_REJECTED


@pytest.mark.parametrize("code", [None, 1000, 1001, 1011, 4000, 4001, 4002, 4003, 4005, 4008])
def test_other_close_codes_resume(code: int | None) -> None:
    protocol = identified()
    end = protocol.closed(code)
    assert isinstance(end, Reconnect) and not end.close and protocol.can_resume


@pytest.mark.parametrize("code", [4007, 4009])
def test_invalid_seq_and_timed_out_sessions_start_over(code: int) -> None:
    protocol = identified()
    end = protocol.closed(code)
    assert isinstance(end, Reconnect) and not protocol.can_resume


def test_hello_without_interval_reconnects() -> None:
    protocol = GatewayProtocol(TOKEN)
    protocol.connected()
    (action,) = protocol.receive(frame(10, {}), 0.0)
    assert isinstance(action, Reconnect)


@pytest.mark.parametrize("text", ["", "not json", "[]", "3", '{"op": 99}', '{"op": 0, "s": 2}'])
def test_junk_frames_are_ignored(text: str) -> None:
    protocol = identified()
    assert protocol.receive(text, 1.0) == []


def test_a_second_hello_on_the_same_socket_does_not_identify_again() -> None:
    protocol = identified()
    assert sent(protocol.receive(hello(), 2.0)) == []


@given(st.lists(st.one_of(st.integers(min_value=0, max_value=10**6), st.none()), max_size=40))
def test_the_sequence_only_moves_forward(seqs: list[int | None]) -> None:
    protocol = GatewayProtocol(TOKEN)
    protocol.connected()
    seen: list[int] = []
    for seq in seqs:
        protocol.receive(json.dumps({"op": 0, "t": "X", "s": seq, "d": {}}), 0.0)
        if seq is not None:
            seen.append(seq)
        assert protocol.seq == (max(seen) if seen else None)


@given(
    st.floats(min_value=0.05, max_value=100.0),
    st.lists(st.booleans(), min_size=1, max_size=30),
    st.integers(0, 2**32),
)
def test_heartbeat_schedule_and_zombie_detection(
    interval: float, acks: list[bool], seed: int
) -> None:
    """Beats come exactly one interval apart; the first beat whose ACK did
    not come turns the next due time into a reconnect, never earlier."""
    protocol = GatewayProtocol(TOKEN, rng=random.Random(seed))
    protocol.connected()
    protocol.receive(hello(interval * 1000), 0.0)
    due = protocol.heartbeat_at
    assert due is not None and 0.0 <= due <= interval
    for acked in acks:
        actions = protocol.heartbeat_due(due)
        assert sent(actions) and sent(actions)[0]["op"] == 1
        assert protocol.heartbeat_at == pytest.approx(due + interval)
        due = protocol.heartbeat_at
        if not acked:
            (action,) = protocol.heartbeat_due(due)
            assert isinstance(action, Reconnect) and "zombie" in action.reason
            return
        protocol.receive(frame(11), due - interval / 2)
