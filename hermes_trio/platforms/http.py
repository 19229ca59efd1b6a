"""HTTP plumbing the chat-platform adapters share: keeping secrets out of
messages and logs, calling the platform with a bounded timeout, and the
allow-list check.

Secrets: ``register_secret`` adds a token to one process-wide registry;
``redact`` replaces every registered secret (or only the ones passed), and a
filter on the ``httpx`` and ``httpcore`` loggers (which log request URLs)
does the same to their records. Only tokens that travel in URLs need
registering (Telegram's); header-borne tokens are redacted per call.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

import httpx

from .base import PlatformError

__all__ = [
    "CONNECT_TIMEOUT",
    "REDACTED",
    "allow_list",
    "redact",
    "register_secret",
    "send_request",
    "user_allowed",
]

REDACTED = "<redacted>"
# A platform that does not accept the connection within this is down; the
# per-call ``request_timeout`` only bounds the rest (a long poll needs minutes).
CONNECT_TIMEOUT = 10.0

_T = TypeVar("_T", bound=Hashable)

# ---------------------------------------------------------------------------
# Secret redaction

_SECRETS: set[str] = set()


def register_secret(secret: str) -> None:
    """Redact ``secret`` (and its URL-quoted form) from ``redact()`` and
    from httpx/httpcore log records from now on."""
    _SECRETS.add(secret)
    quoted = urllib.parse.quote(secret, safe="")
    if quoted != secret:
        _SECRETS.add(quoted)
    _install_log_filter()


def redact(text: str, secrets: Iterable[str | None] | None = None) -> str:
    """``text`` with each of ``secrets`` replaced; by default every
    registered secret. Empty secrets are skipped (replacing "" would splice
    the marker between every character)."""
    for secret in _SECRETS if secrets is None else secrets:
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    return text


class _RedactFilter(logging.Filter):
    """Rewrites log records that would print a registered secret."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _SECRETS:
            try:
                message = record.getMessage()
            except Exception:
                return True
            cleaned = redact(message)
            if cleaned != message:
                record.msg = cleaned
                record.args = None
        return True


_FILTER = _RedactFilter()


def _install_log_filter() -> None:
    # Logger-level filters run for records created on that logger, before any
    # handler sees them; httpx and httpcore are where request URLs are logged.
    for name in ("httpx", "httpcore"):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


# ---------------------------------------------------------------------------
# Requests


async def send_request(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    what: str,
    request_timeout: float,
    secrets: Iterable[str | None] | None = None,
    name_if_empty: bool = False,
    json: Any = None,
    params: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """Send one request; a transport failure becomes ``PlatformError``
    ("{what}: network error: {type}: {detail}").

    httpx puts the request URL in its messages, so ``detail`` is redacted
    with ``secrets`` (default: every registered one). ``name_if_empty``
    shows the exception type again when its message is empty (Telegram's
    wording; the others leave the detail empty).
    """
    try:
        return await client.request(
            method,
            url,
            json=json,
            params=params,
            headers=headers,
            timeout=httpx.Timeout(request_timeout, connect=CONNECT_TIMEOUT),
        )
    except httpx.HTTPError as exc:
        detail = redact(str(exc), secrets)
        if name_if_empty and not detail:
            detail = type(exc).__name__
        raise PlatformError(f"{what}: network error: {type(exc).__name__}: {detail}") from None


# ---------------------------------------------------------------------------
# Allow-list


def allow_list(users: Iterable[_T], filter_users: bool) -> frozenset[_T]:
    """The users an adapter lets through itself; empty (everyone) when the
    caller (the gateway) enforces the allow-list instead."""
    return frozenset(users) if filter_users else frozenset()


def user_allowed(
    allowed: frozenset[Any], user_id: object, key: Callable[[Any], Hashable] = str
) -> bool:
    """True when ``allowed`` is empty or holds ``key(user_id)``.

    ``key`` matches the config's id type (Telegram's ids are ints, the
    others' strings); it only runs when there is a list to check, so an id
    ``key`` cannot convert is never a problem without an allow-list.
    """
    return not allowed or key(user_id) in allowed
