"""The listener's door (``listener/door.py``, ``TurnSlots.knock``): a turn
request whose whole body came with its head is judged before hypercorn
starts the app for it. Refused there, it is answered by the listener (no
request id, no request log line: the app never saw it); let in, it holds
its place from that moment until its route takes the slot or it ends.
Requests the door leaves to the app — a browser's, a session's, one still
uploading — are judged in front of the app as before."""

from __future__ import annotations

import contextvars
import json
import logging
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from support import api_stack

from hermes_trio.listener.admission import FixedLimit
from hermes_trio.listener.door import DoorRefusal, Knock
from hermes_trio.server.admission.turn_slots import TurnSlots, _Entry
from hermes_trio.server.parsing.errors import APIError
from hermes_trio.testing import TextReply

JSON = {"Content-Type": "application/json"}
CHAT = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


def _head(path: str = "/v1/chat/completions", *extra: str, length: int = len(CHAT)) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        "Host: 127.0.0.1",
        "Content-Type: application/json",
        f"Content-Length: {length}",
        "Connection: close",
        *extra,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _ask(host: str, port: int, request: bytes, *, then: bytes = b"") -> bytes:
    """Send ``request`` in one write (``then`` a moment later); the whole answer."""
    stream = await trio.open_tcp_stream(host, port)
    async with stream:
        await stream.send_all(request)
        if then:
            await trio.sleep(0.05)
            await stream.send_all(then)
        answer = b""
        with trio.fail_after(10):
            while data := await stream.receive_some(65536):
                answer += data
    return answer


def _split(answer: bytes) -> tuple[int, dict[str, str], Any]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, json.loads(body)


async def test_the_door_judges_whole_turn_requests_only() -> None:
    slots = TurnSlots(1)
    chat = Knock(b"POST", b"/v1/chat/completions", [(b"host", b"x")], body_here=True)
    for other in (
        Knock(b"GET", b"/v1/chat/completions", [], body_here=True),
        Knock(b"POST", b"/v1/approvals/a1", [], body_here=True),
        Knock(b"POST", b"/v1/responses", [], body_here=False),
        Knock(b"POST", b"/v1/responses", [(b"x-session-id", b"s")], body_here=True),
        Knock(b"POST", b"/v1/chat/completions", [(b"origin", b"http://x")], body_here=True),
    ):
        assert contextvars.copy_context().run(slots.knock, other) is None
    assert slots.entering == 0
    first = contextvars.copy_context()
    entry = first.run(slots.knock, chat)
    # Let in with its body: counted at once, and the app asks no more.
    assert isinstance(entry, _Entry) and entry.admitted and slots.entering == 1
    scope: Any = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": []}
    assert first.run(slots.shed, scope) is entry
    assert entry.refused(scope) is None
    refused = contextvars.copy_context().run(slots.knock, chat)
    assert refused == DoorRefusal(
        429,
        "too many turns running at once (limit 1); retry shortly",
        "rate_limit_exceeded",
        (("Retry-After", "1"),),
    )
    first.run(slots.acquire)  # its place becomes its slot, without asking again
    assert (slots.in_use, slots.entering) == (1, 0)
    entry.leave()
    assert (slots.in_use, slots.entering) == (1, 0)
    # A request the door did not judge finds no door's entry of an earlier one.
    later = contextvars.copy_context()
    assert later.run(slots.knock, Knock(b"GET", b"/health", [], body_here=True)) is None
    assert isinstance(later.run(slots.shed, scope), APIError)


async def test_a_refusal_at_the_door_is_the_listeners_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with api_stack([TextReply("hello")]) as (api, _):
        slots = api.state.slots
        slots.limits = FixedLimit(0)
        caplog.set_level(logging.INFO)
        for path in ("/v1/chat/completions", "/v1/responses?x=1"):
            answer = await _ask(api.host, api.port, _head(path) + CHAT)
            status, headers, body = _split(answer)
            assert status == 429
            assert headers["retry-after"] == "1" and headers["connection"] == "close"
            assert body["error"]["code"] == "rate_limit_exceeded"
            assert "limit 0" in body["error"]["message"]
            # The app never saw it: no request id, no request log line; the
            # headers every answer has are there.
            assert "x-request-id" not in headers
            assert headers["date"] and headers["server"]
        assert slots.entering == 0
    lines = [r.getMessage() for r in caplog.records]
    assert not [line for line in lines if "/v1/chat/completions" in line and "429" in line]
    assert any(
        "refusing turn requests at the door (rate_limit_exceeded, limit 0)" in line
        for line in lines
    )


async def test_refusals_at_the_door_are_counted_in_the_log_every_ten_seconds(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    slots = TurnSlots(0)
    chat = Knock(b"POST", b"/v1/chat/completions", [], body_here=True)
    caplog.set_level(logging.WARNING, logger="hermes_trio.server")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(slots.watch_lag)
        for _ in range(5):
            assert isinstance(slots.knock(chat), DoorRefusal)
        told = [r.getMessage() for r in caplog.records]
        assert len(told) == 1 and told[0].startswith("refusing turn requests at the door")
        await trio.sleep(10.5)
        told = [r.getMessage() for r in caplog.records]
        assert told[1:] == [
            "turn requests refused at the door in the last 10 s: rate_limit_exceeded 4 (limit 0)"
        ]
        # Quiet for a while: nothing more, and the next one is told at once.
        await trio.sleep(30)
        assert len(caplog.records) == 2
        slots.knock(chat)
        assert caplog.records[-1].getMessage().startswith("refusing turn requests at the door")
        nursery.cancel_scope.cancel()


async def test_requests_the_door_leaves_to_the_app_are_refused_there() -> None:
    async with api_stack(
        [TextReply("hello")], api={"cors_origins": ["http://page.test"]}
    ) as (api, _):
        api.state.slots.limits = FixedLimit(0)
        browser = _head("/v1/chat/completions", "Origin: http://page.test") + CHAT
        session = _head("/v1/chat/completions", "X-Session-ID: s1") + CHAT
        for request, then in ((browser, b""), (session, b""), (_head(), CHAT)):
            status, headers, body = _split(await _ask(api.host, api.port, request, then=then))
            assert status == 429, body
            assert body["error"]["code"] == "rate_limit_exceeded"
            assert "x-request-id" in headers  # answered by the app's front
        status, headers, _ = _split(await _ask(api.host, api.port, browser))
        assert headers["access-control-allow-origin"] == "http://page.test"
        assert api.state.slots.entering == 0


async def test_a_place_taken_at_the_door_is_given_back_however_the_request_ends() -> None:
    script = [
        TextReply("one"),
        TextReply("two"),
        TextReply(tokens=["a", "b"], delay=0.05),
        TextReply("three"),
        TextReply("four"),
    ]
    async with api_stack(script, api={"max_concurrent": 2}) as (api, _):
        slots = api.state.slots
        # One connection, several requests: each judged at the door.
        async with httpx.AsyncClient(base_url=api.base_url, timeout=10, headers=JSON) as http:
            for _ in range(2):
                ok = await http.post("/chat/completions", content=CHAT)
                assert ok.status_code == 200, ok.text
                assert (slots.in_use, slots.entering) == (0, 0)
            # Let in at the door, refused by its route: its place is free again
            # (once the request's task has ended, just after its answer).
            bad = await http.post("/chat/completions", content=b"{not json")
            assert bad.status_code == 400
            await trio.testing.wait_all_tasks_blocked(0.01)
            assert (slots.in_use, slots.entering) == (0, 0)
        # A client gone before its answer: nothing stays taken.
        stream = await trio.open_tcp_stream(api.host, api.port)
        body = json.dumps({**json.loads(CHAT), "stream": True}).encode()
        await stream.send_all(_head(length=len(body)) + body)
        await stream.receive_some(1)
        await stream.aclose()
        with trio.fail_after(10):
            await slots.wait_idle()
        assert slots.entering == 0
        # Both places free: two more fit.
        async with httpx.AsyncClient(base_url=api.base_url, timeout=10, headers=JSON) as http:
            async with trio.open_nursery() as nursery:
                answers: list[int] = []

                async def one() -> None:
                    answers.append((await http.post("/chat/completions", content=CHAT)).status_code)

                nursery.start_soon(one)
                nursery.start_soon(one)
        assert answers == [200, 200]


async def test_a_request_the_gate_refuses_gets_the_gates_answer_and_holds_no_place() -> None:
    async with api_stack([TextReply("hello")], api={"max_concurrent": 1}) as (api, _):
        slots = api.state.slots
        plain = _head().replace(b"application/json", b"text/plain") + CHAT
        elsewhere = _head().replace(b"Host: 127.0.0.1", b"Host: evil.example") + CHAT
        # The answer read, the connection not closed by the client: it
        # lingers, and holds no place meanwhile.
        lingering = await trio.open_tcp_stream(api.host, api.port)
        await lingering.send_all(plain)
        status, headers, body = _split(await lingering.receive_some(65536))
        assert status == 415 and "x-request-id" in headers
        assert slots.entering == 0
        status, _, _ = _split(await _ask(api.host, api.port, _head() + CHAT))
        assert status == 200
        # With no room, such requests still get the gate's answer, not a 429.
        slots.limits = FixedLimit(0)
        for request, code in ((plain, "unsupported_media_type"), (elsewhere, None)):
            status, headers, body = _split(await _ask(api.host, api.port, request))
            assert status != 429 and "x-request-id" in headers, body
            assert code is None or body["error"]["code"] == code
        await lingering.aclose()
