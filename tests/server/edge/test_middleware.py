"""The ASGI front in memory: the body deadlines as pure decisions and in
mock time, and the gate's Host rule against what the app's routing takes."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.server.edge.gate import GateRequest, GateSettings, Refuse, decide
from hermes_trio.server.edge.middleware import BodyDeadline, Front


def test_a_body_deadline_moves_with_each_arrival_up_to_the_total() -> None:
    clock = BodyDeadline(progress=5.0, total=12.0, now=100.0)
    assert clock.deadline == 105.0
    assert clock.expired(104.9) is None
    assert clock.expired(105.0) == "progress"
    clock.received(104.0)
    assert clock.deadline == 109.0
    clock.received(108.0)
    assert clock.deadline == 112.0  # the total caps it
    assert clock.expired(112.0) == "total"


@st.composite
def arrivals(draw: st.DrawFn) -> list[float]:
    gaps = draw(st.lists(st.floats(0, 10, allow_nan=False), max_size=20))
    times, now = [], 0.0
    for gap in gaps:
        now += gap
        times.append(now)
    return times


@given(arrivals(), st.floats(0.1, 10), st.floats(0.1, 100))
def test_a_body_deadline_never_passes_either_limit(
    times: list[float], progress: float, total: float
) -> None:
    clock = BodyDeadline(progress=progress, total=total, now=0.0)
    last = 0.0
    for at in times:
        if clock.expired(at) is not None:
            break
        clock.received(at)
        last = at
    assert clock.deadline <= total
    assert clock.deadline <= last + progress
    assert clock.expired(clock.deadline) is not None


class _Recorder:
    """An app that reads the whole body, then answers 200 with its size."""

    def __init__(self) -> None:
        self.ended_by: str | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.ended_by = "disconnect"
                return
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        self.ended_by = "body"
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(size).encode()})


def _scope() -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": "/v1/chat/completions",
            "headers": [(b"host", b"127.0.0.1:8642"), (b"content-type", b"application/json"),
                        (b"transfer-encoding", b"chunked")]}


async def _run(pieces: list[tuple[float, bytes]], *, progress: float, total: float = math.inf
               ) -> tuple[list[dict[str, Any]], float, _Recorder]:
    """Feed body pieces (each after a pause) to a front-guarded app; what it
    sent, and when (mock time) the exchange ended."""
    app = _Recorder()
    front = Front(app, GateSettings(), body_timeout=progress, body_total_timeout=total)
    to_app, from_client = trio.open_memory_channel[dict[str, Any]](10)
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def client() -> None:
        for n, (pause, data) in enumerate(pieces):
            await trio.sleep(pause)
            more = n < len(pieces) - 1
            await to_app.send({"type": "http.request", "body": data, "more_body": more})
        # A client that never finishes keeps the channel open: the front
        # must end the request by itself.

    async with trio.open_nursery() as nursery:
        nursery.start_soon(client)
        await front(_scope(), from_client.receive, send)
        ended = trio.current_time()
        nursery.cancel_scope.cancel()
    return sent, ended, app


async def test_steady_pieces_pass_however_long_the_whole_takes(autojump_clock: Any) -> None:
    sent, ended, app = await _run([(4.0, b"x" * 10)] * 10, progress=5.0)
    assert sent[0]["status"] == 200
    assert sent[1]["body"] == b"100"
    assert app.ended_by == "body"
    assert ended == pytest.approx(40.0)


async def test_a_stall_is_408_when_the_progress_timeout_passes(autojump_clock: Any) -> None:
    sent, ended, app = await _run([(1.0, b"x"), (1.0, b"x"), (60.0, b"x")], progress=5.0)
    assert sent[0]["status"] == 408
    assert "api_server.body_timeout (5 s)" in json.loads(sent[1]["body"])["error"]["message"]
    assert app.ended_by == "disconnect"
    # Stalled after the piece at t=2: refused at t=7, not later.
    assert ended == pytest.approx(7.0)


async def test_a_trickle_is_408_at_the_total(autojump_clock: Any) -> None:
    sent, _, _ = await _run([(1.0, b"x")] * 30, progress=5.0, total=10.0)
    assert sent[0]["status"] == 408
    assert "body_total_timeout (10 s)" in json.loads(sent[1]["body"])["error"]["message"]


_HOST_CHARS = st.text(
    alphabet=st.sampled_from("abcz09-_.:[]% éA\t"), min_size=0, max_size=80
)


@given(_HOST_CHARS)
def test_every_host_the_gate_passes_is_one_the_routing_can_encode(host: str) -> None:
    decision = decide(GateRequest("GET", "/v1/models", {"host": host}), GateSettings(True))
    if isinstance(decision, Refuse) and decision.code == "invalid_host":
        return
    # What werkzeug does with the name part before it routes anything.
    name = host.strip().lower().partition(":")[0]
    name.encode("idna")


def test_long_labels_and_empty_labels_are_malformed() -> None:
    for host in ("a" * 64 + ".localhost", "localhost..", ".localhost", "a..b", "x:70000"):
        decision = decide(GateRequest("GET", "/health", {"host": host}), GateSettings(True))
        assert isinstance(decision, Refuse) and decision.status == 400, host
    for host in ("a" * 63 + ".localhost", "localhost.", "[::1]:8642", "127.0.0.1:1"):
        decision = decide(GateRequest("GET", "/health", {"host": host}), GateSettings(True))
        assert not isinstance(decision, Refuse), host
