"""One structured line per request (logger ``hermes_trio.access``, INFO),
and the request id that ties a request's lines together.

:class:`Front` makes a :class:`RequestRecord` for every HTTP request, keeps
it in the ASGI scope (``scope["extensions"]["hermes.request"]``) where the
app adds what only it knows (the error code, the tokens, the key's name),
answers with ``X-Request-ID`` and writes the line when the request is over
(also when the client went away). The request id is the client's
``X-Request-ID`` when it is a sane one, a new one otherwise; it is set in a
context variable, so every log line written while the request — or a turn
it started — runs carries it (:class:`RequestIdFilter`).

Nothing here is per token; the line is built once, at the end.
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import json
import logging
import re
import secrets
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from ...escapes import escape_controls

__all__ = [
    "ACCESS_LOG",
    "SCOPE_KEY",
    "RequestIdFilter",
    "RequestLogFields",
    "RequestRecord",
    "current_record",
    "current_request_id",
    "request_id",
    "session_hash",
]

ACCESS_LOG = logging.getLogger("hermes_trio.access")
SCOPE_KEY = "hermes.request"

_SANE_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
current_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "hermes_request_id", default=None
)
current_record: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "hermes_request_record", default=None
)
JSON_LINES = False
"""``--log-format json``: the request lines as JSON objects."""


def request_id(given: str | None) -> str:
    """The client's id when it is 1-128 characters of letters, digits and
    ``._:-``; else a new one (an odd id is replaced, never refused)."""
    if given is not None and _SANE_ID.fullmatch(given):
        return given
    return "req_" + secrets.token_hex(12)


def session_hash(session_id: str | None, key: bytes) -> str | None:
    """What the log says of a session: an HMAC under this install's secret
    ``key``, never the id itself. A bare hash of a short or guessable id
    would be reversed by trying ids; the same id still gives the same
    hash across restarts, so a session's lines can be followed."""
    if not session_id:
        return None
    return hmac.new(key, session_id.encode(), hashlib.sha256).hexdigest()[:12]


class RequestLogFields(TypedDict):
    """One request's line in the request log (``None`` values are left out)."""

    request_id: str
    method: str
    path: str
    status: int
    duration_ms: float
    ttft_ms: float | None
    tokens: int | None
    key: str | None
    session: str | None
    error: str | None
    reason: str | None
    client_gone: Literal[True] | None


@dataclass
class RequestRecord:
    id: str
    method: str
    path: str
    started: float
    status: int = 0
    first_byte: float | None = None
    tokens: int | None = None
    key_name: str | None = None
    session: str | None = None
    error_code: str | None = None
    reason: str | None = None
    """Why the request was refused, where the code alone does not say."""
    client_gone: bool = False
    turn: Any = None
    """The turn the request started, whose result says the tokens and how
    it ended (a stream's failure is not in its status)."""

    def settle(self) -> None:
        """What the turn said, as the request ends. (A key's budget is the
        turn's business: it is charged when the turn ends, which may be
        later; see ``admission.turn_place.TurnPlace``.)"""
        result = getattr(self.turn, "result", None)
        if result is not None:
            self.tokens = self.tokens or result.usage.completion_tokens or None
            self.error_code = self.error_code or result.error_code

    def fields(self, ended: float) -> RequestLogFields:
        return {
            "request_id": self.id,
            "method": self.method,
            "path": self.path,
            "status": self.status,
            "duration_ms": round((ended - self.started) * 1000, 1),
            "ttft_ms": (
                round((self.first_byte - self.started) * 1000, 1)
                if self.first_byte is not None
                else None
            ),
            "tokens": self.tokens,
            "key": self.key_name,
            "session": self.session,
            "error": self.error_code,
            "reason": self.reason,
            "client_gone": self.client_gone or None,
        }

    def line(self, ended: float, *, as_json: bool) -> str:
        fields = {
            k: escape_controls(v) if isinstance(v, str) else v
            for k, v in self.fields(ended).items()
            if v is not None
        }
        if as_json:
            return json.dumps(fields, ensure_ascii=False)
        head = f"{fields['method']} {fields['path']} {self.status} {fields.pop('duration_ms')}ms"
        for key in ("method", "path", "status"):
            fields.pop(key)
        return head + "".join(f" {k}={v}" for k, v in fields.items())


class RequestIdFilter(logging.Filter):
    """Gives every record ``request_id``: `` [req_…]`` while a request runs,
    empty otherwise (for a format's ``%(request_id)s``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        current = current_request_id.get()
        record.request_id = f" [{current}]" if current else ""
        return True
