"""A burst of turn requests is let in before any of their bodies arrived.
Once the bodies are in, the front refuses those beyond the room itself,
before the app (Quart) builds anything for them: only the ones with room
reach the app. A body larger than what the front reads ahead goes on to
the app whole, and a stalled one still gets its 408."""

from __future__ import annotations

import contextvars
from typing import Any

import pytest
import trio
import trio.testing

from hermes_trio.server.admission.turn_slots import TurnSlots, _Entry
from hermes_trio.server.edge.gate import GateSettings
from hermes_trio.server.edge.middleware import _EARLY_BODY, Front
from hermes_trio.server.parsing.errors import APIError

HEADERS = [(b"host", b"127.0.0.1:8642"), (b"content-type", b"application/json")]


def _scope() -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": HEADERS}


class _Route:
    """As a turn route: reads the body, takes a slot (or answers its
    refusal), holds it until ``done``."""

    def __init__(self, slots: TurnSlots) -> None:
        self.slots = slots
        self.reached = 0
        self.sizes: list[int] = []
        self.done = trio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.reached += 1
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        self.sizes.append(size)
        try:
            self.slots.acquire()
        except APIError as refused:
            await send({"type": "http.response.start", "status": refused.status, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        try:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"", "more_body": True})
            await self.done.wait()
        finally:
            self.slots.release()


async def _request(front: Front, pieces: list[bytes], answers: list[dict[str, Any]]) -> None:
    to_app, from_client = trio.open_memory_channel[dict[str, Any]](len(pieces) + 1)
    for n, piece in enumerate(pieces):
        await to_app.send({"type": "http.request", "body": piece, "more_body": n < len(pieces) - 1})
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.start":
            answers.append(message)

    await front(_scope(), from_client.receive, send)


async def test_a_burst_beyond_the_room_is_refused_before_the_app() -> None:
    slots = TurnSlots(2)
    route = _Route(slots)
    front = Front(route, GateSettings(), shed=slots.shed)
    answers: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        for _ in range(10):
            nursery.start_soon(_request, front, [b'{"model":', b'"m"}'], answers)
        await trio.testing.wait_all_tasks_blocked()
        statuses = sorted(a["status"] for a in answers)
        assert statuses == [200, 200] + [429] * 8
        # Only the two with room reached the app; the rest were told at once.
        assert route.reached == 2
        refusal = next(a for a in answers if a["status"] == 429)
        assert (b"retry-after", b"1") in refusal["headers"]
        assert slots.entering == 0 and slots.in_use == 2
        route.done.set()
    assert slots.in_use == 0 and slots.entering == 0


async def test_a_body_larger_than_the_early_read_reaches_the_app_whole() -> None:
    slots = TurnSlots(1)
    route = _Route(slots)
    front = Front(route, GateSettings(), shed=slots.shed)
    pieces = [b"x" * 65536 for _ in range(_EARLY_BODY // 65536 + 3)]
    answers: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_request, front, pieces, answers)
        await trio.testing.wait_all_tasks_blocked()
        assert [a["status"] for a in answers] == [200]
        assert route.sizes == [sum(len(p) for p in pieces)]
        route.done.set()


async def test_a_stalled_body_of_a_let_in_request_is_still_408(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slots = TurnSlots(1)
    route = _Route(slots)
    front = Front(route, GateSettings(), body_timeout=5, shed=slots.shed)
    to_app, from_client = trio.open_memory_channel[dict[str, Any]](1)
    await to_app.send({"type": "http.request", "body": b"{", "more_body": True})
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await front(_scope(), from_client.receive, send)
    assert trio.current_time() == 5
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [408]
    assert slots.entering == 0 and slots.in_use == 0


async def test_a_request_found_room_is_not_crowded_out_by_later_arrivals() -> None:
    slots = TurnSlots(1)
    first, later = contextvars.copy_context(), contextvars.copy_context()
    a = first.run(slots.shed, _scope())
    b = later.run(slots.shed, _scope())
    assert isinstance(a, _Entry) and isinstance(b, _Entry)
    a.arrived()
    assert a.refused(_scope()) is None
    b.arrived()  # its body came after, and its route has not asked yet
    first.run(slots.acquire)  # the room it was found is its own
    assert slots.in_use == 1
    with pytest.raises(APIError):
        later.run(slots.acquire)
    assert slots.in_use == 1 and slots.entering == 0
