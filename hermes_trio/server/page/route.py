"""``GET /`` and ``GET /page/<name>``: the chat page's files, read from the
package once at start, each served with its ETag, a strict
Content-Security-Policy and ``Cache-Control: no-cache`` (the browser asks
again each time and gets a 304 while nothing changed, so a server that was
upgraded never runs an old script against its new API).

No route here asks for the API key: the page must load before it can ask
for one. The gate in front (:mod:`hermes_trio.server.edge.gate`) still checks
``Host`` and ``Origin`` on these requests as on every other.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

from quart import Response, request
from quart_trio import QuartTrio
from werkzeug.exceptions import NotFound

__all__ = [
    "ASSETS",
    "CONTENT_SECURITY_POLICY",
    "PageFile",
    "load_page_files",
    "not_modified",
    "page_headers",
    "register_page_routes",
]

# Everything from this server and nothing inline: markup that an answer
# smuggled into the page could neither run a script nor send anything
# anywhere else.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)

_TYPES = {
    "index.html": "text/html; charset=utf-8",
    "chat.js": "text/javascript; charset=utf-8",
    "markdown.js": "text/javascript; charset=utf-8",
    "chat.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
PAGE = "index.html"
# What the page loads, by the name in its address (/page/<name>).
ASSETS = frozenset(_TYPES) - {PAGE}
_PACKAGE = __name__.rpartition(".")[0]


@dataclass(frozen=True)
class PageFile:
    body: bytes
    content_type: str
    etag: str
    """Quoted, as the header carries it."""


def load_page_files() -> dict[str, PageFile]:
    """Every page file by name, with an ETag from its content."""
    folder = resources.files(_PACKAGE)
    loaded: dict[str, PageFile] = {}
    for name, content_type in _TYPES.items():
        body = folder.joinpath(name).read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:24] + '"'
        loaded[name] = PageFile(body, content_type, etag)
    return loaded


def not_modified(if_none_match: str | None, etag: str) -> bool:
    """Whether a request sending ``If-None-Match`` already holds ``etag``
    (compared weakly, as RFC 9110 asks for this header)."""
    if not if_none_match:
        return False
    for tag in if_none_match.split(","):
        tag = tag.strip()
        if tag == "*" or tag.removeprefix("W/") == etag:
            return True
    return False


def page_headers(file: PageFile) -> dict[str, str]:
    """The headers every page file is served with, a 304 included."""
    return {
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
        "ETag": file.etag,
    }


def register_page_routes(app: QuartTrio) -> None:
    """Add ``GET /`` (the chat page) and ``GET /page/<name>`` to ``app``."""
    files = load_page_files()

    def answer(name: str) -> Response:
        file = files[name]
        headers = page_headers(file)
        if not_modified(request.headers.get("If-None-Match"), file.etag):
            return Response(b"", status=304, headers=headers)
        return Response(file.body, status=200, content_type=file.content_type, headers=headers)

    @app.get("/")
    async def chat_page() -> Response:
        return answer(PAGE)

    @app.get("/page/<name>")
    async def page_file(name: str) -> Response:
        if name not in ASSETS:
            raise NotFound()
        return answer(name)
