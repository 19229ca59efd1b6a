"""Discord's REST API on the shared httpx client: the bot token, the rate
limits, and Discord's errors turned into ours.

Every call names its route template and major parameter, so the rate-limit
bookkeeping (``ratelimit``) keys buckets the way Discord does. A
call whose bucket is spent (or during a global limit) raises
``RateLimited`` without going out; a 429 raises it with Discord's
``retry_after``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import httpx
import trio

from ...consumers.messenger import PlatformError, RateLimited
from ...redaction import redact, register_secret
from ..base import CredentialsRejected
from ..http import download, send_request
from .gateway import TOKEN_REJECTED
from .ratelimit import RateLimits, RouteKey

__all__ = ["DiscordApiError", "DiscordRest", "TokenRejected"]

# Discord's JSON error code for a message that no longer exists.
UNKNOWN_MESSAGE = 10008


class TokenRejected(CredentialsRejected):
    """Discord refused the bot token (HTTP 401, or gateway close code 4004)."""


class DiscordApiError(PlatformError):
    """Discord answered an error; ``status`` is HTTP's, ``code`` Discord's own."""

    def __init__(self, what: str, status: int, code: int | None, message: str) -> None:
        detail = f"{message} ({code})" if code else message
        super().__init__(f"{what}: HTTP {status}: {detail}")
        self.status = status
        self.code = code
        self.message = message


class DiscordRest:
    def __init__(
        self,
        client: httpx.AsyncClient,
        token: str,
        base_url: str,
        *,
        request_timeout: float = 15.0,
        download_timeout: float = 60.0,
    ) -> None:
        register_secret(token)
        self._client = client
        self._headers = {"Authorization": f"Bot {token}"}
        self.base_url = base_url.rstrip("/")
        self.request_timeout = request_timeout
        self.download_timeout = download_timeout
        self.limits = RateLimits()

    async def call(
        self,
        method: str,
        route: str,
        *,
        major: str = "",
        json: Any = None,
        **params: str,
    ) -> Any:
        """``method`` on ``route`` (a template like ``/channels/{channel_id}``
        filled from ``params``); returns the JSON answer (None for 204)."""
        key = RouteKey(f"{method} {route}", major)
        what = f"discord {method} {route}"
        wait = self.limits.acquire(key, trio.current_time())
        if wait > 0:
            raise RateLimited(wait, f"{what}: rate limit bucket is empty")
        response = await send_request(
            self._client,
            method,
            self.base_url + route.format(**params),
            what=what,
            request_timeout=self.request_timeout,
            json=json,
            headers=self._headers,
        )
        now = trio.current_time()
        self.limits.update(key, response.headers, now)
        body = _json(response)
        if response.status_code == 429:
            retry_after = body.get("retry_after") if isinstance(body, dict) else None
            if not isinstance(retry_after, int | float) or retry_after < 0:
                retry_after = _float(response.headers.get("retry-after")) or 1.0
            is_global = bool(body.get("global")) if isinstance(body, dict) else False
            is_global = is_global or response.headers.get("x-ratelimit-global") == "true"
            self.limits.limited(key, float(retry_after), is_global, now)
            scope = "global rate limit" if is_global else "rate limited"
            raise RateLimited(float(retry_after), f"{what}: {scope}")
        if response.status_code == 401:
            raise TokenRejected(TOKEN_REJECTED)
        if response.status_code >= 400:
            code = body.get("code") if isinstance(body, dict) else None
            message = body.get("message") if isinstance(body, dict) else None
            raise DiscordApiError(
                what,
                response.status_code,
                code if isinstance(code, int) else None,
                redact(str(message or response.reason_phrase or "error")),
            )
        return body

    def fetcher(self, url: str) -> Callable[[], Awaitable[bytes]]:
        """Downloads an attachment (Discord's CDN wants no token)."""

        return partial(
            download,
            self._client,
            url,
            what="discord attachment",
            request_timeout=self.download_timeout,
        )


def _json(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
