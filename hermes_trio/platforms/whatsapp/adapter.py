"""WhatsApp over Meta's Cloud API.

Inbound: the adapter serves the webhook Meta calls, at
``http://{webhook_host}:{webhook_port}/webhook`` (put a TLS proxy in front;
Meta only calls https URLs):

- ``GET /webhook?hub.mode=subscribe&hub.verify_token=T&hub.challenge=C`` is
  the subscription check: answered with ``C`` when ``T`` equals
  ``verify_token``, else 403.
- ``POST /webhook`` carries notifications. The raw body must be signed:
  ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body, key app_secret>``
  (missing: 401, wrong: 403, compared in constant time). Each message
  becomes an ``InboundMessage``: ``text`` as it is; ``image``, ``sticker``,
  ``audio`` (a voice note when ``voice`` is true), ``video`` and
  ``document`` as an ``Attachment`` (the caption is the text) fetched only
  when the gateway uses it — ``GET {api_base_url}/{media id}`` gives a
  short-lived ``url``, downloaded with the same bearer token; a button or
  list reply as its title (a reply button's press also as a
  ``ButtonPress`` of its id), a shared location as a line of text; any other
  kind (contacts, orders, "unsupported") as an attachment the agent cannot
  use, so the user is told so. Reactions and statuses are acknowledged and
  ignored. Meta redelivers on timeouts, so message ids seen recently are
  dropped.

Outbound: ``POST {api_base_url}/{phone_number_id}/messages`` with
``Authorization: Bearer {access_token}`` and
``{"messaging_product": "whatsapp", "to": ..., "type": "text",
"text": {"body": ...}}``; buttons as an ``interactive`` message of type
``button`` (at most 3 reply buttons, titles of at most 20 characters, a
body of at most 1024: beyond that ``ButtonsRefused``). Sent messages cannot
be edited or deleted.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Literal, TypeGuard, TypeVar, cast, overload

import httpx
import trio
from quart import Response, request
from quart_trio import QuartTrio

from ...config import WhatsAppConfig
from ...consumers.messenger import Button, ButtonsRefused, PlatformError, RateLimited
from ...redaction import redact
from ...retry import parse_retry_after
from ..base import Attachment, ButtonPress, CredentialsRejected, InboundMessage
from ..http import allow_list, download, send_request, user_allowed
from ..send_only import SEND_ONLY_CAPABILITIES, SendOnlyMessenger
from ..webhook import check_then_serve, webhook_app
from .api_types import (
    GraphError,
    MediaInfo,
    OutboundMessage,
    PhoneNumber,
    SendAnswer,
    Webhook,
    WebhookLocation,
    WebhookMedia,
    WebhookMessage,
)

__all__ = [
    "WHATSAPP_CAPABILITIES",
    "TokenRejected",
    "WhatsAppAdapter",
    "WhatsAppMessenger",
    "signature",
]

log = logging.getLogger(__name__)

WHATSAPP_CAPABILITIES = replace(SEND_ONLY_CAPABILITIES, buttons=True)
# Interactive reply-button messages (Cloud API): at most this many buttons,
# titles and body text of at most this many characters.
MAX_BUTTONS = 3
MAX_BUTTON_TITLE = 20
MAX_BUTTON_BODY = 1024
WEBHOOK_PATH = "/webhook"
MAX_BODY = 1024 * 1024
# Graph error codes that mean "slow down" even when the status is not 429.
_RATE_CODES = frozenset({4, 80007, 130429, 131048, 131056})
_DEFAULT_RETRY_AFTER = 5.0
_SEEN_IDS = 1024
MediaKind = Literal["image", "sticker", "audio", "video", "document"]
# What WhatsApp calls the files a user can send, and how a reply names each.
_MEDIA_NAMES: dict[MediaKind, str] = {
    "image": "image",
    "sticker": "sticker",
    "audio": "audio",
    "video": "video",
    "document": "document",
}
# Messages that ask for no answer.
_IGNORED = frozenset({"reaction", "system", "request_welcome", "ephemeral"})
# Other kinds the agent cannot use, as the reply names them.
_UNUSABLE_NAMES = {
    "contacts": "a shared contact",
    "order": "an order",
    "unsupported": "a message WhatsApp could not pass on",
}


def _is_media(kind: str) -> TypeGuard[MediaKind]:
    return kind in _MEDIA_NAMES


class TokenRejected(CredentialsRejected):
    """The Graph API refused the access token (401 / OAuth code 190)."""


def signature(body: bytes, app_secret: str) -> str:
    """The ``X-Hub-Signature-256`` value Meta sends for ``body``."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def _check_signature(header: str | None, body: bytes, app_secret: str) -> int | None:
    """None when the signature is right, else the HTTP status to answer."""
    if not header or not header.startswith("sha256="):
        return 401
    expected = signature(body, app_secret).encode()
    given = header.strip().lower().encode("ascii", "replace")
    return None if hmac.compare_digest(given, expected) else 403


class WhatsAppAdapter:
    """Runs the webhook server and sends through the Graph API.

    ``webhook_url`` is the bound URL once ``run`` has started (useful with
    ``webhook_port=0``). ``filter_users=False`` hands every sender on (the
    gateway enforces the allow-list itself so it can answer refused users).
    """

    name = "whatsapp"

    def __init__(
        self,
        config: WhatsAppConfig,
        client: httpx.AsyncClient,
        *,
        request_timeout: float = 30.0,
        filter_users: bool = True,
    ) -> None:
        missing = [
            key
            for key in ("access_token", "phone_number_id", "app_secret")
            if not getattr(config, key)
        ]
        if missing:
            raise PlatformError(
                "whatsapp: missing " + ", ".join(f"platforms.whatsapp.{key}" for key in missing)
            )
        self.config = config
        self._client = client
        self.request_timeout = request_timeout
        self._allowed = allow_list(config.allowed_users, filter_users)
        self._seen: OrderedDict[str, None] = OrderedDict()
        self.webhook_url: str | None = None

    def __repr__(self) -> str:
        return f"<WhatsAppAdapter phone_number_id={self.config.phone_number_id}>"

    # -- inbound -----------------------------------------------------------

    async def run(
        self,
        inbound: trio.MemorySendChannel[InboundMessage],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve the webhook until cancelled."""
        if not self.config.verify_token:
            log.warning("whatsapp: no verify_token configured; webhook verification will fail")
        await check_then_serve(
            self,
            partial(self._build_app, inbound),
            host=self.config.webhook_host,
            port=self.config.webhook_port,
            path=WEBHOOK_PATH,
            log=log,
            on_unreachable=lambda exc: log.warning(
                "whatsapp: could not check the phone number yet (%s)", exc
            ),
            task_status=task_status,
        )

    def _build_app(self, inbound: trio.MemorySendChannel[InboundMessage]) -> QuartTrio:
        app = webhook_app(__name__, MAX_BODY)

        @app.get(WEBHOOK_PATH)
        async def verify() -> Response:
            args = request.args
            token = args.get("hub.verify_token", "")
            expected = self.config.verify_token or ""
            if (
                args.get("hub.mode") == "subscribe"
                and expected
                and hmac.compare_digest(token.encode(), expected.encode())
            ):
                return Response(args.get("hub.challenge", ""), 200, content_type="text/plain")
            return Response("forbidden", 403, content_type="text/plain")

        @app.post(WEBHOOK_PATH)
        async def notify() -> Response:
            body = await request.get_data(cache=True, as_text=False, parse_form_data=False)
            assert self.config.app_secret is not None
            status = _check_signature(
                request.headers.get("X-Hub-Signature-256"), body, self.config.app_secret
            )
            if status is not None:
                log.warning("whatsapp: refused a webhook call with a bad signature (%d)", status)
                return Response("invalid signature", status, content_type="text/plain")
            try:
                payload = json.loads(body)
            except ValueError:
                return Response("invalid JSON", 400, content_type="text/plain")
            try:
                for message in self._messages(payload):
                    await self._deliver(message, inbound)
            except trio.BrokenResourceError:
                return Response("shutting down", 503, content_type="text/plain")
            return Response("OK", 200, content_type="text/plain")

        return app

    async def _deliver(
        self, message: InboundMessage, inbound: trio.MemorySendChannel[InboundMessage]
    ) -> None:
        key = message.message_id
        if key is not None:
            if key in self._seen:
                return  # Meta redelivered it (or is redelivering it right now)
            self._seen[key] = None
            if len(self._seen) > _SEEN_IDS:
                self._seen.popitem(last=False)
        try:
            await inbound.send(message)
        except BaseException:
            # Not delivered: let Meta's retry through.
            if key is not None:
                self._seen.pop(key, None)
            raise

    def _messages(self, payload: Any) -> list[InboundMessage]:
        out: list[InboundMessage] = []
        if not isinstance(payload, dict):
            return out
        # A webhook notification from here on; each field is still checked where read.
        notification = cast(Webhook, payload)
        for entry in _dicts(notification.get("entry")):
            for change in _dicts(entry.get("changes")):
                value = change.get("value")
                if not isinstance(value, dict):
                    continue
                metadata = value.get("metadata")
                number = metadata.get("phone_number_id") if isinstance(metadata, dict) else None
                if number is not None and str(number) != str(self.config.phone_number_id):
                    continue  # another number on the same app
                names = {
                    c.get("wa_id"): profile.get("name")
                    for c in _dicts(value.get("contacts"))
                    if isinstance(profile := c.get("profile"), dict)
                }
                for msg in _dicts(value.get("messages")):
                    message = self._to_inbound(msg, names)
                    if message is not None:
                        out.append(message)
        return out

    def _to_inbound(self, msg: WebhookMessage, names: dict[str, str]) -> InboundMessage | None:
        kind = msg.get("type")
        sender = msg.get("from")
        message_id = msg.get("id")
        if not isinstance(kind, str) or not sender or kind in _IGNORED:
            return None
        content = self._content(kind, msg)
        if content is None:
            return None
        text, attachments = content
        press = self._press(kind, msg, str(sender))
        # A press passes: the approval decides whether it counts (an
        # approver need not be an allowed user) and acknowledges it either way.
        if press is None and not user_allowed(self._allowed, sender):
            log.info("whatsapp: ignoring a message from %s (not allowed)", sender)
            return None
        name = names.get(sender)
        return InboundMessage(
            platform="whatsapp",
            chat_id=str(sender),
            user_id=str(sender),
            text=text,
            message_id=str(message_id) if message_id is not None else None,
            user_name=name if isinstance(name, str) else None,
            raw=msg,
            attachments=attachments,
            press=press,
        )

    def _press(self, kind: str, msg: WebhookMessage, sender: str) -> ButtonPress | None:
        """A press on one of our reply buttons (``interactive.button_reply``)."""
        if kind != "interactive":
            return None
        part = msg.get("interactive")
        if not isinstance(part, dict):
            return None
        reply = part.get("button_reply")
        if part.get("type") != "button_reply" or not isinstance(reply, dict):
            return None
        context = msg.get("context")
        replied_to = context.get("id") if isinstance(context, dict) else None
        return ButtonPress(
            data=str(reply.get("id") or ""),
            message_id=replied_to if isinstance(replied_to, str) else None,
            acknowledge=partial(self._tell_presser, sender),
        )

    async def _tell_presser(self, to: str, notice: str | None) -> None:
        # Nothing to acknowledge on WhatsApp; a refusal is a message (the
        # chat is the presser's own).
        if notice:
            await self.send_text(to, notice)

    def _content(self, kind: str, msg: WebhookMessage) -> tuple[str, tuple[Attachment, ...]] | None:
        """The message's text and files; None when it holds nothing to answer.
        The object named after ``kind`` counts only when it is one."""
        if kind == "text":
            body = msg.get("text")
            text = body.get("body") if isinstance(body, dict) else None
            return (text, ()) if isinstance(text, str) else None
        if _is_media(kind):
            found = msg.get(kind)
            media = found if isinstance(found, dict) else None
            caption = media.get("caption") if media is not None else None
            return (caption if isinstance(caption, str) else "", (self._attachment(kind, media),))
        if kind == "button":
            button = msg.get("button")
            text = button.get("text") if isinstance(button, dict) else None
            return (text, ()) if isinstance(text, str) and text else None
        if kind == "interactive":
            interactive = msg.get("interactive")
            # The reply sits under the key its ``type`` names.
            reply = (
                interactive.get(str(interactive.get("type")))
                if isinstance(interactive, dict)
                else None
            )
            title = reply.get("title") if isinstance(reply, dict) else None
            return (title, ()) if isinstance(title, str) and title else None
        if kind == "location":
            location = msg.get("location")
            return _location(location if isinstance(location, dict) else {}), ()
        unusable = _UNUSABLE_NAMES.get(kind, f"a message of type {kind!r}")
        return "", (Attachment(None, unusable),)

    def _attachment(self, kind: MediaKind, media: WebhookMedia | None) -> Attachment:
        name = _MEDIA_NAMES[kind]
        if media is None:
            return Attachment(None, name)
        mime = media.get("mime_type")
        if kind == "audio" and media.get("voice"):
            name = "voice message"
        elif kind == "document" and isinstance(media.get("filename"), str):
            name = media["filename"]
        media_id = media.get("id")
        if not isinstance(media_id, str) or not media_id:
            return Attachment(mime if isinstance(mime, str) else None, name)
        return Attachment(
            mime if isinstance(mime, str) else None,
            name,
            None,
            partial(self.download_media, media_id),
        )

    async def download_media(self, media_id: str) -> bytes:
        """The bytes of a file a user sent: its short-lived URL from the Graph
        API, then the file from there with the same bearer token."""
        info = await self._graph("GET", "", "media", path=media_id)
        url = info.get("url")
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise PlatformError("whatsapp media: the answer had no download URL")
        return await download(
            self._client,
            url,
            what="whatsapp media download",
            request_timeout=self.request_timeout,
            headers={"Authorization": f"Bearer {self.config.access_token}"},
        )

    # -- outbound ----------------------------------------------------------

    def messenger(self, chat_id: str, thread_id: str | None = None) -> WhatsAppMessenger:
        # No threads on this platform: every message of a chat is one conversation.
        return WhatsAppMessenger(self, str(chat_id))

    async def send_text(self, to: str, text: str) -> str:
        """Send ``text`` to ``to`` (a wa_id); returns the new message id."""
        payload: OutboundMessage = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": to,
            "type": "text",
            "text": {"body": text, "preview_url": False},
        }
        body = await self._graph("POST", "messages", "send", json=payload)
        try:
            return str(body["messages"][0]["id"])
        except (KeyError, IndexError, TypeError):
            raise PlatformError("whatsapp send: answer without a message id") from None

    async def send_buttons(self, to: str, text: str, buttons: list[Button]) -> str:
        """Send ``text`` with reply buttons; returns the new message id."""
        if (
            not 1 <= len(buttons) <= MAX_BUTTONS
            or len(text) > MAX_BUTTON_BODY
            or any(len(b.label) > MAX_BUTTON_TITLE or len(b.data) > 256 for b in buttons)
        ):
            raise ButtonsRefused("whatsapp: more than reply buttons can show")
        payload: OutboundMessage = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": to,
            "type": "interactive",
            "interactive": {
                "type": "button",
                "body": {"text": text},
                "action": {
                    "buttons": [
                        {"type": "reply", "reply": {"id": b.data, "title": b.label}}
                        for b in buttons
                    ]
                },
            },
        }
        body = await self._graph("POST", "messages", "send", json=payload)
        try:
            return str(body["messages"][0]["id"])
        except (KeyError, IndexError, TypeError):
            raise PlatformError("whatsapp send: answer without a message id") from None

    async def whoami(self) -> str:
        info = await self.check()
        return str(info.get("verified_name") or info.get("display_phone_number") or "the number")

    async def check(self) -> PhoneNumber:
        """Read the phone number's details: proves token and number id work."""
        return await self._graph(
            "GET", "", "check", params={"fields": "display_phone_number,verified_name"}
        )

    @overload
    async def _graph(
        self,
        method: str,
        edge: str,
        what: Literal["send"],
        *,
        json: OutboundMessage,
        params: None = None,
        path: None = None,
    ) -> SendAnswer: ...

    @overload
    async def _graph(
        self,
        method: str,
        edge: str,
        what: Literal["media"],
        *,
        json: None = None,
        params: None = None,
        path: str,
    ) -> MediaInfo: ...

    @overload
    async def _graph(
        self,
        method: str,
        edge: str,
        what: Literal["check"],
        *,
        json: None = None,
        params: dict[str, str],
        path: None = None,
    ) -> PhoneNumber: ...

    async def _graph(
        self,
        method: str,
        edge: str,
        what: str,
        *,
        json: OutboundMessage | None = None,
        params: dict[str, str] | None = None,
        path: str | None = None,
    ) -> SendAnswer | MediaInfo | PhoneNumber:
        """Call the Graph API under the phone number (``edge``), or at ``path``;
        the answer is the one of the call ``what`` names (its fields still
        checked where read)."""
        if path is None:
            number = str(self.config.phone_number_id)
            path = f"{number}/{edge}" if edge else number
        url = f"{self.config.api_base_url.rstrip('/')}/{path}"
        headers = {"Authorization": f"Bearer {self.config.access_token}"}
        response = await send_request(
            self._client,
            method,
            url,
            what=f"whatsapp {what}",
            request_timeout=self.request_timeout,
            json=json,
            params=params,
            headers=headers,
        )
        try:
            body = response.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        if response.status_code < 400 and "error" not in body:
            return cast(SendAnswer | MediaInfo | PhoneNumber, body)
        found = body.get("error")
        error: GraphError = cast(GraphError, found) if isinstance(found, dict) else {}
        code = error.get("code")
        message = redact(str(error.get("message") or f"HTTP {response.status_code}"))
        if response.status_code == 429 or code in _RATE_CODES:
            retry_after = parse_retry_after(response.headers.get("retry-after"))
            if retry_after is None:
                retry_after = _DEFAULT_RETRY_AFTER
            raise RateLimited(retry_after, f"whatsapp {what}: {message}")
        if response.status_code == 401 or code == 190:
            raise TokenRejected(
                "whatsapp: the access token was rejected; check platforms.whatsapp.access_token"
            )
        suffix = f" (code {code})" if code is not None else ""
        raise PlatformError(f"whatsapp {what}: {message}{suffix}")


def _location(location: WebhookLocation) -> str:
    """A shared location as a line the agent can read."""
    where = ", ".join(
        value for key in ("name", "address") if isinstance(value := location.get(key), str)
    )
    lat, lon = location.get("latitude"), location.get("longitude")
    point = f"{lat}, {lon}" if isinstance(lat, int | float) and isinstance(lon, int | float) else ""
    text = " ".join(part for part in (where, f"({point})" if point and where else point) if part)
    return f"📍 My location: {text}" if text else "📍 My location (without coordinates)"


_Item = TypeVar("_Item", bound=Mapping[str, object])


def _dicts(value: list[_Item] | None) -> list[_Item]:
    """The dict items of a JSON list (webhook payloads are not trusted to be
    well-formed, even when signed)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


class WhatsAppMessenger(SendOnlyMessenger):
    """Sending to one WhatsApp user. Messages cannot be edited or deleted,
    and there is no typing indicator: the Cloud API only shows one tied to
    an inbound message id."""

    platform = "whatsapp"
    capabilities = WHATSAPP_CAPABILITIES
    _adapter: WhatsAppAdapter

    async def send_buttons(self, text: str, buttons: Sequence[Button]) -> str:
        return await self._adapter.send_buttons(self.chat_id, text, list(buttons))

    async def close_buttons(self, message_id: str, text: str) -> None:
        # Sent messages stay as they are: the outcome is a message of its own.
        await self.send(text)
