"""What ``model.base_url`` may hold, through the real ``serve`` command: a
query every request keeps (Azure's ``?api-version=…``), and user
information whose ``Basic`` form never shows in an answer or a log line."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import trio
from support import clean_env, start_serve
from tcp_proxy import open_tcp_proxy

from hermes_trio.testing import ErrorReply, TextReply, open_scripted_server
from hermes_trio.testing.scripted_model.records import RecordedRequest

CHAT = {"model": "hermes-agent", "messages": [{"role": "user", "content": "hi"}]}


def test_an_endpoint_goes_before_the_base_urls_query() -> None:
    from hermes_trio.llm.endpoints import endpoint

    base = "https://h.example/openai/v1?api-version=2024-06-01"
    assert endpoint(base, "/chat/completions") == (
        "https://h.example/openai/v1/chat/completions?api-version=2024-06-01"
    )
    assert endpoint("http://h/v1/", "/models") == "http://h/v1/models"
    assert endpoint("http://u:p@h/v1#x", "/models") == "http://u:p@h/v1/models"


async def test_a_base_url_with_a_query_keeps_it_on_every_request(tmp_path: Path) -> None:
    async with (
        open_scripted_server([TextReply("fine")]) as model,
        open_tcp_proxy(int(model.base_url.split(":")[2].split("/")[0])) as proxy,
    ):
        env = clean_env(
            HERMES_MODEL_BASE_URL=f"http://127.0.0.1:{proxy.port}/v1?api-version=2024-06-01",
            HERMES_MODEL="scripted-model",
            HERMES_DATA_DIR=str(tmp_path / "data"),
        )
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path)
            async with httpx.AsyncClient(base_url=served.base_url, timeout=15) as http:
                reply = await http.post("/chat/completions", json=CHAT)
            nursery.cancel_scope.cancel()
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"] == "fine"
    sent = bytes(proxy.sent)
    assert b"POST /v1/chat/completions?api-version=2024-06-01 HTTP/1.1" in sent
    assert b"?api-version=2024-06-01/" not in sent


async def test_the_basic_form_of_url_user_information_is_redacted(tmp_path: Path) -> None:
    userinfo = "hermes:s3cret-pass-word"
    basic = base64.b64encode(userinfo.encode()).decode()

    def echo(request: RecordedRequest) -> ErrorReply:
        # A server that quotes the credentials it refused.
        return ErrorReply(401, f"bad credentials: {request.headers.get('authorization')}")

    async with open_scripted_server([echo], default=echo) as model:
        host = model.base_url.removeprefix("http://")
        env = clean_env(
            HERMES_MODEL_BASE_URL=f"http://{userinfo}@{host}",
            HERMES_MODEL="scripted-model",
            HERMES_DATA_DIR=str(tmp_path / "data"),
        )
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path, args=["--verbose"])
            async with httpx.AsyncClient(base_url=served.base_url, timeout=15) as http:
                reply = await http.post("/chat/completions", json=CHAT)
            with trio.fail_after(5):
                await served.wait_for("/v1/chat/completions")
            nursery.cancel_scope.cancel()
        sent = [r.headers.get("authorization") for r in model.model_requests]
    # It was sent as Basic credentials, and echoed, and shown nowhere.
    assert f"Basic {basic}" in sent
    assert reply.status_code >= 400
    assert "<redacted>" in reply.text, reply.text
    log = "\n".join(served.output)
    for shown in (reply.text, log):
        assert basic not in shown and basic.rstrip("=") not in shown
        assert "s3cret-pass-word" not in shown
