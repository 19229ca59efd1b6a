"""The model client keeps the cookies a model server sets, and reads an
answer's cookies only when it sets one (httpx would build a urllib request
for every answer to look)."""

from __future__ import annotations

import httpx

from hermes_trio.config import ModelConfig
from hermes_trio.llm.client import make_http_client


def _answer(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/set":
        return httpx.Response(200, headers={"Set-Cookie": "affinity=b7; Path=/"})
    return httpx.Response(200, json={"cookie": request.headers.get("cookie")})


async def test_a_cookie_the_model_server_sets_is_sent_back() -> None:
    async with make_http_client(ModelConfig(), transport=httpx.MockTransport(_answer)) as http:
        await http.get("http://model.test/set")
        answer = await http.get("http://model.test/echo")
    assert answer.json() == {"cookie": "affinity=b7"}
    assert http.cookies.get("affinity") == "b7"


async def test_an_answer_without_cookies_is_not_read_for_them(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    built: list[object] = []
    original = httpx.Cookies._CookieCompatRequest.__init__

    def counting(self: object, request: httpx.Request) -> None:
        built.append(request)
        original(self, request)  # type: ignore[arg-type]

    monkeypatch.setattr(httpx.Cookies._CookieCompatRequest, "__init__", counting)
    async with make_http_client(ModelConfig(), transport=httpx.MockTransport(_answer)) as http:
        for _ in range(3):
            await http.get("http://model.test/echo")
        assert built == []
        await http.get("http://model.test/set")
    assert len(built) == 1
