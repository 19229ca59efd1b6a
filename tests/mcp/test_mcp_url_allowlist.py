"""``api_server.mcp_allowed_urls`` as parsed URLs, not string prefixes
(:mod:`hermes_trio.url_allowlist`, pure), through the request parser and
the config check, and as properties: whatever URL the check admits, two
other parsers (httpx, urllib) read its scheme, host and port the same and
an allowed entry admits it."""

from __future__ import annotations

import ipaddress
import urllib.parse

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.config import ConfigError, load_config
from hermes_trio.server.parsing.errors import APIError
from hermes_trio.server.responses.request import parse_responses_request
from hermes_trio.url_allowlist import UrlRefused, check_url, parse_prefix

ALLOWED = ("http://127.0.0.1:19000", "http://127.0.0.1:1910", "https://MCP.example.com/tools")


def body(url: str) -> dict[str, object]:
    tool = {"type": "mcp", "server_label": "x", "server_url": url}
    return {"model": "m", "input": "hi", "tools": [tool]}


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:19000@127.0.0.1:19100/mcp",
        "http://127.0.0.1:19000\\@127.0.0.1:19100/mcp",
        "http://127.0.0.1:19000 @127.0.0.1:19100/mcp",
        "http://127.0.0.1:19000%40127.0.0.1:19100/mcp",
        "http://127.0.0.1:19100/mcp",
        "http://127.0.0.1/mcp",
        "https://mcp.example.com/toolsx",
        "https://mcp.example.com/tools/../admin",
        "https://mcp.example.com/tools/%2e%2e/admin",
        "https://mcp.example.com/tools/a%2fb",
        "https://mcp.example.com./tools/",
        "https://mcp.example.co%6d/tools/",
        "http://mcp.example.com/tools/",
        "https://mcp.example.com:8443/tools/",
        "https://mcp.example.com/tools/x#frag",
        "http://[::ffff:127.0.0.1]:19000/",
        "http://2130706433:19000/",
        "http://127.0.0.1:19000/\u00e9",
        "http://127.0.0.1:19000/a\tb",
    ],
)
def test_what_a_string_prefix_let_through_is_a_400(url: str) -> None:
    with pytest.raises(APIError) as refused:
        parse_responses_request(body(url), mcp_allowed_urls=ALLOWED)
    assert refused.value.status == 400 and refused.value.param == "tools[0].server_url"


@pytest.mark.parametrize(
    ("url", "connected"),
    [
        ("http://127.0.0.1:19000/mcp", "http://127.0.0.1:19000/mcp"),
        ("HTTP://127.0.0.1:19000", "http://127.0.0.1:19000"),
        ("https://mcp.example.com:443/tools", "https://mcp.example.com/tools"),
        ("https://MCP.Example.COM/tools/x?token=t", "https://mcp.example.com/tools/x?token=t"),
    ],
)
def test_the_same_url_written_otherwise_is_admitted_as_written_out(
    url: str, connected: str
) -> None:
    (tool,) = parse_responses_request(body(url), mcp_allowed_urls=ALLOWED).mcp
    assert tool.url == connected


def test_default_ports_and_ipv6_literals_compare_as_addresses() -> None:
    prefixes = [parse_prefix("http://[::1]:80/"), parse_prefix("https://h.example")]
    assert check_url("http://[0:0:0:0:0:0:0:1]/mcp", prefixes).host == "::1"
    assert check_url("https://h.example:443/x", prefixes).port == 443
    with pytest.raises(UrlRefused):
        check_url("http://[::2]/mcp", prefixes)


def test_a_path_prefix_ends_at_a_slash() -> None:
    prefix = parse_prefix("http://h/mcp")
    assert prefix.admits(check_url("http://h/mcp", [prefix]))
    assert prefix.admits(check_url("http://h/mcp/x", [prefix]))
    with pytest.raises(UrlRefused):
        check_url("http://h/mcpx", [prefix])


def test_the_echo_hides_a_credential_in_the_query() -> None:
    req = parse_responses_request(
        body("http://127.0.0.1:19000/mcp?api_key=query-secret-0123456789&v=2"),
        mcp_allowed_urls=ALLOWED,
    )
    (echoed,) = req.echo["tools"]
    assert echoed["server_url"] == "http://127.0.0.1:19000/mcp?api_key=<redacted>&v=2"
    assert req.mcp[0].url.endswith("api_key=query-secret-0123456789&v=2")


@pytest.mark.parametrize(
    "entry",
    [
        "http://u:p@h/",
        "http://h/?a=1",
        "http://h/#f",
        "ftp://h/",
        "http://h:1910@x",
        "https://mcp.",
    ],
)
def test_an_allowed_entry_is_a_url_or_a_config_error_naming_it(entry: str) -> None:
    with pytest.raises(ConfigError, match=r"^api_server\.mcp_allowed_urls\[1\]: "):
        load_config(overrides={"api_server": {"mcp_allowed_urls": ["http://ok/", entry]}}, env={})


# Properties: URLs built from pieces a client might send, many of them odd.
_hosts = st.sampled_from(
    [
        "127.0.0.1",
        "localhost",
        "LocalHost",
        "[::1]",
        "[0:0::1]",
        "h.example",
        "h.example.",
        "127.0.0.1:19000@h.example",
        "h%2eexample",
        "[::ffff:127.0.0.1]",
        "xn--bcher-kva.example",
    ]
)
_ports = st.sampled_from(["", ":80", ":443", ":19000", ":1910", ":019000", ":0", ":99999", ":"])
_paths = st.lists(
    st.sampled_from(["mcp", "x", "..", ".", "%2e", "%2F", "a%20b", "@", "\\", "", "m%63p", "?q=1"]),
    max_size=4,
).map(lambda parts: "/" + "/".join(parts) if parts else "")


def _default(scheme: str, port: int | None) -> int:
    return port if port is not None else {"http": 80, "https": 443}[scheme]


def _ip_or_name(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host.lower()


@given(st.sampled_from(["http", "https", "HTTP"]), _hosts, _ports, _paths)
def test_what_is_admitted_every_parser_reads_alike(
    scheme: str, host: str, port: str, path: str
) -> None:
    text = f"{scheme}://{host}{port}{path}"
    prefixes = [
        parse_prefix(p)
        for p in (
            "http://127.0.0.1:19000",
            "https://h.example/mcp",
            "http://[::1]",
            "http://localhost/",
        )
    ]
    try:
        checked = check_url(text, prefixes)
    except UrlRefused:
        return
    for written in (text, checked.url):
        other = httpx.URL(written)
        assert (other.scheme, _ip_or_name(other.host), _default(other.scheme, other.port)) == (
            checked.scheme,
            checked.host,
            checked.port,
        )
        split = urllib.parse.urlsplit(written)
        assert split.username is None and "@" not in split.netloc
        assert (split.scheme.lower(), _ip_or_name(split.hostname or "")) == (
            checked.scheme,
            checked.host,
        )
        assert _default(split.scheme.lower(), split.port) == checked.port
    assert any(prefix.admits(checked) for prefix in prefixes)
    assert ".." not in checked.path.split("/")
