"""The request gate: which requests reach a route at all, decided from the
request's method, path and headers and the server's settings alone.

A server on loopback without a key is still reachable from every web page
its user opens. Browsers send some cross-origin requests without asking
first (a ``POST`` with ``Content-Type: text/plain``), and DNS rebinding lets a
page on a name it controls talk to 127.0.0.1 as if same-origin. So every
request passes three checks before auth and routing:

- **Host** names a loopback host (``localhost``, ``*.localhost``, 127.x,
  ``[::1]``) or one in ``allowed_hosts``; with an API key and no
  ``allowed_hosts``, any host. A rebinding page's requests carry its own
  name, never a loopback one.
- **Origin**, when a browser sends one, is the server's own origin or one in
  ``cors_origins``; ``Origin: null`` (sandboxed frames, local files) is
  foreign. Every method, not only preflights.
- **Content type**: a request with a body must say JSON, which a page can
  only send cross-origin after a preflight.

``/health`` passes all three: it tells nobody anything and probes rarely know
which name they use. A ``Host`` that is not a well-formed name or address
is refused on every path, ``/health`` too: nothing behind the gate has to
cope with one. CORS preflights are answered here too, and a refusal carries
the CORS headers of an origin ``cors_origins`` lists, so its page can read
why.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

__all__ = [
    "EXPOSED_HEADERS",
    "SDK_HEADERS",
    "Allow",
    "Answer",
    "GateRequest",
    "GateSettings",
    "Refuse",
    "content_type_refusal",
    "decide",
    "host_allowed",
    "is_json",
    "is_loopback",
    "origin_allowed",
]

# What the official SDKs send on every request: always allowed in a
# preflight answer, so one cached preflight covers a client's later requests.
SDK_HEADERS = (
    "authorization",
    "content-type",
    "user-agent",
    "x-session-id",
    "x-hermes-stream-extensions",
    "openai-organization",
    "openai-project",
    "openai-beta",
    "x-stainless-arch",
    "x-stainless-async",
    "x-stainless-helper-method",
    "x-stainless-lang",
    "x-stainless-os",
    "x-stainless-package-version",
    "x-stainless-retry-count",
    "x-stainless-runtime",
    "x-stainless-runtime-version",
    "x-stainless-timeout",
    "x-stainless-poll-helper",
    "x-stainless-custom-poll-interval",
)
# Response headers a page's script may read.
EXPOSED_HEADERS = "Retry-After, X-Session-ID, X-Request-ID"
METHODS = "GET, POST, DELETE, OPTIONS"
HEALTH = "/health"

# RFC 9110 token: what a header name may be.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# One label of a host name as DNS (and the IDNA codec the app's routing
# applies to it) takes it: 1-63 letters, digits, hyphens or underscores.
_LABEL = re.compile(r"[a-z0-9_-]{1,63}")
_MAX_NAME = 253
_DEFAULT_PORTS = {"http": "80", "https": "443"}


@dataclass(frozen=True)
class GateSettings:
    key_required: bool = False
    allowed_hosts: tuple[str, ...] = ()
    cors_origins: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, *, key: str | None, allowed_hosts: Iterable[str], cors_origins: Iterable[str]
    ) -> GateSettings:
        return cls(
            key_required=bool(key),
            allowed_hosts=tuple(h.strip().lower() for h in allowed_hosts),
            cors_origins=tuple(_normal_origin(o) for o in cors_origins),
        )


@dataclass(frozen=True)
class GateRequest:
    method: str
    path: str
    headers: Mapping[str, str]
    """Header names in lower case."""

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    @property
    def has_body(self) -> bool:
        if "transfer-encoding" in self.headers:
            return True
        length = self.headers.get("content-length", "").strip()
        # A malformed length is the HTTP layer's to refuse; count it as a body.
        return bool(length) and length != "0"


@dataclass(frozen=True)
class Allow:
    """Go on to auth and the route; ``cors`` goes on the response."""

    cors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Answer:
    """Answer here, without running a route (preflights, plain OPTIONS)."""

    status: int
    headers: dict[str, str]


@dataclass(frozen=True)
class Refuse:
    status: int
    message: str
    code: str
    param: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    """CORS headers, when the request's page may read the refusal."""


Decision = Allow | Answer | Refuse


def decide(request: GateRequest, settings: GateSettings) -> Decision:
    host = request.header("host")
    origin = request.header("origin")
    # What a refusal may show the page that asked, if its origin is listed.
    cors = _cors(origin, settings)
    if host is not None and _split_host(host) is None:
        return Refuse(
            400,
            f"malformed Host header '{_shown(host)}': expected a host name or address "
            "with an optional port",
            "invalid_host",
            param="Host",
            headers=cors,
        )
    if request.path == HEALTH:
        return Allow()
    if not host_allowed(host, settings):
        return replace(_host_refusal(host or "", settings), headers=cors)
    if origin is not None and not origin_allowed(origin, host, settings):
        return Refuse(
            403,
            f"origin '{_shown(origin)}' is not allowed: web pages may call this server only "
            "from its own origin or one listed in api_server.cors_origins "
            "(API_SERVER_CORS_ORIGINS)",
            "origin_not_allowed",
        )
    if request.method == "OPTIONS":
        return _options(request, origin)
    if request.has_body:
        refusal = content_type_refusal(request.header("content-type"))
        if refusal is not None:
            return replace(refusal, headers=cors)
    return Allow(cors)


def content_type_refusal(content_type: str | None) -> Refuse | None:
    """The 415 for a request body of ``content_type``; None when it is JSON."""
    if content_type is not None and is_json(content_type):
        return None
    what = "no Content-Type" if content_type is None else f"Content-Type '{_shown(content_type)}'"
    return Refuse(
        415,
        f"unsupported media type: the request body has {what}; "
        "send JSON with 'Content-Type: application/json'",
        "unsupported_media_type",
        param="Content-Type",
    )


def _shown(value: str, limit: int = 100) -> str:
    """A header value as a message quotes it: never more than ``limit`` characters."""
    return value if len(value) <= limit else value[:limit] + "…"


def host_allowed(host: str | None, settings: GateSettings) -> bool:
    """Whether a request addressed to ``host`` (the Host header) may pass."""
    if not host:
        # Every browser sends Host; a request without one is from a program
        # that could have sent any Host it liked.
        return True
    parsed = _split_host(host)
    if parsed is None:
        return False
    name, port = parsed
    if is_loopback(name):
        return True
    if not settings.allowed_hosts:
        return settings.key_required
    return any(_host_matches(entry, name, port) for entry in settings.allowed_hosts)


def origin_allowed(origin: str, host: str | None, settings: GateSettings) -> bool:
    """Whether a page at ``origin`` may call a server addressed as ``host``."""
    if "*" in settings.cors_origins:
        return True
    if origin == "null":
        return False
    normal = _normal_origin(origin)
    if normal in settings.cors_origins:
        return True
    return host is not None and _same_origin(normal, host)


def is_json(content_type: str) -> bool:
    """``application/json`` or ``application/<anything>+json``, any parameters."""
    media = content_type.split(";", 1)[0].strip().lower()
    kind, _, subtype = media.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


def _host_refusal(host: str, settings: GateSettings) -> Refuse:
    if settings.allowed_hosts:
        why = "it is not listed in api_server.allowed_hosts"
    else:
        why = (
            "a server without an API key answers only requests addressed to a loopback "
            "name (localhost, 127.0.0.1, [::1]); add the name to api_server.allowed_hosts"
        )
    return Refuse(
        403,
        f"host '{_shown(host)}' is not allowed: {why} (API_SERVER_ALLOWED_HOSTS)",
        "host_not_allowed",
    )


def _options(request: GateRequest, origin: str | None) -> Decision:
    wanted_method = request.header("access-control-request-method")
    if origin is None or wanted_method is None:
        return Answer(204, {"Allow": METHODS})
    listed = request.header("access-control-request-headers") or ""
    asked = [h.strip().lower() for h in listed.split(",") if h.strip()]
    for name in asked:
        if not _TOKEN.fullmatch(name):
            return Refuse(
                400,
                f"invalid header name '{name}' in Access-Control-Request-Headers",
                "invalid_preflight",
                param="Access-Control-Request-Headers",
            )
    # The origin is trusted at this point, and the headers it may send are
    # not a security boundary here (the origin check is): allow what the
    # browser asks for, so a client's new header never breaks it.
    allowed = list(dict.fromkeys([*SDK_HEADERS, *asked]))
    headers = {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Allow-Methods": METHODS,
        "Access-Control-Allow-Headers": ", ".join(allowed),
        "Access-Control-Max-Age": "600",
        "Vary": "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
    }
    if (request.header("access-control-request-private-network") or "").lower() == "true":
        # Chrome asks before a public page may reach a private address.
        headers["Access-Control-Allow-Private-Network"] = "true"
    return Answer(204, headers)


def _cors(origin: str | None, settings: GateSettings) -> dict[str, str]:
    """CORS headers for an allowed cross-origin request; same-origin needs none."""
    if origin is None or not settings.cors_origins:
        return {}
    if "*" not in settings.cors_origins and _normal_origin(origin) not in settings.cors_origins:
        return {}
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Expose-Headers": EXPOSED_HEADERS,
        "Vary": "Origin",
    }


def _split_host(host: str) -> tuple[str, str | None] | None:
    """``(name, port)`` of a Host header value; None when malformed.

    The name is an IP address (IPv6 in brackets) or a host name whose labels
    DNS allows, one trailing dot dropped; the port, if any, a TCP port.
    """
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return None
        name, rest = host[1:end], host[end + 1 :]
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            return None
        port = rest[1:] if rest.startswith(":") else None
        if (rest and port is None) or not _valid_port(port):
            return None
        return f"[{name}]", port
    name, colon, port_text = host.rpartition(":")
    if not colon:
        name, port_text = host, ""
    port = port_text if colon else None
    if not _valid_port(port):
        return None
    name = name[:-1] if name.endswith(".") else name
    if len(name) > _MAX_NAME or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        return None
    return name, port


def _valid_port(port: str | None) -> bool:
    return port is None or (port.isascii() and port.isdigit() and int(port) <= 65535)


def is_loopback(name: str) -> bool:
    """Whether ``name`` (a host name, an IP address, an IPv6 address with or
    without brackets) always means this machine: the one rule for the
    address ``serve`` may listen on without a key and for the Host names it
    answers without one."""
    name = name.strip().lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        # Browsers resolve these to loopback themselves (RFC 6761): no page
        # can rebind them.
        return True
    literal = name[1:-1] if name.startswith("[") else name
    try:
        address = ipaddress.ip_address(literal)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def _host_matches(entry: str, name: str, port: str | None) -> bool:
    if entry == "*":
        return True
    parsed = _split_host(entry.lstrip("."))
    if parsed is None:
        return False
    want_name, want_port = parsed
    if want_port is not None and want_port != port:
        return False
    if entry.startswith("."):
        return name == want_name or name.endswith("." + want_name)
    return name == want_name


def _normal_origin(origin: str) -> str:
    """Lower case, no trailing slash, no default port: the form browsers send."""
    origin = origin.strip().rstrip("/").lower()
    scheme, sep, authority = origin.partition("://")
    if not sep:
        return origin
    default = _DEFAULT_PORTS.get(scheme)
    if default and authority.endswith(":" + default) and not authority.endswith("]"):
        authority = authority[: -len(default) - 1]
    return f"{scheme}://{authority}"


def _same_origin(origin: str, host: str) -> bool:
    """The page was served by this server under the name it now addresses.

    Compared by host and port only: behind a TLS proxy the page is https
    while this server speaks http, and a port serves one scheme anyway.
    """
    scheme, sep, authority = origin.partition("://")
    if not sep:
        return False
    theirs = _split_host(authority)
    ours = _split_host(host)
    if theirs is None or ours is None:
        return False
    default = _DEFAULT_PORTS.get(scheme)
    their_port = theirs[1] or default
    our_port = ours[1] or default
    return theirs[0] == ours[0] and their_port == our_port
