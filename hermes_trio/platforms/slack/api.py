"""Slack's Web API: one ``POST {api_base_url}{method}`` with a JSON body and
a bearer token, answered HTTP 200 with ``{"ok": true, …}`` or ``{"ok":
false, "error": "…"}``; and the download of files users share.

Errors come out as the messenger port's: ``RateLimited`` for HTTP 429 (or a
``ratelimited`` error) with Slack's ``Retry-After``; ``SlackTokenRejected``
(one line naming the setting, never the token) for a token Slack will not
take; ``SlackApiError`` with Slack's own code for the rest.
"""

from __future__ import annotations

from typing import Literal, TypeVar, cast

import httpx

from ...consumers.messenger import PlatformError, RateLimited
from ...redaction import redact, register_secret
from ...retry import parse_retry_after
from ..base import CredentialsRejected
from ..http import download, send_request
from .api_types import WebApiCall

__all__ = [
    "TOKEN_SETTINGS",
    "SlackApiError",
    "SlackTokenRejected",
    "SlackWebApi",
    "TokenKind",
]

TokenKind = Literal["bot", "app"]
R = TypeVar("R")

# Slack's answers for a token it will not take; retrying cannot help.
_AUTH_ERRORS = frozenset(
    {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"}
)
# The token is valid but is the wrong kind, or lacks a scope: for the calls
# every start makes, that is the setting to fix too. For other methods (the
# streaming ones) it only means the method is not for us.
_STARTUP_METHODS = frozenset({"auth.test", "apps.connections.open"})
_WRONG_TOKEN_ERRORS = frozenset({"not_allowed_token_type", "missing_scope"})


class SlackTokenRejected(CredentialsRejected):
    """Slack refused one of the tokens; ``str()`` names the setting."""


TOKEN_SETTINGS: dict[TokenKind, str] = {
    "bot": "SLACK_BOT_TOKEN (platforms.slack.bot_token, xoxb-…)",
    "app": "SLACK_APP_TOKEN (platforms.slack.app_token, xapp-… with connections:write)",
}


class SlackApiError(PlatformError):
    """Slack answered ``ok: false``; ``error`` is its own code."""

    def __init__(self, method: str, error: str, needed: str | None = None) -> None:
        super().__init__(f"slack {method}: {error}" + (f" (needs {needed})" if needed else ""))
        self.method = method
        self.error = error
        self.needed = needed
        """The scope a ``missing_scope`` asks for."""


class SlackWebApi:
    """The Web API with both tokens, on the caller's httpx client."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        bot_token: str | None,
        app_token: str | None,
        base_url: str,
        request_timeout: float = 30.0,
    ) -> None:
        tokens: dict[TokenKind, str] = {}
        given: tuple[tuple[TokenKind, str | None], ...] = (("bot", bot_token), ("app", app_token))
        for kind, token in given:
            if not token:
                raise PlatformError(
                    f"slack: no {kind} token configured (set {TOKEN_SETTINGS[kind]})"
                )
            register_secret(token)
            tokens[kind] = token
        self._client = client
        self._tokens = tokens
        self.base_url = base_url.rstrip("/") + "/"
        self.request_timeout = request_timeout

    async def call(self, request: WebApiCall[R], *, token: TokenKind = "bot") -> R:
        """Call a Web API method; returns its ``ok: true`` answer or raises
        ``PlatformError`` (``RateLimited`` for 429, ``SlackTokenRejected``)."""
        method = request.method
        response = await send_request(
            self._client,
            "POST",
            self.base_url + method,
            what=f"slack {method}",
            request_timeout=self.request_timeout,
            json=request.params,
            headers={"Authorization": f"Bearer {self._tokens[token]}"},
        )
        if response.status_code == 429:
            retry_after = parse_retry_after(response.headers.get("retry-after")) or 1.0
            raise RateLimited(retry_after, f"slack {method}: rate limited")
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise PlatformError(
                f"slack {method}: HTTP {response.status_code} with a non-JSON answer"
            )
        if body.get("ok") is True:
            # The one place Slack's JSON becomes the method's answer; its
            # fields are still checked where they are read.
            return cast(R, body)
        error = redact(str(body.get("error") or f"HTTP {response.status_code}"))
        raw_needed = body.get("needed")
        needed = redact(raw_needed) if isinstance(raw_needed, str) and raw_needed else None
        if error in _AUTH_ERRORS or (error in _WRONG_TOKEN_ERRORS and method in _STARTUP_METHODS):
            if needed:
                error = f"{error}, needs {needed}"
            raise SlackTokenRejected(
                f"slack: the {token} token was rejected ({error}); check {TOKEN_SETTINGS[token]}"
            )
        if error == "ratelimited":
            raise RateLimited(
                parse_retry_after(response.headers.get("retry-after")) or 1.0,
                f"slack {method}: rate limited",
            )
        raise SlackApiError(method, error, needed)

    async def download(self, url: str) -> bytes:
        """A file a user shared (``url_private`` needs the bot token)."""
        return await download(
            self._client,
            url,
            what="slack file download",
            request_timeout=self.request_timeout,
            headers={"Authorization": f"Bearer {self._tokens['bot']}"},
        )
