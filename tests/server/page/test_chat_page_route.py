"""The chat page's routes over HTTP: served without the key, with its
security and cache headers, behind the same gate as the API."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from support import api_stack

import hermes_trio.server.page
from hermes_trio.cli.serve_shared import page_url
from hermes_trio.server.page.route import (
    ASSETS,
    CONTENT_SECURITY_POLICY,
    not_modified,
)
from hermes_trio.testing import TextReply

PAGE_DIR = Path(hermes_trio.server.page.__file__).parent
CHAT = {"messages": [{"role": "user", "content": "hi"}]}


async def test_the_page_is_served_without_the_key_with_strict_headers() -> None:
    async with api_stack(api={"key": "sekret"}) as (api, _):
        async with httpx.AsyncClient(base_url=api.url) as client:
            page = await client.get("/")
            script = await client.get("/page/chat.js")
            models = await client.get("/v1/models")
    assert models.status_code == 401
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    for response in (page, script):
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["cache-control"] == "no-cache"
        assert response.headers["etag"].startswith('"')
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"
    # No inline script or style: every script is a file the policy allows.
    html = page.text
    assert re.findall(r"<script[^>]*>", html) == ['<script type="module" src="/page/chat.js">']
    assert "<style" not in html and " style=" not in html and not re.search(r"<[^>]*\son\w+=", html)


async def test_an_unchanged_file_is_a_304_and_unknown_names_are_404() -> None:
    async with api_stack() as (api, _):
        async with httpx.AsyncClient(base_url=api.url) as client:
            first = await client.get("/page/markdown.js")
            again = await client.get(
                "/page/markdown.js", headers={"If-None-Match": first.headers["etag"]}
            )
            unknown = await client.get("/page/route.py")
            escape = await client.get("/page/..%2Froute.py")
            head = await client.head("/")
    assert first.status_code == 200 and first.content
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == first.headers["etag"]
    assert again.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    for refused in (unknown, escape):
        assert refused.status_code == 404
        assert refused.json()["error"]["message"].startswith("no such endpoint")
    assert head.status_code == 200 and head.content == b""


async def test_the_gate_lets_the_page_in_and_keeps_other_origins_out() -> None:
    async with api_stack([TextReply("hello")]) as (api, model):
        async with httpx.AsyncClient(base_url=api.url) as client:
            foreign_host = await client.get("/", headers={"Host": "evil.example"})
            foreign = await client.post(
                "/v1/chat/completions", json=CHAT, headers={"Origin": "http://evil.example"}
            )
            own = await client.post("/v1/chat/completions", json=CHAT, headers={"Origin": api.url})
    assert foreign_host.status_code == 403
    assert foreign.status_code == 403
    assert own.status_code == 200 and own.json()["choices"][0]["message"]["content"] == "hello"
    assert len(model.model_requests) == 1


def test_every_file_in_the_page_folder_is_served() -> None:
    shipped = {p.name for p in PAGE_DIR.iterdir() if p.is_file() and p.suffix != ".py"}
    assert shipped == {*ASSETS, "index.html"}
    # pyproject's package-data takes them by extension.
    assert {Path(name).suffix for name in shipped} == {".html", ".js", ".css", ".svg"}


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, False),
        ("", False),
        ('"abc"', True),
        ('W/"abc"', True),
        ('"x", "abc"', True),
        ("*", True),
        ('"abcd"', False),
        ("abc", False),
    ],
)
def test_not_modified(header: str | None, expected: bool) -> None:
    assert not_modified(header, '"abc"') is expected


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8642/"),
        ("localhost", "http://localhost:8642/"),
        ("0.0.0.0", "http://127.0.0.1:8642/"),
        ("::", "http://[::1]:8642/"),
        ("::1", "http://[::1]:8642/"),
        ("hermes.localhost", "http://hermes.localhost:8642/"),
    ],
)
def test_the_page_address_serve_prints(host: str, url: str) -> None:
    assert page_url(host, 8642) == url
