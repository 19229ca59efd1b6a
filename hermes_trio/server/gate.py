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
which name they use. CORS preflights are answered here too.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "EXPOSED_HEADERS",
    "SDK_HEADERS",
    "Allow",
    "Answer",
    "GateRequest",
    "GateSettings",
    "Refuse",
    "decide",
    "host_allowed",
    "is_json",
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


Decision = Allow | Answer | Refuse


def decide(request: GateRequest, settings: GateSettings) -> Decision:
    if request.path == HEALTH:
        return Allow()
    host = request.header("host")
    if not host_allowed(host, settings):
        return _host_refusal(host or "", settings)
    origin = request.header("origin")
    if origin is not None and not origin_allowed(origin, host, settings):
        return Refuse(
            403,
            f"origin '{origin}' is not allowed: web pages may call this server only from "
            "its own origin or one listed in api_server.cors_origins "
            "(API_SERVER_CORS_ORIGINS)",
            "origin_not_allowed",
        )
    if request.method == "OPTIONS":
        return _options(request, origin)
    if request.has_body:
        content_type = request.header("content-type")
        if content_type is None or not is_json(content_type):
            what = (
                "no Content-Type" if content_type is None else f"Content-Type '{content_type}'"
            )
            return Refuse(
                415,
                f"unsupported media type: the request body has {what}; "
                "send JSON with 'Content-Type: application/json'",
                "unsupported_media_type",
                param="Content-Type",
            )
    return Allow(_cors(origin, settings))


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
    if _is_loopback(name):
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
        f"host '{host}' is not allowed: {why} (API_SERVER_ALLOWED_HOSTS)",
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
    """``(name, port)`` of a Host header value; None when malformed."""
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
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return None
        return f"[{name}]", rest[1:] or None
    name, colon, port = host.rpartition(":")
    if not colon:
        name, port = host, ""
    elif not port.isdigit():
        return None
    if not name or ":" in name or "/" in name or "@" in name:
        return None
    return name.rstrip("."), port or None


def _is_loopback(name: str) -> bool:
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
