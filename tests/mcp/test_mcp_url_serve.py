"""``api_server.mcp_allowed_urls`` and a request's own secrets, against the
real ``hermes-trio serve`` with the official openai SDK, the scripted model
server and local streamable-HTTP MCP servers (tests/mcp/http_server.py):
one the operator allowed, one nobody allowed (it counts every request it
gets, and must get none), one allowed on IPv6 loopback, and an allowed one
that redirects every request to the forbidden one.

- the string-prefix bypasses (user information with ``@``, ``\\@`` and a
  space before the ``@``; port ``1910`` allowed, ``19100`` reached) and the
  parser cases (IPv6 literals written two ways, host case, percent-encoding
  in the host and path, a trailing dot in the host, a default port, a path
  next to the allowed one) are refused with a 400 naming
  ``tools[0].server_url`` or admitted as the same URL;
- a redirect to another origin is not followed;
- a credential in ``server_url``'s query is redacted in the echoed
  ``tools``, the stored response and the errors;
- a request's header values are redacted in its own log line and
  recording, and not in another request's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import trio
from http_server import Calls, build
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve
from mcp.server.transport_security import TransportSecuritySettings
from support import ServeProcess, clean_env, start_serve

from hermes_trio.testing import TextReply, open_scripted_server

ANY_HOST = TransportSecuritySettings(enable_dns_rebinding_protection=False)

HEADER_SECRET = "Bearer request-header-secret-0123456789"
QUERY_SECRET = "query-token-secret-0123456789abcd"
# A header value that is also a path and a phrase every request writes:
# registered for the process, it hid them in everyone's lines.
PROBE = "/v1/responses"
PHRASE = "phrase-of-the-user-qrstuvwxyz"


@asynccontextmanager
async def open_asgi(app: Any, host: str = "127.0.0.1") -> AsyncIterator[int]:
    """Serve ``app`` on loopback for the block; yields its port."""
    config = HypercornConfig()
    config.bind = [f"[{host}]:0" if ":" in host else f"{host}:0"]
    config.accesslog = None
    config.errorlog = None
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(serve, app, config)
        yield int(binds[0].rsplit(":", 1)[1])
        nursery.cancel_scope.cancel()


def counting(app: Any, seen: list[str]) -> Any:
    """``app``, noting every request's path and Authorization header."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            seen.append(f"{scope['path']} {headers.get(b'authorization', b'').decode()}")
        await app(scope, receive, send)

    return wrapped


def redirecting_to(location: str) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 307,
                "headers": [(b"location", location.encode()), (b"content-length", b"0")],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    return app


def mcp_tool(url: str, **headers: str) -> Any:
    return {
        "type": "mcp",
        "server_label": "web",
        "server_url": url,
        "headers": {"Authorization": HEADER_SECRET, **headers},
        "require_approval": "never",
    }


async def refused(client: openai.AsyncOpenAI, url: str) -> str:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="m", input="x", tools=[mcp_tool(url)])
    assert caught.value.status_code == 400, url
    assert caught.value.param == "tools[0].server_url", (url, caught.value.message)
    return caught.value.message


async def listed(
    client: openai.AsyncOpenAI,
    url: str,
    *,
    said: str = "x",
    request_id: str | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    extra = {"X-Request-ID": request_id} if request_id else None
    with trio.fail_after(30):
        response = await client.responses.create(
            model="m",
            input=said,
            tools=[mcp_tool(url, **(headers or {}))],
            extra_headers=extra,
        )
    return response.model_dump(mode="json")


def access_line(served: ServeProcess, request_id: str) -> dict[str, Any]:
    line = next(line for line in served.output if f'"request_id": "{request_id}"' in line)
    fields: dict[str, Any] = json.loads(line[line.index("{") :])
    return fields


async def check_bypasses(client: openai.AsyncOpenAI, allowed: int, forbidden: int, v6: int) -> None:
    """The string-prefix check's bypasses and the parser cases."""
    here = "127.0.0.1"
    for url in [
        f"http://{here}:{allowed}@{here}:{forbidden}/mcp",
        f"http://{here}:{allowed}\\@{here}:{forbidden}/mcp",
        f"http://{here}:{allowed} @{here}:{forbidden}/mcp",
        f"http://{here}:{forbidden}/mcp",  # port 1910x under "…:1910"
        f"http://{here}/mcp",  # the default port is not the allowed one
        f"http://127.0.0.%31:{allowed}/mcp",
        f"http://localhost.:{allowed}/mcp",
        f"http://localhost:{allowed}/mcpx",  # beside /mcp, not under it
        f"http://localhost:{allowed}/mcp/%2e%2e/x",
        f"http://localhost:{allowed}/mcp/../mcp",
        f"http://localhost:{allowed}/mcp/a%2fb",
        f"http://[::ffff:127.0.0.1]:{allowed}/mcp",
        f"http://[::1]:{forbidden}/mcp",
        f"http://{here}:{allowed}/mcp#x",
    ]:
        await refused(client, url)
    # Admitted: the same URL written otherwise.
    for url in [
        f"http://{here}:{allowed}/mcp",
        f"http://LocalHost:{allowed}/mcp",
        f"HTTP://localhost:{allowed}/mcp/",
        f"http://[0:0:0:0:0:0:0:1]:{v6}/mcp",
        f"http://[::1]:{v6}/mcp",
    ]:
        (listing, *_) = (await listed(client, url))["output"]
        assert listing["type"] == "mcp_list_tools" and listing["error"] is None, (url, listing)


@dataclass
class Stack:
    served: ServeProcess
    client: openai.AsyncOpenAI
    allowed: int
    forbidden: int
    v6: int
    redirector: int
    forbidden_seen: list[str]


@asynccontextmanager
async def serving(tmp_path: Path, *args: str) -> AsyncIterator[Stack]:
    """serve with the four MCP servers (see the module's docstring)."""
    forbidden_seen: list[str] = []
    forbidden_app = counting(build(Calls()).streamable_http_app(), forbidden_seen)
    async with (
        open_asgi(forbidden_app) as forbidden,
        open_asgi(build(Calls()).streamable_http_app()) as allowed,
        # Its Host checks would refuse [0:0:0:0:0:0:0:1], a name it does not know.
        open_asgi(build(Calls()).streamable_http_app(transport_security=ANY_HOST), "::1") as v6,
        open_asgi(redirecting_to(f"http://127.0.0.1:{forbidden}/mcp")) as redirector,
        open_scripted_server([TextReply("ok")] * 12) as model,
        trio.open_nursery() as nursery,
    ):
        entries = [
            f"http://127.0.0.1:{allowed}",
            f"http://127.0.0.1:{str(forbidden)[:-1]}",
            f"http://localhost:{allowed}/mcp",
            f"http://[::1]:{v6}",
            f"http://127.0.0.1:{redirector}/",
        ]
        (tmp_path / "config.yaml").write_text(
            f"api_server:\n  mcp_allowed_urls: {json.dumps(entries)}\n"
        )
        env = clean_env(
            HERMES_MODEL_BASE_URL=model.base_url, HERMES_DATA_DIR=str(tmp_path / "data")
        )
        with trio.fail_after(20):
            served = await start_serve(nursery, env, tmp_path, args=["--log-format", "json", *args])
        client = openai.AsyncOpenAI(base_url=served.base_url, api_key="k", max_retries=0)
        async with client:
            yield Stack(served, client, allowed, forbidden, v6, redirector, forbidden_seen)
        nursery.cancel_scope.cancel()


async def test_the_allow_list_admits_only_what_it_lists(tmp_path: Path) -> None:
    async with serving(tmp_path) as stack:
        await check_bypasses(stack.client, stack.allowed, stack.forbidden, stack.v6)
        # A redirect to an origin nobody allowed is not followed.
        url = f"http://127.0.0.1:{stack.redirector}/mcp"
        (listing, *_) = (await listed(stack.client, url))["output"]
        assert listing["error"], listing
        assert not stack.forbidden_seen, stack.forbidden_seen


async def test_a_requests_secrets_are_its_own(tmp_path: Path) -> None:
    record = tmp_path / "recordings"
    async with serving(tmp_path, "--record", str(record)) as stack:
        client, allowed = stack.client, stack.allowed
        # The request's own secrets: a key in the URL's query, the headers
        # (one of them the path every Responses request has).
        theirs = {"X-Probe": PROBE, "X-Phrase": PHRASE}
        mine = await listed(
            client,
            f"http://127.0.0.1:{allowed}/mcp?access_token={QUERY_SECRET}",
            said=f"say {PHRASE}",
            request_id="with-secrets",
            headers=theirs,
        )
        # The same values but a path the server does not serve: the error
        # names the URL, its key redacted.
        failed = await listed(
            client,
            f"http://127.0.0.1:{allowed}/nowhere?access_token={QUERY_SECRET}",
            headers=theirs,
        )
        # Another request, without those values.
        await listed(
            client, f"http://127.0.0.1:{allowed}/mcp", said=f"say {PHRASE}", request_id="without"
        )
        async with httpx.AsyncClient(
            base_url=stack.served.base_url, headers={"Authorization": "Bearer k"}
        ) as http:
            stored = (await http.get(f"/responses/{mine['id']}")).text
        with trio.fail_after(5):
            await stack.served.wait_for('"request_id": "without"')
    served = stack.served
    assert access_line(served, "with-secrets")["path"] == "<redacted>"
    # The other request's line is its own: nothing it did not send is hidden.
    assert access_line(served, "without")["path"] == PROBE
    (echoed,) = mine["tools"]
    assert echoed["server_url"].endswith("access_token=<redacted>"), echoed
    assert echoed.get("headers") is None
    assert mine["output"][0]["error"] is None
    error = failed["output"][0]["error"]
    assert error and QUERY_SECRET not in error, error
    assert QUERY_SECRET not in stored and HEADER_SECRET not in stored
    assert QUERY_SECRET not in json.dumps(failed)
    log = "\n".join(served.output)
    assert HEADER_SECRET not in log and QUERY_SECRET not in log

    recordings = [path.read_text() for path in sorted(record.iterdir())]
    said = [user_text(json.loads(text)) for text in recordings]
    # Its own recording hides the values it sent; the other's shows them.
    assert sorted(text for text in said if text.startswith("say ")) == [
        "say <redacted>",
        f"say {PHRASE}",
    ], said
    assert all(HEADER_SECRET not in text and QUERY_SECRET not in text for text in recordings)


def user_text(document: dict[str, Any]) -> str:
    """What the user said last in a recorded turn."""
    users = [m for m in document["turn"]["messages"] if m["role"] == "user"]
    content = users[-1]["content"]
    return content if isinstance(content, str) else json.dumps(content)
