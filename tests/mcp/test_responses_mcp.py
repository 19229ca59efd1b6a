"""The Responses API's request-level ``mcp`` tool, against the real
``hermes-trio serve`` with the official openai SDK, a streamable-HTTP MCP
server on loopback (the SDK's ``MCPServer``, tests/mcp/http_server.py) and
the scripted model server — one serve process for everything:

- a configured server that exits at once and one that hangs on start:
  serve starts anyway and says so in one line each;
- an ``mcp`` tool on an allowed URL: ``mcp_list_tools`` then ``mcp_call``
  with the tool's output, streamed and not, every object valid against
  OpenAI's spec, events in OpenAI's order; the headers reach the server
  but are never echoed, stored or logged;
- a follow-up with ``previous_response_id`` lists the tools no more;
- a URL outside ``api_server.mcp_allowed_urls`` and ``connector_id``: 400.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import trio
from http_server import open_http_mcp_server
from openai_spec import assert_valid
from support import clean_env, start_serve

from hermes_trio.testing import TextReply, ToolCallReply, open_scripted_server
from tests.wire.test_wire_request_mcp import MCP_CALL_EVENTS

SECRET = "Bearer mcp-secret-0123456789"


def config_yaml(url: str) -> str:
    return f"""
api_server:
  mcp_allowed_urls: ["{url.rsplit("/", 1)[0]}/"]
mcp_servers:
  gone: {{command: "false", timeout: 2}}
  stuck: {{command: {sys.executable}, args: [-c, "import time; time.sleep(600)"], timeout: 2}}
"""


def mcp_tool(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "mcp",
        "server_label": "web",
        "server_url": url,
        "headers": {"Authorization": SECRET},
        "require_approval": "never",
        **extra,
    }


def call_add(a: int, b: int, answer: str) -> list[Any]:
    return [ToolCallReply([("web__add", {"a": a, "b": b})]), TextReply(answer)]


def check_output(output: list[dict[str, Any]], *, listed: bool, a: int, b: int) -> None:
    kinds = [item["type"] for item in output]
    assert kinds == (["mcp_list_tools"] if listed else []) + ["mcp_call", "message"]
    if listed:
        listing = output[0]
        assert_valid(listing, "MCPListTools")
        assert listing["server_label"] == "web"
        assert {t["name"] for t in listing["tools"]} == {"add", "grow", "shout", "slow"}
    call = output[-2]
    assert_valid(call, "MCPToolCall")
    assert call["server_label"] == "web" and call["name"] == "add"
    assert json.loads(call["arguments"]) == {"a": a, "b": b}
    assert call["output"] == f"{a} + {b} = {a + b}" and call["error"] is None
    assert call["status"] == "completed"


async def test_the_mcp_tool_on_the_real_server(tmp_path: Path) -> None:
    script = [
        *call_add(2, 3, "Five."),
        *call_add(4, 4, "Eight."),
        *call_add(1, 2, "Three."),
        ToolCallReply([("web__shout", {"text": "hi"})]),
        TextReply("Shouted."),
    ]
    async with (
        open_http_mcp_server() as (url, calls),
        open_scripted_server(script) as model,
        trio.open_nursery() as nursery,
    ):
        (tmp_path / "config.yaml").write_text(config_yaml(url))
        env = clean_env(
            HERMES_MODEL_BASE_URL=model.base_url, HERMES_DATA_DIR=str(tmp_path / "data")
        )
        with trio.fail_after(20):
            served = await start_serve(nursery, env, tmp_path)
        said = [line for line in served.output if "mcp server" in line]
        assert any("'gone' is down" in line for line in said), served.output
        assert any("'stuck' is down" in line and "within 2 s" in line for line in said)

        client = openai.AsyncOpenAI(base_url=served.base_url, api_key="k", max_retries=0)
        async with client:
            with trio.fail_after(30):
                first = await client.responses.create(
                    model="m",
                    input="2+3?",
                    tools=[mcp_tool(url)],  # type: ignore[list-item]
                )
            raw = first.model_dump(mode="json")
            check_output(raw["output"], listed=True, a=2, b=3)
            assert first.output_text == "Five."
            (echoed,) = raw["tools"]
            assert echoed["type"] == "mcp" and echoed.get("headers") is None
            # The model saw the server's tools by the naming rule.
            sent = [t["function"]["name"] for t in model.model_requests[0].json["tools"]]
            assert {"web__add", "web__shout", "web__slow"} <= set(sent)

            # Streamed, as a follow-up: no second listing.
            events: list[dict[str, Any]] = []
            with trio.fail_after(30):
                stream = await client.responses.create(
                    model="m",
                    input="4+4?",
                    tools=[mcp_tool(url)],  # type: ignore[list-item]
                    previous_response_id=first.id,
                    stream=True,
                )
                async for event in stream:
                    events.append(event.model_dump(mode="json"))
            mcp_events = [
                e["type"] for e in events if "mcp" in e["type"] or "output_item" in e["type"]
            ]
            assert mcp_events[:6] == MCP_CALL_EVENTS
            final = events[-1]["response"]
            check_output(final["output"], listed=False, a=4, b=4)

            # A new conversation, streamed: the listing's own events come first.
            with trio.fail_after(30):
                stream = await client.responses.create(
                    model="m",
                    input="1+2?",
                    tools=[mcp_tool(url)],
                    stream=True,  # type: ignore[list-item]
                )
                kinds = [event.type async for event in stream]
            assert kinds[2:6] == [
                "response.output_item.added",
                "response.mcp_list_tools.in_progress",
                "response.mcp_list_tools.completed",
                "response.output_item.done",
            ]

            # Refused before anything runs.
            for tool, param in [
                (mcp_tool("http://127.0.0.1:1/elsewhere"), "tools[0].server_url"),
                (mcp_tool(url, connector_id="connector_gmail"), "tools[0].connector_id"),
            ]:
                with pytest.raises(openai.BadRequestError) as refused:
                    await client.responses.create(model="m", input="x", tools=[tool])  # type: ignore[list-item]
                assert refused.value.status_code == 400
                assert refused.value.param == param

            # require_approval "always": the call waits for the client's yes.
            asking = mcp_tool(url, require_approval="always")
            with trio.fail_after(30):
                held = await client.responses.create(model="m", input="shout", tools=[asking])  # type: ignore[list-item]
            request = held.output[-1].model_dump(mode="json")
            assert request["type"] == "mcp_approval_request"
            assert request["server_label"] == "web" and request["name"] == "shout"
            assert [i.type for i in held.output] == ["mcp_list_tools", "mcp_approval_request"]
            with trio.fail_after(30):
                ran = await client.responses.create(
                    model="m",
                    previous_response_id=held.id,
                    tools=[asking],  # type: ignore[list-item]
                    input=[
                        {
                            "type": "mcp_approval_response",
                            "approval_request_id": request["id"],
                            "approve": True,
                        }
                    ],  # type: ignore[list-item]
                )
            call = ran.output[0].model_dump(mode="json")
            assert call["type"] == "mcp_call" and call["output"] == "HI!"
            assert call["server_label"] == "web" and call["name"] == "shout"
            assert call["approval_request_id"] == request["id"]
            assert ran.output_text == "Shouted."

            # The server's own JSON (the SDK's models add nulls of their
            # own), stored and replayed, against OpenAI's schemas.
            async with httpx.AsyncClient(
                base_url=served.base_url, headers={"Authorization": "Bearer k"}
            ) as http:
                stored = (await http.get(f"/responses/{first.id}")).text
                assert_valid(json.loads(stored), "Response")
                held_raw = (await http.get(f"/responses/{held.id}")).json()
                assert_valid(held_raw["output"][-1], "MCPApprovalRequest")
                ran_raw = (await http.get(f"/responses/{ran.id}")).json()
                assert_valid(ran_raw, "Response")
                assert_valid(ran_raw["output"][0], "MCPToolCall")
                second = events[-1]["response"]["id"]
                replay = (await http.get(f"/responses/{second}", params={"stream": "true"})).text
        frames = [json.loads(line[6:]) for line in replay.splitlines() if line.startswith("data: ")]
        assert [f["type"] for f in frames] == [e["type"] for e in events]
        for frame in frames:
            assert_valid(frame, "ResponseStreamEvent")
            if frame["type"].startswith("response.output_item"):
                assert_valid(
                    frame["item"],
                    "MCPToolCall" if frame["item"]["type"] == "mcp_call" else "OutputItem",
                )
        assert SECRET not in stored
        assert SECRET not in "\n".join(served.output)
        # The request's headers reached the MCP server.
        assert calls.headers == [SECRET] * 3
        nursery.cancel_scope.cancel()
