"""The webhook server the WhatsApp and Home Assistant adapters run: the same
listener as ``serve``, so connections end when HTTP says they end, idle and
slow ones are closed, and their number is bounded."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from types import SimpleNamespace
from typing import Any

import httpx
import trio
from quart import request

from hermes_trio.config import HomeAssistantConfig
from hermes_trio.listener import ConnectionLimits
from hermes_trio.platforms.base import InboundMessage
from hermes_trio.platforms.homeassistant.adapter import HomeAssistantAdapter
from hermes_trio.platforms.webhook import serve_webhook, webhook_app
from hermes_trio.testing.fake_homeassistant import open_fake_homeassistant


@asynccontextmanager
async def serving(**options: Any) -> AsyncIterator[tuple[str, int]]:
    app = webhook_app(__name__, 1000)

    @app.post("/hook")
    async def hook() -> tuple[dict[str, Any], int]:
        if request.headers.get("Authorization") != "Bearer s":
            # Refused before the body is read, as the adapters do.
            return {"ok": False}, 401
        await request.get_data()
        return {"ok": True}, 200

    adapter = SimpleNamespace(name="test", webhook_url=None)
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(
            serve_webhook, adapter, app, host="127.0.0.1", port=0, path="/hook",
            log=logging.getLogger("test.webhook"), **options,
        ))
        host_port = adapter.webhook_url.split("//")[1].split("/")[0]
        host, port = host_port.rsplit(":", 1)
        yield host, int(port)
        nursery.cancel_scope.cancel()


async def until_closed(host: str, port: int, data: bytes, *, within: float = 3) -> bytes:
    stream = await trio.open_tcp_stream(host, port)
    raw = bytearray()
    async with stream:
        await stream.send_all(data)
        with trio.fail_after(within):
            while chunk := await stream.receive_some(65536):
                raw += chunk
    return bytes(raw)


def post(host: str, port: int, *, version: str = "1.1", headers: str = "",
         body: bytes = b"{}", length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    return (
        f"POST /hook HTTP/{version}\r\nHost: {host}:{port}\r\n{headers}"
        f"Content-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
    ).encode() + body


async def test_a_webhook_connection_sent_connection_close_is_closed() -> None:
    async with serving() as (host, port):
        raw = await until_closed(
            host, port, post(host, port, headers="Authorization: Bearer s\r\nConnection: close\r\n")
        )
    assert raw.startswith(b"HTTP/1.1 200")
    assert json.loads(raw.partition(b"\r\n\r\n")[2]) == {"ok": True}


async def test_http_1_0_and_early_answers_close_the_webhook_connection() -> None:
    async with serving() as (host, port):
        old = await until_closed(host, port, post(host, port, version="1.0",
                                                  headers="Authorization: Bearer s\r\n"))
        # 401 before the body was read: the rest of it never comes.
        early = await until_closed(host, port, post(host, port, body=b"", length=500))
    assert old.startswith(b"HTTP/1.1 200")
    assert early.startswith(b"HTTP/1.1 401")


async def test_slow_and_idle_webhook_connections_are_closed() -> None:
    limits = ConnectionLimits(header_timeout=0.3, idle_timeout=0.3, linger=0.2)
    async with serving(limits=limits) as (host, port):
        slow = await until_closed(host, port, b"POST /hook HTTP/1.1\r\nHost: x\r\n")
        idle = await until_closed(host, port, b"")
    assert slow.startswith(b"HTTP/1.1 408")
    error = json.loads(slow.partition(b"\r\n\r\n")[2])["error"]
    assert "headers did not arrive" in error["message"]
    assert idle == b""


async def test_the_home_assistant_webhook_closes_after_connection_close() -> None:
    async with open_fake_homeassistant() as fake, httpx.AsyncClient() as client:
        adapter = HomeAssistantAdapter(
            HomeAssistantConfig(url=fake.base_url, token=fake.token), client, webhook_port=0
        )
        send, receive = trio.open_memory_channel[InboundMessage](10)
        async with trio.open_nursery() as nursery:
            with trio.fail_after(5):
                await nursery.start(adapter.run, send)
            assert adapter.webhook_url is not None
            host, port = adapter.webhook_url.split("//")[1].split("/")[0].rsplit(":", 1)
            body = json.dumps({"text": "lights on", "user_id": "u1"}).encode()
            data = (
                f"POST /hermes HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Authorization: Bearer {fake.token}\r\nConnection: close\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode() + body
            raw = await until_closed(host, int(port), data)
            message = await receive.receive()
            nursery.cancel_scope.cancel()
    assert raw.startswith(b"HTTP/1.1 200")
    assert message.text == "lights on"
