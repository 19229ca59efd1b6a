"""The request gate as pure decisions: Host, Origin, content type, preflights."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.server.edge.gate import (
    SDK_HEADERS,
    Allow,
    Answer,
    GateRequest,
    GateSettings,
    Refuse,
    decide,
    host_allowed,
    is_json,
    origin_allowed,
)

OPEN = GateSettings()  # no key, nothing configured: the loopback default
KEYED = GateSettings(key_required=True)
HOST = "127.0.0.1:8642"


def request(
    method: str = "GET", path: str = "/v1/models", **headers: str
) -> GateRequest:
    lower = {"host": HOST}
    lower.update({name.replace("_", "-").lower(): value for name, value in headers.items()})
    return GateRequest(method, path, {k: v for k, v in lower.items() if v is not None})


def post(content_type: str | None = "application/json", **headers: str) -> GateRequest:
    extra = {"content_length": "12", **headers}
    if content_type is not None:
        extra["content_type"] = content_type
    return request("POST", "/v1/chat/completions", **extra)


# --- Host --------------------------------------------------------------------

LOOPBACK = [
    "localhost", "LOCALHOST", "localhost.", "localhost:8642", "app.localhost",
    "127.0.0.1", "127.0.0.1:8642", "127.1.2.3:80", "[::1]", "[::1]:8642",
    "[::ffff:127.0.0.1]:8642",
]
FOREIGN = [
    "evil.example", "evil.example:8642", "127.0.0.1.evil.example", "localhost.evil.example",
    "localhostx", "10.0.0.1", "192.168.1.5:8642", "[::2]", "0.0.0.0:8642",
]
MALFORMED = ["a:b:c", "[::1", "[::1]x", "[nothost]", "host:port", ":8642", "user@localhost",
             "localhost/x"]


@pytest.mark.parametrize("host", LOOPBACK)
def test_loopback_hosts_pass_without_a_key(host: str) -> None:
    assert host_allowed(host, OPEN)


@pytest.mark.parametrize("host", FOREIGN + MALFORMED)
def test_other_hosts_are_refused_without_a_key(host: str) -> None:
    assert not host_allowed(host, OPEN)


def test_a_request_without_host_is_not_from_a_browser() -> None:
    assert host_allowed(None, OPEN) and host_allowed("", OPEN)


@pytest.mark.parametrize("host", FOREIGN)
def test_with_a_key_any_host_passes(host: str) -> None:
    assert host_allowed(host, KEYED)


@pytest.mark.parametrize("host", MALFORMED)
def test_with_a_key_a_malformed_host_is_still_refused(host: str) -> None:
    assert not host_allowed(host, KEYED)


@pytest.mark.parametrize("key", [False, True])
def test_allowed_hosts_list_names_ports_and_domains(key: bool) -> None:
    settings = GateSettings(
        key_required=key, allowed_hosts=("hermes.lan", "box:8642", ".example.com")
    )
    assert host_allowed("hermes.lan", settings)
    assert host_allowed("HERMES.LAN:1234", settings)
    assert host_allowed("box:8642", settings)
    assert not host_allowed("box:8643", settings)
    assert not host_allowed("box", settings)
    assert host_allowed("example.com", settings)
    assert host_allowed("api.example.com:443", settings)
    assert not host_allowed("badexample.com", settings)
    assert not host_allowed("other.lan", settings)  # the list wins over the key
    assert host_allowed("localhost:8642", settings)  # loopback always


def test_a_star_allows_any_host() -> None:
    assert host_allowed("anything.example:1", GateSettings(allowed_hosts=("*",)))


@given(
    st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,20}){1,3}", fullmatch=True),
    st.one_of(st.none(), st.integers(1, 65535)),
)
def test_no_dns_name_passes_a_keyless_server(name: str, port: int | None) -> None:
    # Whatever name a rebinding page uses, it is not a loopback name.
    if name.endswith(".localhost") or name == "localhost":
        return
    host = name if port is None else f"{name}:{port}"
    decision = decide(request(host=host), OPEN)
    assert isinstance(decision, Refuse) and decision.code == "host_not_allowed"


def test_the_host_refusal_names_the_host_and_the_setting() -> None:
    decision = decide(request(host="evil.example:8642"), OPEN)
    assert isinstance(decision, Refuse)
    assert decision.status == 403
    assert "'evil.example:8642'" in decision.message
    assert "api_server.allowed_hosts" in decision.message
    assert "API_SERVER_ALLOWED_HOSTS" in decision.message


# --- Origin ------------------------------------------------------------------

def test_same_origin_passes() -> None:
    assert origin_allowed("http://127.0.0.1:8642", HOST, OPEN)
    assert origin_allowed("http://localhost:8642", "localhost:8642", OPEN)
    assert origin_allowed("http://[::1]:8642", "[::1]:8642", OPEN)
    # Behind a TLS proxy: the page is https, the Host the same name.
    assert origin_allowed("https://chat.example.com", "chat.example.com", OPEN)


@pytest.mark.parametrize(
    "origin",
    ["http://127.0.0.1:8643", "http://localhost:8642", "http://evil.example", "null",
     "file://", "http://127.0.0.1", "garbage"],
)
def test_other_origins_are_foreign(origin: str) -> None:
    assert not origin_allowed(origin, HOST, OPEN)


def test_configured_origins_are_normalised() -> None:
    settings = GateSettings.of(
        key=None, allowed_hosts=(), cors_origins=["HTTP://UI.test:3000/", "https://a.example:443"]
    )
    assert origin_allowed("http://ui.test:3000", HOST, settings)
    assert origin_allowed("https://a.example", HOST, settings)
    assert not origin_allowed("http://ui.test:3001", HOST, settings)
    assert not origin_allowed("null", HOST, settings)


def test_a_star_allows_any_origin_even_null() -> None:
    settings = GateSettings(cors_origins=("*",))
    assert origin_allowed("null", HOST, settings)
    assert origin_allowed("http://evil.example", HOST, settings)


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE", "OPTIONS", "PUT", "HEAD"])
@pytest.mark.parametrize("path", ["/v1/models", "/v1/chat/completions", "/v1/responses/x",
                                  "/nowhere", "/"])
def test_a_foreign_origin_is_refused_for_every_method_and_path(method: str, path: str) -> None:
    decision = decide(request(method, path, origin="http://evil.example"), OPEN)
    assert isinstance(decision, Refuse)
    assert (decision.status, decision.code) == (403, "origin_not_allowed")
    assert "http://evil.example" in decision.message
    assert "api_server.cors_origins" in decision.message


@given(st.sampled_from(["GET", "POST", "OPTIONS", "DELETE"]), st.text(max_size=30))
def test_health_passes_whatever_the_headers(method: str, junk: str) -> None:
    decision = decide(request(method, "/health", origin=junk or "null", host="evil.example"),
                      OPEN)
    assert decision == Allow()


def test_allowed_cross_origin_requests_carry_cors_headers() -> None:
    settings = GateSettings(cors_origins=("http://ui.test",))
    decision = decide(request(origin="http://ui.test"), settings)
    assert isinstance(decision, Allow)
    assert decision.cors["Access-Control-Allow-Origin"] == "http://ui.test"
    exposed = decision.cors["Access-Control-Expose-Headers"]
    assert exposed == "Retry-After, X-Session-ID, X-Request-ID"
    assert decision.cors["Vary"] == "Origin"
    # Same-origin and origin-less requests need none.
    assert decide(request(origin="http://127.0.0.1:8642"), settings) == Allow()
    assert decide(request(), settings) == Allow()


# --- Content type ------------------------------------------------------------

@pytest.mark.parametrize(
    "content_type",
    ["application/json", "Application/JSON", "application/json; charset=utf-8",
     "application/json;charset=UTF-8", "application/vnd.api+json", " application/json "],
)
def test_json_content_types_pass(content_type: str) -> None:
    assert is_json(content_type)
    assert decide(post(content_type), OPEN) == Allow()


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
     "multipart/form-data; boundary=x", "application/jsonx", "text/json", "", "json"],
)
def test_other_content_types_are_415(content_type: str) -> None:
    decision = decide(post(content_type), OPEN)
    assert isinstance(decision, Refuse)
    assert (decision.status, decision.code) == (415, "unsupported_media_type")
    assert "Content-Type: application/json" in decision.message
    assert repr(content_type) in decision.message


def test_a_body_without_content_type_is_415() -> None:
    decision = decide(post(None), OPEN)
    assert isinstance(decision, Refuse) and decision.status == 415
    assert "no Content-Type" in decision.message


def test_requests_without_a_body_need_no_content_type() -> None:
    assert decide(request("GET"), OPEN) == Allow()
    assert decide(request("DELETE", "/v1/responses/x"), OPEN) == Allow()
    assert decide(request("POST", "/v1/responses/x/cancel", content_length="0"), OPEN) == Allow()
    chunked = request("POST", "/v1/chat/completions", transfer_encoding="chunked",
                      content_type="text/plain")
    assert isinstance(decide(chunked, OPEN), Refuse)


def test_checks_run_host_then_origin_then_content_type() -> None:
    everything_wrong = post("text/plain", host="evil.example", origin="http://evil.example")
    assert decide(everything_wrong, OPEN).code == "host_not_allowed"  # type: ignore[union-attr]
    origin_and_type = post("text/plain", origin="http://evil.example")
    assert decide(origin_and_type, OPEN).code == "origin_not_allowed"  # type: ignore[union-attr]


# --- Preflights --------------------------------------------------------------

UI = GateSettings(cors_origins=("http://localhost:5173",))
FIREFOX = (
    "authorization,content-type,user-agent,x-stainless-arch,x-stainless-lang,x-stainless-os,"
    "x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime,"
    "x-stainless-runtime-version,x-stainless-timeout"
)


def preflight(headers: str | None = FIREFOX, **extra: str) -> GateRequest:
    more = dict(extra)
    if headers is not None:
        more["access_control_request_headers"] = headers
    return request("OPTIONS", "/v1/chat/completions", origin="http://localhost:5173",
                   access_control_request_method="POST", **more)


def test_firefox_preflight_allows_every_listed_header() -> None:
    decision = decide(preflight(), UI)
    assert isinstance(decision, Answer) and decision.status == 204
    allowed = decision.headers["Access-Control-Allow-Headers"].split(", ")
    assert set(FIREFOX.split(",")) <= set(allowed)
    assert decision.headers["Access-Control-Allow-Origin"] == "http://localhost:5173"
    assert "POST" in decision.headers["Access-Control-Allow-Methods"]
    assert "Origin" in decision.headers["Vary"]


@given(st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,15}", fullmatch=True), max_size=8))
def test_any_header_a_client_asks_for_is_allowed(names: list[str]) -> None:
    decision = decide(preflight(", ".join(names)), UI)
    assert isinstance(decision, Answer)
    allowed = decision.headers["Access-Control-Allow-Headers"].split(", ")
    assert set(names) <= set(allowed)
    assert set(SDK_HEADERS) <= set(allowed)
    assert len(allowed) == len(set(allowed))


def test_a_malformed_header_name_in_a_preflight_is_400() -> None:
    decision = decide(preflight("authorization,bad header"), UI)
    assert isinstance(decision, Refuse) and decision.status == 400
    assert "'bad header'" in decision.message


def test_a_preflight_for_a_foreign_origin_is_403() -> None:
    decision = decide(preflight(), OPEN)
    assert isinstance(decision, Refuse) and decision.status == 403


def test_private_network_access_is_granted_to_allowed_origins() -> None:
    decision = decide(preflight(access_control_request_private_network="true"), UI)
    assert isinstance(decision, Answer)
    assert decision.headers["Access-Control-Allow-Private-Network"] == "true"
    assert "Access-Control-Allow-Private-Network" not in decide(preflight(), UI).headers  # type: ignore[union-attr]


def test_a_plain_options_request_lists_the_methods() -> None:
    decision = decide(request("OPTIONS", "/v1/models"), OPEN)
    assert decision == Answer(204, {"Allow": "GET, POST, DELETE, OPTIONS"})
