"""The request gate on the real server: what a hostile web page can no
longer do to a server started without a key, and what legitimate clients
(same-origin pages, configured origins, the openai SDK, curl) still do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from support import api_stack, client_for

from hermes_trio.testing import TextReply, ToolCallReply

CHAT = {"model": "hermes-agent", "messages": [{"role": "user", "content": "hi"}]}


def write_then_answer(name: str = "pwned.txt") -> list[Any]:
    """A script whose first turn makes the agent write ``name`` in its workdir."""
    return [
        ToolCallReply(calls=[("write_file", {"path": name, "content": "owned"})]),
        TextReply("done"),
    ]


def host_of(api: Any) -> str:
    return api.url.split("//", 1)[1]


async def test_a_cross_origin_text_plain_post_runs_nothing(tmp_path: Path) -> None:
    # What any web page can send without a preflight: a "simple" POST.
    body = json.dumps(CHAT)
    async with api_stack(write_then_answer(), agent={"workdir": str(tmp_path)}) as (api, model):
        async with httpx.AsyncClient() as client:
            response = await client.post(
                f"{api.base_url}/chat/completions",
                content=body,
                headers={"Origin": "http://evil.example",
                         "Content-Type": "text/plain;charset=UTF-8"},
            )
        assert model.model_requests == []
    assert not (tmp_path / "pwned.txt").exists()
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "origin_not_allowed"
    assert "http://evil.example" in error["message"]
    assert "api_server.cors_origins" in error["message"]
    assert "access-control-allow-origin" not in response.headers


async def test_a_text_plain_post_without_origin_is_415(tmp_path: Path) -> None:
    async with api_stack(write_then_answer(), agent={"workdir": str(tmp_path)}) as (api, model):
        async with httpx.AsyncClient() as client:
            plain = await client.post(
                f"{api.base_url}/chat/completions",
                content=json.dumps(CHAT),
                headers={"Content-Type": "text/plain"},
            )
            form = await client.post(
                f"{api.base_url}/responses", data={"input": "hi"}
            )
            none = await client.post(
                f"{api.base_url}/chat/completions", content=json.dumps(CHAT).encode()
            )
        assert model.model_requests == []
    assert not (tmp_path / "pwned.txt").exists()
    for response in (plain, form, none):
        assert response.status_code == 415
        error = response.json()["error"]
        assert error["code"] == "unsupported_media_type"
        assert "Content-Type: application/json" in error["message"]
    assert "text/plain" in plain.json()["error"]["message"]


async def test_dns_rebinding_host_is_refused(tmp_path: Path) -> None:
    # The page's own name resolves to 127.0.0.1 now: the browser sends
    # Host: evil.example and treats the answer as same-origin.
    async with api_stack(write_then_answer(), agent={"workdir": str(tmp_path)}) as (api, model):
        port = api.port
        async with httpx.AsyncClient() as client:
            post = await client.post(
                f"{api.base_url}/chat/completions",
                json=CHAT,
                headers={"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"},
            )
            read = await client.get(
                f"{api.base_url}/models", headers={"Host": f"evil.example:{port}"}
            )
        assert model.model_requests == []
    assert not (tmp_path / "pwned.txt").exists()
    for response in (post, read):
        assert response.status_code == 403
        error = response.json()["error"]
        assert error["code"] == "host_not_allowed"
        assert f"evil.example:{port}" in error["message"]
        assert "api_server.allowed_hosts" in error["message"]


async def test_allowed_hosts_admit_a_name(tmp_path: Path) -> None:
    async with api_stack(api={"allowed_hosts": ["hermes.lan"]}) as (api, _):
        async with httpx.AsyncClient() as client:
            named = await client.get(f"{api.base_url}/models", headers={"Host": "hermes.lan:80"})
            other = await client.get(f"{api.base_url}/models", headers={"Host": "other.lan"})
            local = await client.get(f"{api.base_url}/models")
    assert named.status_code == 200
    assert other.status_code == 403
    assert local.status_code == 200


async def test_a_same_origin_page_still_runs_the_agent(tmp_path: Path) -> None:
    # The control for the tests above: the same script from a page the server
    # itself serves does write the file.
    async with api_stack(write_then_answer(), agent={"workdir": str(tmp_path)}) as (api, _):
        async with httpx.AsyncClient() as client:
            response = await client.post(
                f"{api.base_url}/chat/completions",
                json=CHAT,
                headers={"Origin": api.url, "Content-Type": "application/json; charset=utf-8"},
            )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "done"
    assert (tmp_path / "pwned.txt").read_text() == "owned"
    # Same-origin needs no CORS headers.
    assert "access-control-allow-origin" not in response.headers


async def test_a_configured_origin_still_works(tmp_path: Path) -> None:
    ui = "http://ui.test:3000"
    async with api_stack([TextReply("hello")], api={"cors_origins": [ui]}) as (api, _):
        async with httpx.AsyncClient() as client:
            response = await client.post(
                f"{api.base_url}/chat/completions", json=CHAT, headers={"Origin": ui}
            )
            foreign = await client.get(
                f"{api.base_url}/models", headers={"Origin": "http://ui.test:3001"}
            )
            null = await client.get(f"{api.base_url}/models", headers={"Origin": "null"})
            health = await client.get(f"{api.url}/health", headers={"Origin": "null"})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ui
    exposed = response.headers["access-control-expose-headers"].lower()
    for name in ("retry-after", "x-session-id", "x-request-id"):
        assert name in exposed
    assert foreign.status_code == 403 and null.status_code == 403
    assert health.status_code == 200


async def test_the_openai_sdk_and_curl_style_requests_still_work() -> None:
    async with api_stack([TextReply("one"), TextReply("two")]) as (api, _):
        async with client_for(api) as client:
            answer = await client.chat.completions.create(
                model="hermes-agent", messages=[{"role": "user", "content": "hi"}]
            )
        # curl -H 'Content-Type: application/json' -d '…' as in the manual (docs/serve.md)
        async with httpx.AsyncClient() as client:
            curl = await client.post(
                f"{api.base_url}/chat/completions",
                content=json.dumps(CHAT),
                headers={"Content-Type": "application/json", "User-Agent": "curl/8.5.0",
                         "Accept": "*/*"},
            )
    assert answer.choices[0].message.content == "one"
    assert curl.status_code == 200


FIREFOX_PREFLIGHT_HEADERS = (
    "authorization,content-type,user-agent,x-stainless-arch,x-stainless-lang,"
    "x-stainless-os,x-stainless-package-version,x-stainless-retry-count,"
    "x-stainless-runtime,x-stainless-runtime-version,x-stainless-timeout"
)


async def test_firefox_preflight_for_the_openai_npm_client_is_allowed() -> None:
    ui = "http://localhost:5173"
    async with api_stack(api={"cors_origins": [ui]}) as (api, _):
        async with httpx.AsyncClient() as client:
            response = await client.options(
                f"{api.base_url}/chat/completions",
                headers={
                    "Host": host_of(api),
                    "User-Agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) "
                    "Gecko/20100101 Firefox/128.0",
                    "Accept": "*/*",
                    "Accept-Language": "en-US,en;q=0.5",
                    "Accept-Encoding": "gzip, deflate, br, zstd",
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": FIREFOX_PREFLIGHT_HEADERS,
                    "Referer": f"{ui}/",
                    "Origin": ui,
                    "Connection": "keep-alive",
                    "Sec-Fetch-Dest": "empty",
                    "Sec-Fetch-Mode": "cors",
                    "Sec-Fetch-Site": "same-site",
                    "Priority": "u=4",
                },
            )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == ui
    allowed = {h.strip() for h in response.headers["access-control-allow-headers"].split(",")}
    assert set(FIREFOX_PREFLIGHT_HEADERS.split(",")) <= allowed
    assert "POST" in response.headers["access-control-allow-methods"]
