"""HTTP plumbing the chat-platform adapters share: calling the platform
with a bounded timeout (network errors redacted), and the allow-list check.

Secrets live in the one process-wide registry of :mod:`hermes_trio.redaction`
(every token in the config joins it); the adapters use it from there.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

import httpx

from ..consumers.messenger import PlatformError
from ..redaction import redact

__all__ = [
    "CONNECT_TIMEOUT",
    "MAX_DOWNLOAD_BYTES",
    "NETWORK_ERRORS",
    "SharedClient",
    "allow_list",
    "download",
    "send_request",
    "shared_client",
    "user_allowed",
]

# A platform that does not accept the connection within this is down; the
# per-call ``request_timeout`` only bounds the rest (a long poll needs minutes).
CONNECT_TIMEOUT = 10.0

_T = TypeVar("_T", bound=Hashable)

#: The HTTP client the adapters share (``build_adapters`` takes one).
SharedClient = httpx.AsyncClient
#: What an adapter's call may raise besides ``PlatformError`` when the
#: network fails under a call that does not go through :func:`send_request`.
NETWORK_ERRORS: tuple[type[Exception], ...] = (httpx.HTTPError,)


def shared_client() -> SharedClient:
    """A client for the adapters to share; the caller closes it (``async with``)."""
    return httpx.AsyncClient()

# ---------------------------------------------------------------------------
# Requests


async def send_request(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    what: str,
    request_timeout: float,
    name_if_empty: bool = False,
    json: Any = None,
    params: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    follow_redirects: bool = False,
) -> httpx.Response:
    """Send one request; a transport failure becomes ``PlatformError``
    ("{what}: network error: {type}: {detail}").

    httpx puts the request URL in its messages, so ``detail`` is redacted
    (every registered secret: the config's tokens and the credentials in
    its URLs). ``name_if_empty``
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
            follow_redirects=follow_redirects,
        )
    except httpx.HTTPError as exc:
        detail = redact(str(exc))
        if name_if_empty and not detail:
            detail = type(exc).__name__
        raise PlatformError(f"{what}: network error: {type(exc).__name__}: {detail}") from None


# The largest file a user may send that we fetch (Telegram's own limit for bots).
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024


async def download(
    client: httpx.AsyncClient,
    url: str,
    *,
    what: str,
    request_timeout: float,
    headers: dict[str, str] | None = None,
    name_if_empty: bool = False,
) -> bytes:
    """The bytes of a file a user sent, at most ``MAX_DOWNLOAD_BYTES``;
    ``PlatformError`` ("{what}: …") for anything else."""
    response = await send_request(
        client,
        "GET",
        url,
        what=what,
        request_timeout=request_timeout,
        headers=headers,
        name_if_empty=name_if_empty,
        follow_redirects=True,
    )
    if response.status_code != 200:
        raise PlatformError(f"{what}: HTTP {response.status_code}")
    if len(response.content) > MAX_DOWNLOAD_BYTES:
        raise PlatformError(f"{what}: larger than {MAX_DOWNLOAD_BYTES // (1024 * 1024)} MB")
    return response.content


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
