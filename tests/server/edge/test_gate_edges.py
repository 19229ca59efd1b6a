"""The request gate in front of the whole app, on real sockets: malformed
``Host`` values, refusals a permitted page can read, bodies that are not
JSON however they arrive, protocol errors and HTTP/2 attempts, and bodies
that arrive slowly."""

from __future__ import annotations

import json
import logging
from typing import Any

import h2.config
import h2.connection
import h2.events
import httpx
import pytest
import trio
from support import api_stack

from hermes_trio.config import Config
from hermes_trio.server.app import create_app
from hermes_trio.server.edge.bodies import read_json_body
from hermes_trio.server.parsing.errors import APIError
from hermes_trio.server.run import startup_problem
from hermes_trio.testing import TextReply

CHAT = {"model": "hermes-agent", "messages": [{"role": "user", "content": "hi"}]}


def raw_request(
    method: str,
    path: str,
    host: str | None,
    *,
    body: bytes | None = None,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1"]
    if host is not None:
        lines.append(f"Host: {host}")
    for name, value in {"Connection": "close", **(headers or {})}.items():
        lines.append(f"{name}: {value}")
    if body is not None:
        lines += [f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


async def exchange(api: Any, data: bytes) -> tuple[bytes, dict[str, str], bytes]:
    """Send ``data``, read until the server closes: status line, headers, body."""
    stream = await trio.open_tcp_stream("127.0.0.1", api.port)
    async with stream:
        await stream.send_all(data)
        raw = bytearray()
        with trio.fail_after(5):
            while chunk := await stream.receive_some(65536):
                raw += chunk
    head, _, body = bytes(raw).partition(b"\r\n\r\n")
    status, *lines = head.split(b"\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


def error_of(body: bytes) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


@pytest.mark.parametrize(
    "host",
    ["localhost..:{port}", "a" * 64 + ".localhost:{port}", "localhost:99999999", ".localhost",
     "local host", "xn--/.localhost"],
)
@pytest.mark.parametrize("path", ["/v1/models", "/health"])
async def test_a_malformed_host_is_a_400_not_a_crash(
    host: str, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    # With a key, any well-formed name is allowed: the form is still checked.
    async with api_stack(api={"key": "k"}) as (api, _):
        status, _, body = await exchange(
            api,
            raw_request("GET", path, host.format(port=api.port),
                        headers={"Authorization": "Bearer k"}),
        )
    assert status.startswith(b"HTTP/1.1 400"), status
    error = error_of(body)
    assert error["code"] == "invalid_host"
    assert error["param"] == "Host"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_refusals_a_permitted_page_can_read() -> None:
    origin = "http://app.test"
    async with api_stack(api={"cors_origins": [origin]}) as (api, model):
        here = f"127.0.0.1:{api.port}"
        plain = await exchange(api, raw_request(
            "POST", "/v1/chat/completions", here, body=json.dumps(CHAT).encode(),
            content_type="text/plain", headers={"Origin": origin}))
        foreign_host = await exchange(api, raw_request(
            "GET", "/v1/models", "evil.example", headers={"Origin": origin}))
        foreign_page = await exchange(api, raw_request(
            "POST", "/v1/chat/completions", here, body=json.dumps(CHAT).encode(),
            content_type="text/plain", headers={"Origin": "http://evil.example"}))
        missing = await exchange(api, raw_request(
            "GET", "/v1/nothing", here, headers={"Origin": origin}))
    assert model.model_requests == []
    for (status, headers, body), code in (
        (plain, "unsupported_media_type"), (foreign_host, "host_not_allowed"),
    ):
        assert error_of(body)["code"] == code, status
        assert headers["access-control-allow-origin"] == origin
        assert "Origin" in headers["vary"]
    assert plain[0].startswith(b"HTTP/1.1 415")
    # A page the server does not trust still learns nothing.
    assert foreign_page[0].startswith(b"HTTP/1.1 403")
    assert "access-control-allow-origin" not in foreign_page[1]
    # Errors from the routes too.
    assert missing[0].startswith(b"HTTP/1.1 404")
    assert missing[1]["access-control-allow-origin"] == origin


async def test_a_protocol_error_is_a_json_400() -> None:
    async with api_stack() as (api, _):
        status, headers, body = await exchange(api, b"GARBAGE\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 400")
    assert headers["content-type"] == "application/json"
    assert error_of(body)["type"] == "invalid_request_error"


async def h2_post(port: int, headers: list[tuple[str, str]], body: bytes) -> bytes:
    """An HTTP/2 prior-knowledge request; what came back, raw."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.send_headers(1, headers)
    conn.send_data(1, body, end_stream=True)
    raw = bytearray()
    async with stream:
        await stream.send_all(conn.data_to_send())
        with trio.move_on_after(3):
            while chunk := await stream.receive_some(65536):
                raw += chunk
    return bytes(raw)


async def test_http2_without_tls_is_refused_and_runs_nothing() -> None:
    async with api_stack([TextReply("ran the agent")]) as (api, model):
        raw = await h2_post(
            api.port,
            [(":method", "POST"), (":path", "/v1/chat/completions"), (":scheme", "http"),
             (":authority", f"127.0.0.1:{api.port}"), ("content-type", "text/plain")],
            json.dumps(CHAT).encode(),
        )
        async with httpx.AsyncClient() as client:
            upgrade = await client.get(
                f"{api.base_url}/models",
                headers={"Connection": "Upgrade, HTTP2-Settings", "Upgrade": "h2c",
                         "HTTP2-Settings": "AAMAAABkAARAAAAAAAIAAAAA"},
            )
    assert model.model_requests == []
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400")
    error = error_of(body)
    assert error["code"] == "http2_not_supported"
    # An upgrade offer is declined by answering in HTTP/1.1, as HTTP allows.
    assert upgrade.status_code == 200
    assert upgrade.http_version == "HTTP/1.1"


async def test_the_body_parser_itself_refuses_what_is_not_json() -> None:
    # Behind the gate, the one place that parses bodies checks the type too.
    async with api_stack() as (api, _):
        app = create_app(api.state)
        for content_type in ("text/plain", None):
            headers = {"Content-Type": content_type} if content_type else {}
            async with app.test_request_context(
                "/v1/chat/completions", method="POST", data=b"{}", headers=headers
            ):
                with pytest.raises(APIError) as refused:
                    await read_json_body()
            assert refused.value.status == 415
            assert refused.value.code == "unsupported_media_type"


async def send_slowly(
    api: Any, body: bytes, *, piece: int, pause: float, declared: int | None = None
) -> bytes:
    """POST ``body`` ``piece`` bytes at a time, ``pause`` seconds apart;
    everything the server answered, until it closed."""
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{api.port}\r\n"
        "Content-Type: application/json\r\nConnection: close\r\n"
        f"Content-Length: {len(body) if declared is None else declared}\r\n\r\n"
    ).encode()
    stream = await trio.open_tcp_stream("127.0.0.1", api.port)
    got = bytearray()
    async with stream:
        await stream.send_all(head)
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                while chunk := await stream.receive_some(65536):
                    got.extend(chunk)
                nursery.cancel_scope.cancel()

            nursery.start_soon(read)
            try:
                for start in range(0, len(body), piece):
                    await stream.send_all(body[start : start + piece])
                    await trio.sleep(pause)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            with trio.fail_after(5):
                await trio.sleep_forever()
    return bytes(got)


def long_chat(size: int) -> bytes:
    return json.dumps({**CHAT, "messages": [{"role": "user", "content": "x" * size}]}).encode()


async def test_a_slow_but_steady_upload_is_not_cut_off() -> None:
    # 1 s in all, never more than 0.1 s without a byte.
    async with api_stack([TextReply("ok")], api={"body_timeout": 0.5}) as (api, _):
        raw = await send_slowly(api, long_chat(1000), piece=100, pause=0.1)
    assert raw.startswith(b"HTTP/1.1 200"), raw[:200]


async def test_an_upload_that_stalls_gets_408_naming_body_timeout() -> None:
    async with api_stack(api={"body_timeout": 0.3}) as (api, _):
        start = trio.current_time()
        raw = await send_slowly(api, long_chat(100)[:50], piece=50, pause=0, declared=200)
        waited = trio.current_time() - start
    status, _, body = raw.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 408")
    error = error_of(body)
    assert error["code"] == "request_timeout"
    assert "api_server.body_timeout" in error["message"]
    assert waited < 3


async def test_an_upload_past_the_total_gets_408_naming_body_total_timeout() -> None:
    api_settings = {"body_timeout": 0.5, "body_total_timeout": 0.6}
    async with api_stack([TextReply("ok")], api=api_settings) as (api, _):
        raw = await send_slowly(api, long_chat(2000), piece=100, pause=0.1)
    status, _, body = raw.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 408")
    assert "api_server.body_total_timeout" in error_of(body)["message"]


async def test_quart_limit_covers_chunked_and_declared_bodies() -> None:
    # One limit, one place: the app's own MAX_CONTENT_LENGTH.
    async with api_stack(api={"max_body_bytes": 1000}) as (api, model):
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{api.port}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        ).encode()
        stream = await trio.open_tcp_stream("127.0.0.1", api.port)
        raw = bytearray()
        async with stream:
            await stream.send_all(head)
            try:
                for _ in range(20):
                    await stream.send_all(b"64\r\n" + b" " * 100 + b"\r\n")
            except trio.BrokenResourceError:
                pass
            with trio.fail_after(5):
                while chunk := await stream.receive_some(65536):
                    raw += chunk
        declared = await exchange(api, raw_request(
            "POST", "/v1/chat/completions", f"127.0.0.1:{api.port}", body=None,
            headers={"Content-Type": "application/json", "Content-Length": "5000"}))
    assert model.model_requests == []
    for status, body in (
        (bytes(raw).split(b"\r\n", 1)[0], bytes(raw).partition(b"\r\n\r\n")[2]),
        (declared[0], declared[2]),
    ):
        assert status.startswith(b"HTTP/1.1 413"), status
        assert "limit 1000 bytes" in error_of(body)["message"]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True),
     ("::ffff:127.0.0.1", True), ("app.localhost", True),
     ("0.0.0.0", False), ("192.168.1.2", False), ("::", False), ("example.com", False)],
)
def test_one_loopback_rule_for_binding_and_for_hosts(host: str, loopback: bool) -> None:
    from hermes_trio.config import ApiServerConfig, ModelConfig

    config = Config(model=ModelConfig(base_url="http://m"), api_server=ApiServerConfig(host=host))
    assert (startup_problem(config) is None) is loopback
