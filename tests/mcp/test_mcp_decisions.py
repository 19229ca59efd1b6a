"""The pure side of MCP servers: names, filters, approval policy, result
text, restart backoff, config checks, and the registry's tool groups."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.config import ConfigError, load_config
from hermes_trio.events import ToolProgress
from hermes_trio.mcp.connection import RESTART_MAX, STABLE_UPTIME, restart_delay
from hermes_trio.mcp.naming import (
    input_schema,
    model_name,
    needs_approval,
    result_text,
    split_name,
    wanted,
)
from hermes_trio.redaction import redact
from hermes_trio.retry import Backoff
from hermes_trio.server.parsing.errors import APIError
from hermes_trio.server.responses.request import parse_responses_request
from hermes_trio.tools import ToolContext, ToolRegistry, ToolResult
from hermes_trio.wire.tool_events import tool_event

labels = st.from_regex(r"[A-Za-z0-9-]{1,10}(_[A-Za-z0-9-]{1,5})?", fullmatch=True)


@given(labels, st.text(min_size=1, max_size=100))
def test_model_names_are_valid_function_names_and_split_back(label: str, tool: str) -> None:
    name = model_name(label, tool)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name)
    parts = split_name(name)
    assert parts is not None and parts[0] == label


def test_model_name_examples() -> None:
    assert model_name("time", "get_current_time") == "time__get_current_time"
    assert (
        model_name("ev", "trigger-long-running-operation") == "ev__trigger-long-running-operation"
    )
    assert model_name("fs", "read.file v2") == "fs__read_file_v2"
    assert split_name("terminal") is None


def test_allow_and_exclude_lists() -> None:
    assert wanted("a", None, [])
    assert not wanted("a", ["b"], [])
    assert wanted("b", ["b"], [])
    assert not wanted("b", ["b"], ["b"])
    assert not wanted("c", None, ["c"])


@pytest.mark.parametrize(
    ("policy", "read_only", "asks"),
    [
        ("always", True, True),
        ("never", False, False),
        ("never", None, False),
        ("auto", True, False),
        ("auto", False, True),
        ("auto", None, True),
    ],
)
def test_approval_policy(policy: str, read_only: bool | None, asks: bool) -> None:
    assert needs_approval(policy, read_only) is asks  # type: ignore[arg-type]


def test_schemas_are_objects_and_results_read_as_text() -> None:
    assert input_schema(None) == {"type": "object", "properties": {}}
    assert input_schema({"type": "object"}) == {"type": "object", "properties": {}}
    blocks = [
        {"type": "text", "text": "one"},
        {"type": "image", "mimeType": "image/png", "data": "..."},
        {"type": "resource", "resource": {"uri": "file:///x", "text": "inside"}},
    ]
    assert result_text(blocks) == "one\n[image content, image/png]\ninside"
    assert result_text([], {"n": 1}) == '{"n": 1}'


def test_restarts_back_off_to_a_cap_and_start_over_after_a_good_run() -> None:
    backoff = Backoff(1.0, RESTART_MAX)
    delays = [restart_delay(backoff, None) for _ in range(8)]
    assert delays == [1, 2, 4, 8, 16, 32, 60, 60]
    assert restart_delay(backoff, STABLE_UPTIME - 1) == 60
    assert restart_delay(backoff, STABLE_UPTIME) == 1


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ({"a__b": {"command": "x"}}, "mcp_servers.a__b: a label is"),
        ({"a": {}}, "mcp_servers.a: expected either command"),
        ({"a": {"command": "x", "url": "http://h"}}, "mcp_servers.a: expected either command"),
        ({"a": {"url": "ftp://h"}}, "mcp_servers.a.url: expected an http"),
        ({"a": {"command": "x", "timeout": 0}}, "mcp_servers.a.timeout: expected"),
        ({"a": {"command": "x", "require_approval": "maybe"}}, "mcp_servers.a.require_approval"),
        ({"a": {"command": "x", "env": {"K": 1}}}, "mcp_servers.a.env.K: expected a string"),
        ({"a": {"command": "x", "bogus": 1}}, "mcp_servers.a.bogus: unknown key"),
    ],
)
def test_bad_server_config_names_the_key(servers: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(overrides={"mcp_servers": servers}, env={})


def test_allowed_urls_must_be_http() -> None:
    with pytest.raises(ConfigError, match=r"api_server.mcp_allowed_urls\[0\]"):
        load_config(overrides={"api_server": {"mcp_allowed_urls": ["file:///"]}}, env={})


class Named:
    def __init__(self, name: str) -> None:
        self.name = name
        self.description = ""
        self.parameters: dict[str, object] = {"type": "object", "properties": {}}

    def preview(self, args: dict[str, object]) -> str:
        return self.name

    async def run(self, args: dict[str, object], ctx: ToolContext) -> ToolResult:
        return ToolResult(True, self.name)


async def test_registry_groups_replace_and_never_shadow() -> None:
    registry = ToolRegistry([Named("terminal")])
    registry.set_group("mcp:a", [Named("a__x"), Named("terminal")])
    assert registry.names() == ["terminal", "a__x"]
    registry.set_group("mcp:a", [Named("a__y")])
    assert registry.names() == ["terminal", "a__y"]
    assert [s["function"]["name"] for s in registry.schemas()] == ["terminal", "a__y"]
    registry.add_resolver(lambda name: Named(name) if name.startswith("z__") else None)
    assert (await registry.execute("z__q", "{}", ToolContext())).content == "z__q"
    assert "unknown tool" in (await registry.execute("q", "{}", ToolContext())).content


def test_progress_is_an_opt_in_sse_tool_event() -> None:
    event = ToolProgress("ev__slow", 2, 3, 10, "copying", "call_1")
    assert tool_event(event) == (
        "hermes.tool.progress",
        {"tool": "ev__slow", "index": 2, "progress": 3, "total": 10, "message": "copying"},
    )
    assert event.describe() == "3/10 copying"
    assert ToolProgress("t", 0, 0.5).describe() == "0.5"


ALLOWED = ("https://mcp.example.com/",)


def mcp_body(**tool: object) -> dict[str, object]:
    base = {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example.com/x"}
    return {"model": "m", "input": "hi", "tools": [{**base, **tool}]}


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"server_url": "https://evil.example.com/x"}, "tools[0].server_url"),
        ({"server_url": "ftp://mcp.example.com/x"}, "tools[0].server_url"),
        ({"connector_id": "connector_gmail"}, "tools[0].connector_id"),
        ({"authorization": "tok"}, "tools[0].authorization"),
        ({"server_label": "a__b"}, "tools[0].server_label"),
        ({"headers": {"X": 1}}, "tools[0].headers"),
        ({"allowed_tools": "all"}, "tools[0].allowed_tools"),
        ({"require_approval": "sometimes"}, "tools[0].require_approval"),
        ({"tunnel_id": "t"}, "tools[0].tunnel_id"),
    ],
)
def test_a_bad_mcp_tool_is_a_400_naming_the_field(tool: dict[str, object], param: str) -> None:
    with pytest.raises(APIError) as refused:
        parse_responses_request(mcp_body(**tool), mcp_allowed_urls=ALLOWED)
    assert refused.value.status == 400 and refused.value.param == param


def test_no_url_is_allowed_by_default() -> None:
    with pytest.raises(APIError, match="none are configured"):
        parse_responses_request(mcp_body())


def test_an_mcp_tool_is_parsed_and_echoed_without_its_headers() -> None:
    req = parse_responses_request(
        mcp_body(
            headers={"Authorization": "Bearer very-secret-token"},
            allowed_tools={"tool_names": ["search"], "read_only": True},
            require_approval={"never": {"tool_names": ["search"]}},
        ),
        mcp_allowed_urls=ALLOWED,
    )
    (tool,) = req.mcp
    assert tool.headers == {"Authorization": "Bearer very-secret-token"}
    assert tool.allowed == ("search",) and tool.read_only_only
    assert not tool.needs_approval("search") and tool.needs_approval("fetch")
    assert req.tools == []
    (echoed,) = req.echo["tools"]
    assert "headers" not in echoed and "very-secret-token" not in str(echoed)
    assert echoed["require_approval"] == {"never": {"tool_names": ["search"]}}
    assert "very-secret-token" not in redact("sent Bearer very-secret-token")
