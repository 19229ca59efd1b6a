"""Home Assistant over its REST API, plus a small inbound webhook.

No extra dependency and no long-lived socket to HA: HA pushes each user
message to us, and we answer through HA's documented REST API.

Inbound: the adapter serves ``POST http://{webhook_host}:{webhook_port}/hermes``
with ``Authorization: Bearer {secret}`` (``webhook_secret``, falling back to
the HA access token) and a JSON body::

    {"text": "turn on the lights", "conversation_id": "kitchen",
     "user_id": "abc123", "user_name": "Ana"}          # only text is required

``conversation_id`` (else ``user_id``, else ``"homeassistant"``) is the chat
id. Answers: 200 ``{"ok": true}``; 401 bad or missing bearer; 400 bad body.
In HA this is a ``rest_command`` called from an automation, e.g.::

    rest_command:
      hermes:
        url: "http://hermes-host:8644/hermes"
        method: post
        headers:
          authorization: !secret hermes_bearer     # "Bearer <secret>"
        content_type: "application/json"
        payload: >-
          {"text": {{ text | tojson }},
           "conversation_id": {{ conversation_id | default('default') | tojson }}}

Outbound, with the long-lived access token (``Authorization: Bearer``):

- default: fire an event, ``POST {url}/api/events/hermes_reply`` with
  ``{"conversation_id", "text", "message_id"}``; automations trigger on the
  event (speak it, show it, forward it).
- with ``notify_service="mobile_app_phone"``: call
  ``POST {url}/api/services/notify/mobile_app_phone`` with
  ``{"message": text, "title": "Hermes"}``.

At start, ``GET {url}/api/`` checks the token (401 raises ``PlatformError``).
Messages cannot be edited or deleted.
"""

from __future__ import annotations

import hmac
import itertools
import logging
from functools import partial
from typing import Any, cast

import httpx
import trio
from quart import request
from quart_trio import QuartTrio

from ...config import HomeAssistantConfig
from ...consumers.messenger import PlatformError, RateLimited
from ...redaction import redact
from ...retry import parse_retry_after
from ..base import CredentialsRejected, InboundMessage
from ..http import allow_list, send_request, user_allowed
from ..send_only import SEND_ONLY_CAPABILITIES, SendOnlyMessenger
from ..webhook import check_then_serve, webhook_app
from .api_types import NotifyData, ReplyEvent, WebhookAnswer, WebhookMessage

__all__ = [
    "HOMEASSISTANT_CAPABILITIES",
    "HomeAssistantAdapter",
    "HomeAssistantMessenger",
    "TokenRejected",
]

log = logging.getLogger(__name__)

HOMEASSISTANT_CAPABILITIES = SEND_ONLY_CAPABILITIES
WEBHOOK_PATH = "/hermes"
MAX_BODY = 256 * 1024


class TokenRejected(CredentialsRejected):
    """HA answered 401: the access token is wrong or revoked."""


class HomeAssistantAdapter:
    """Serves the inbound webhook; replies by event or notify service.

    ``webhook_url`` is the bound URL once ``run`` has started.
    ``filter_users=False`` hands every sender on (the gateway enforces the
    allow-list itself so it can answer refused users).
    """

    name = "homeassistant"

    def __init__(
        self,
        config: HomeAssistantConfig,
        client: httpx.AsyncClient,
        *,
        webhook_host: str = "127.0.0.1",
        webhook_port: int = 8644,
        webhook_secret: str | None = None,
        reply_event: str = "hermes_reply",
        notify_service: str | None = None,
        request_timeout: float = 30.0,
        filter_users: bool = True,
    ) -> None:
        if not config.token:
            raise PlatformError(
                "homeassistant: no access token configured (platforms.homeassistant.token)"
            )
        self.config = config
        self._client = client
        self._base = config.url.rstrip("/")
        self._token = config.token
        self._secret = webhook_secret or config.token
        self.webhook_host = webhook_host
        self.webhook_port = webhook_port
        self.reply_event = reply_event
        self.notify_service = notify_service
        self.request_timeout = request_timeout
        self._allowed = allow_list(config.allowed_users, filter_users)
        self._ids = itertools.count(1)
        self.webhook_url: str | None = None

    def __repr__(self) -> str:
        return f"<HomeAssistantAdapter {self._base}>"

    # -- HA REST -----------------------------------------------------------

    async def _request(
        self, method: str, path: str, json: ReplyEvent | NotifyData | None = None
    ) -> Any:
        what = f"homeassistant {method} {path}"
        response = await send_request(
            self._client,
            method,
            f"{self._base}{path}",
            what=what,
            request_timeout=self.request_timeout,
            json=json,
            headers={"Authorization": f"Bearer {self._token}"},
        )
        if response.status_code == 401:
            raise TokenRejected(
                "homeassistant: the access token was rejected (401); "
                "check platforms.homeassistant.token (a long-lived access token)"
            )
        if response.status_code == 429:
            retry_after = parse_retry_after(response.headers.get("retry-after"))
            if retry_after is None:
                retry_after = 1.0
            raise RateLimited(retry_after, f"{what}: too many requests")
        if response.status_code >= 400:
            detail = redact(response.text.strip()[:200])
            raise PlatformError(f"{what}: HTTP {response.status_code}: {detail}")
        try:
            return response.json()
        except ValueError:
            return response.text

    async def whoami(self) -> str:
        await self.check()
        return f"Home Assistant at {self._base}"

    async def check(self) -> None:
        """``GET /api/``: raises ``PlatformError`` when HA refuses the token."""
        await self._request("GET", "/api/")

    async def send_text(self, chat_id: str, text: str) -> str:
        message_id = f"ha-{next(self._ids)}"
        if self.notify_service:
            await self._request(
                "POST",
                f"/api/services/notify/{self.notify_service}",
                NotifyData(message=text, title="Hermes"),
            )
        else:
            await self._request(
                "POST",
                f"/api/events/{self.reply_event}",
                ReplyEvent(conversation_id=chat_id, text=text, message_id=message_id),
            )
        return message_id

    # -- inbound -----------------------------------------------------------

    async def run(
        self,
        inbound: trio.MemorySendChannel[InboundMessage],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve the inbound webhook until cancelled. A rejected token raises
        at once; HA being unreachable is only logged (it may start later)."""
        await check_then_serve(
            self,
            partial(self._build_app, inbound),
            host=self.webhook_host,
            port=self.webhook_port,
            path=WEBHOOK_PATH,
            log=log,
            on_unreachable=lambda exc: log.warning(
                "homeassistant: cannot reach %s yet (%s)", self._base, exc
            ),
            task_status=task_status,
        )

    def _build_app(self, inbound: trio.MemorySendChannel[InboundMessage]) -> QuartTrio:
        app = webhook_app(__name__, MAX_BODY)
        expected = f"Bearer {self._secret}".encode()

        @app.post(WEBHOOK_PATH)
        async def receive() -> tuple[WebhookAnswer, int]:
            given = request.headers.get("Authorization", "").encode("utf-8", "replace")
            if not hmac.compare_digest(given, expected):
                log.warning("homeassistant: refused a webhook call with a bad bearer token")
                return {"ok": False, "error": "unauthorized"}, 401
            body = await request.get_json(force=True, silent=True)
            message = self._to_inbound(body)
            if message is None:
                return {"ok": False, "error": "expected a JSON object with a text"}, 400
            if not user_allowed(self._allowed, message.user_id):
                log.info("homeassistant: ignoring a message from %s (not allowed)", message.user_id)
                return {"ok": True, "ignored": True}, 200
            try:
                await inbound.send(message)
            except trio.BrokenResourceError:
                return {"ok": False, "error": "shutting down"}, 503
            return {"ok": True}, 200

        return app

    @staticmethod
    def _to_inbound(body: Any) -> InboundMessage | None:
        if not isinstance(body, dict):
            return None
        # The webhook's message from here on; each field is still checked where read.
        message = cast(WebhookMessage, body)
        text = message.get("text")
        if not isinstance(text, str) or not text.strip():
            return None
        user_id = str(message.get("user_id") or "homeassistant")
        conversation = message.get("conversation_id") or message.get("user_id") or "homeassistant"
        user_name = message.get("user_name")
        return InboundMessage(
            platform="homeassistant",
            chat_id=str(conversation),
            user_id=user_id,
            text=text,
            message_id=str(message["message_id"]) if message.get("message_id") else None,
            user_name=str(user_name) if user_name else None,
            raw=body,
        )

    # -- outbound ----------------------------------------------------------

    def messenger(self, chat_id: str, thread_id: str | None = None) -> HomeAssistantMessenger:
        # No threads on this platform: every message of a chat is one conversation.
        return HomeAssistantMessenger(self, str(chat_id))


class HomeAssistantMessenger(SendOnlyMessenger):
    """Replies to one HA conversation. No edits, deletes or typing."""

    platform = "homeassistant"
