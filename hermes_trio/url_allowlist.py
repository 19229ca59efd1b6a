"""Whether a URL a client names is one the operator allowed (pure).

An allow-list of URL prefixes compared as strings lets through what the
operator never listed: ``http://host:9000@internal:6379/`` starts with
``http://host:9000``, and ``http://host:19100`` with ``http://host:1910``.
So both sides are parsed here, with the parser the connection uses (the
``mcp`` SDK's HTTP client, httpx2; imported when a URL is first checked,
not when the config is read), and compared part by part: the same scheme, the same host, the same
port (a default port written or not), and a path under the allowed one on
a ``/`` boundary.

A URL is refused outright where parsers may disagree about it, rather than
guessing which one the connection will follow: user information, a
backslash, whitespace or any character outside printable ASCII, a
percent sign in the host, a trailing dot in the host, dot segments or an
encoded ``/`` in the path, a fragment, and anything ``urllib.parse`` reads
with another scheme, host, port or path than httpx2 does.

What is checked is what is connected to: :func:`check_url` returns the
parsed URL, whose text (:attr:`Checked.url`) parses back to the very same
URL (checked here), and that text is what the connection is given.

Names are not resolved here. An allowed entry that names a host (not an
IP literal) trusts that name's DNS: the operator listed the name, and the
request can only reach what that name resolves to. Where DNS is not
trusted, allow IP literals.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Checked", "UrlPrefix", "UrlRefused", "check_url", "parse_prefix"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
# Host names as DNS spells them (and the ``_`` of container names); an IP
# literal is normalised apart.
_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")


class UrlRefused(ValueError):
    """Why a URL is not one the allow-list can admit (a sentence)."""


@dataclass(frozen=True)
class Checked:
    """A parsed URL and the parts it is compared on."""

    url: str
    """The URL's text as httpx2 writes it: parsed again, the same URL."""
    scheme: str
    host: str
    port: int
    path: str
    """The path as sent (percent-encoded), without the query."""
    has_query: bool


@dataclass(frozen=True)
class UrlPrefix:
    """One allowed entry: a scheme, host and port, and the path under which
    URLs are admitted."""

    text: str
    scheme: str
    host: str
    port: int
    path: str

    def admits(self, checked: Checked) -> bool:
        if (checked.scheme, checked.host, checked.port) != (self.scheme, self.host, self.port):
            return False
        if checked.path == self.path:
            return True
        under = self.path if self.path.endswith("/") else self.path + "/"
        return checked.path.startswith(under)


def parse_prefix(text: str) -> UrlPrefix:
    """An allow-list entry; :class:`UrlRefused` for one that is not a plain
    ``http(s)://host[:port][/path]``."""
    checked = _parse(text)
    if checked.has_query:
        raise UrlRefused("a query has no place in an allowed URL prefix")
    return UrlPrefix(text, checked.scheme, checked.host, checked.port, checked.path)


def check_url(text: str, allowed: Sequence[UrlPrefix]) -> Checked:
    """``text`` parsed, when one of ``allowed`` admits it; :class:`UrlRefused`
    saying why otherwise."""
    checked = _parse(text)
    if not any(prefix.admits(checked) for prefix in allowed):
        raise UrlRefused("it is not under any of api_server.mcp_allowed_urls")
    return checked


def _parse(text: str) -> Checked:
    if not text.isascii() or not text.isprintable() or " " in text:
        raise UrlRefused("it must be printable ASCII without spaces")
    if "\\" in text:
        raise UrlRefused("it must not contain a backslash")
    if "#" in text:
        raise UrlRefused("it must not have a fragment")
    # The SDK's client: loaded with MCP, not with the config.
    import httpx2

    try:
        url = httpx2.URL(text)
    except httpx2.InvalidURL as exc:
        raise UrlRefused(f"it is not a valid URL ({exc})") from None
    scheme = url.scheme
    if scheme not in _DEFAULT_PORTS:
        raise UrlRefused("it must be an http:// or https:// URL")
    authority = urllib.parse.urlsplit(text).netloc
    if url.userinfo or "@" in authority:
        raise UrlRefused("it must not carry user information (name@ or name:password@)")
    host = _host(url.host)
    port = url.port if url.port is not None else _DEFAULT_PORTS[scheme]
    if not 0 < port < 65536:
        raise UrlRefused(f"port {port} is not a port")
    raw = url.raw_path.decode("ascii")
    path, question, _ = raw.partition("?")
    _check_path(path)
    checked = Checked(str(url), scheme, host, port, path or "/", bool(question))
    _same_for_urllib(text, checked)
    if httpx2.URL(checked.url) != url:
        raise UrlRefused("it does not read the same when written out again")
    return checked


def _host(host: str) -> str:
    if not host:
        raise UrlRefused("it must name a host")
    if "%" in host:
        raise UrlRefused("its host must not be percent-encoded")
    if host.endswith("."):
        raise UrlRefused("its host must not end with a dot")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if not _NAME.fullmatch(host):
        raise UrlRefused("its host must be a DNS name or an IP address")
    return host


def _check_path(path: str) -> None:
    for segment in path.split("/"):
        plain = urllib.parse.unquote(segment)
        if plain in (".", ".."):
            raise UrlRefused("its path must not contain '.' or '..' segments")
        if "/" in plain or "\\" in plain or not plain.isprintable():
            raise UrlRefused("its path must not encode '/', '\\' or control characters")


def _same_for_urllib(text: str, checked: Checked) -> None:
    """A second parser must read the same scheme, host, port and path
    (httpx2 drops dot segments and encodes some characters; urllib does not)."""
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise UrlRefused(f"it is not a valid URL ({exc})") from None
    host = parts.hostname or ""
    try:
        host = str(ipaddress.ip_address(host))
    except ValueError:
        pass
    scheme = parts.scheme.lower()
    _check_path(parts.path)
    port = port if port is not None else _DEFAULT_PORTS.get(scheme)
    seen = (scheme, host, port, parts.path or "/")
    if seen != (checked.scheme, checked.host, checked.port, checked.path):
        raise UrlRefused("it reads differently to different URL parsers")
