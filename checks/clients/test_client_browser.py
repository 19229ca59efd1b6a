"""Scenario 7: a real browser (headless Chromium via playwright-core) on a page
served from another loopback origin.

(a) a cross-origin ``text/plain`` POST to a key-less server must not make the
    agent write a file (issue 10 item 1);
(b) with ``api_server.cors_origins`` listing the page's origin, the page
    streams an answer with fetch (JSON content type, so preflighted) and reads
    it as it arrives; the openai npm client does the same from the page;
(c) a preflight listing ``user-agent``, as Firefox sends for the openai npm
    client, is allowed (issue 10 item 14; Chromium never lists it, so this
    one is a raw request);
(d) DNS rebinding: a page whose host name resolves to 127.0.0.1 talks to the
    server same-origin, with a foreign ``Host``; it must not drive the agent
    (issue 10 item 1).

Screenshots go to ``checks/clients/.artifacts/`` (``HERMES_CHECKS_ARTIFACTS``).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import trio
from clientcheck import (
    API_KEY,
    CLIENTS_DIR,
    NODE_SCRIPTS,
    Verdict,
    artifacts_dir,
    chromium,
    client_env,
    hermes,
    run_node,
    static_server,
)

from hermes_trio.testing import TextReply, ToolCallReply

BROWSER = pytest.mark.clients("node", "chromium")
PAGE = {"/": ("text/html; charset=utf-8", (NODE_SCRIPTS / "page.html").read_bytes())}
ANSWER = "Streaming into a browser tab — «token by token». 🌙 One, two, three, four, five."
CHAT = {"model": "hermes-agent", "messages": [{"role": "user", "content": "Say hello."}]}


def browser_env() -> dict[str, str]:
    return client_env(HERMES_CHROMIUM=chromium())


def write_file_script(canary: Path) -> list:
    return [
        ToolCallReply([("write_file", {"path": str(canary), "content": "written by a web page"})]),
        TextReply("Done."),
    ]


@BROWSER
async def test_cross_origin_text_plain_post_runs_nothing(tmp_path: Path) -> None:
    canary = tmp_path / "canary.txt"
    async with (
        hermes(write_file_script(canary), tmp_path, key=None) as stack,
        static_server(PAGE) as origin,
    ):
        run = await run_node(
            "browser_client.mjs",
            "text_plain",
            {
                "page_url": origin + "/",
                "url": stack.client["base_url"] + "/chat/completions",
                "body": {**CHAT, "stream": False},
            },
            time_limit=45,
            env=browser_env(),
        )
        await trio.sleep(0.3)  # let a turn that did start finish its tool
        asked_model = len(stack.model.model_requests)
    v = Verdict(run)
    v.expect(run.last("result"), "the page did not report its request")
    v.expect(
        not canary.exists(),
        f"a cross-origin text/plain POST from {origin} made the agent write "
        f"{canary.name} (issue 10 item 1)",
    )
    v.expect(
        asked_model == 0,
        f"the request from a foreign origin ran a turn ({asked_model} model request(s))",
    )
    v.finish()


@BROWSER
async def test_cors_page_streams_with_fetch(tmp_path: Path) -> None:
    shot = artifacts_dir() / "browser-stream.png"
    shot.unlink(missing_ok=True)
    async with static_server(PAGE) as origin:
        async with hermes(
            [TextReply(ANSWER, delay=0.05)], tmp_path, api={"cors_origins": [origin]}
        ) as stack:
            run = await run_node(
                "browser_client.mjs",
                "stream",
                {
                    "page_url": origin + "/",
                    "url": stack.client["base_url"] + "/chat/completions",
                    "key": API_KEY,
                    "body": {**CHAT, "stream": True},
                    "screenshot": str(shot),
                },
                time_limit=45,
                env=browser_env(),
            )
    v = Verdict(run)
    result = run.last("result")
    v.expect(
        result.get("status") == 200,
        f"status {result.get('status')}: {result.get('body') or result.get('error')}",
    )
    v.expect(result.get("text") == ANSWER, f"the page read {result.get('text')!r}")
    v.expect(result.get("done"), "no [DONE]")
    v.expect(not result.get("errors"), f"error frames {result.get('errors')}")
    reads = result.get("reads") or []
    spread = reads[-1]["t"] - reads[0]["t"] if reads else 0.0
    v.expect(
        len(reads) >= 5 and spread >= 0.3,
        f"the page did not read the answer as it arrived: {len(reads)} reads over "
        f"{spread:.3f} s (tokens were 50 ms apart)",
    )
    v.expect(shot.exists(), f"no screenshot at {shot}")
    v.finish()


@BROWSER
async def test_openai_npm_client_in_the_page(tmp_path: Path) -> None:
    shot = artifacts_dir() / "browser-openai-npm.png"
    shot.unlink(missing_ok=True)
    openai_dir = CLIENTS_DIR / "node" / "node_modules" / "openai"
    async with static_server(PAGE, dirs={"/openai/": openai_dir}) as origin:
        async with hermes(
            [TextReply(ANSWER, delay=0.02)], tmp_path, api={"cors_origins": [origin]}
        ) as stack:
            run = await run_node(
                "browser_client.mjs",
                "sdk",
                {
                    "page_url": origin + "/",
                    "base_url": stack.client["base_url"],
                    "key": API_KEY,
                    "body": CHAT,
                    "screenshot": str(shot),
                },
                time_limit=45,
                env=browser_env(),
            )
    v = Verdict(run)
    result = run.last("result")
    v.expect(
        result.get("ok"),
        f"the openai npm client failed in the page: {result.get('name')}: {result.get('error')}",
    )
    v.expect(result.get("text") == ANSWER, f"the page read {result.get('text')!r}")
    v.expect(not run.of("requestfailed"), f"failed requests: {run.of('requestfailed')}")
    v.finish()


# What Firefox 13x sends before the openai npm client's POST (it lists the
# User-Agent header the SDK sets; Chromium leaves it out).
FIREFOX_PREFLIGHT_HEADERS = (
    "authorization,content-type,user-agent,x-stainless-arch,x-stainless-lang,"
    "x-stainless-os,x-stainless-package-version,x-stainless-retry-count,"
    "x-stainless-runtime,x-stainless-runtime-version,x-stainless-timeout"
)


async def test_preflight_allows_user_agent(tmp_path: Path) -> None:
    origin = "http://127.0.0.1:5173"
    async with hermes([], tmp_path, api={"cors_origins": [origin]}) as stack:
        async with httpx.AsyncClient(timeout=10) as http:
            reply = await http.options(
                stack.client["base_url"] + "/chat/completions",
                headers={
                    "Origin": origin,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": FIREFOX_PREFLIGHT_HEADERS,
                    "User-Agent": "Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 "
                    "Firefox/140.0",
                },
            )
    v = Verdict()
    allowed = {
        h.strip().lower()
        for h in reply.headers.get("access-control-allow-headers", "").split(",")
        if h.strip()
    }
    v.expect(reply.status_code in (200, 204), f"preflight status {reply.status_code}")
    v.expect(
        reply.headers.get("access-control-allow-origin") == origin,
        f"Access-Control-Allow-Origin {reply.headers.get('access-control-allow-origin')!r}",
    )
    asked = set(FIREFOX_PREFLIGHT_HEADERS.split(","))
    missing = sorted(asked - allowed) if "*" not in allowed else []
    v.expect(
        not missing,
        f"the preflight does not allow {missing} (issue 10 item 14: Firefox then refuses "
        f"every request of the openai npm client and the AI SDK)",
    )
    v.finish()


@BROWSER
async def test_dns_rebinding_cannot_drive_the_agent(tmp_path: Path) -> None:
    canary = tmp_path / "canary.txt"
    async with hermes(write_file_script(canary), tmp_path, key=None) as stack:
        # The page and the API share one origin, http://rebind.test:PORT, as
        # after a DNS rebinding: the static server serves the page at / and
        # passes every other request through, bytes unchanged, to the API.
        async with static_server(PAGE, proxy_port=stack.api.port) as origin:
            port = origin.rsplit(":", 1)[1]
            run = await run_node(
                "browser_client.mjs",
                "rebind",
                {
                    "page_url": f"http://rebind.test:{port}/",
                    "body": CHAT,
                    "rules": "MAP rebind.test 127.0.0.1",
                },
                time_limit=45,
                env=browser_env(),
            )
            await trio.sleep(0.3)
            asked_model = len(stack.model.model_requests)
    v = Verdict(run)
    result = run.last("result")
    v.expect(run.last("page").get("status") == 200, f"the page did not load: {run.last('page')}")
    v.expect(result, "the page did not report its request")
    v.expect(
        not canary.exists(),
        "a page on http://rebind.test (a foreign Host resolving to 127.0.0.1) made the "
        "agent write a file (issue 10 item 1: Host is never checked)",
    )
    v.expect(
        result.get("status") != 200,
        f"the page read the answer: HTTP {result.get('status')} {result.get('body')!r}",
    )
    v.expect(asked_model == 0, f"a foreign Host ran a turn ({asked_model} model request(s))")
    v.finish()
