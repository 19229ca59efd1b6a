"""A fake WhatsApp Cloud API (Graph ``/messages``) and a webhook sender.

    async with open_fake_whatsapp() as fake:
        config = WhatsAppConfig(api_base_url=fake.base_url, access_token=fake.access_token,
                                phone_number_id=fake.phone_number_id,
                                app_secret=fake.app_secret, verify_token=fake.verify_token,
                                webhook_port=0)
        ...
        await fake.deliver_text(adapter.webhook_url, "15551234567", "hi")  # signed like Meta
        assert fake.texts_to("15551234567") == ["Hello!"]
        await fake.deliver_media(adapter.webhook_url, "15551234567", "image",
                                 jpeg_bytes, "image/jpeg", caption="what is this?")

The Graph side checks the bearer token (401, OAuthException code 190), the
phone number id, and the message body (text type, 1-4096 characters; or an
``interactive`` reply-button message: 1-3 buttons of type ``reply``, ids of
1-256 and titles of 1-20 characters, unique, a body text of at most 1024
characters, else 400 code 131009), and
can rate-limit (``send_limit`` per ``send_window`` seconds → 429, code
130429). ``fail_next`` injects any error.

Media a user sends is kept by the fake (``add_media``, or ``deliver_media``
which also delivers the message). As on the Cloud API, the webhook carries
only the media id; ``GET /{version}/{media id}`` (bearer token) answers
``{"messaging_product", "url", "mime_type", "sha256", "file_size", "id"}``
(``file_size`` a string, like Meta's), and ``GET url`` with the same bearer
token gives the bytes (401 without it, 404 for an unknown id). ``downloads``
lists the media ids whose bytes were fetched. ``press_button`` delivers
the ``interactive.button_reply`` (with ``context.id`` naming the message)
a user's press on a reply button makes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import httpx
import trio

from ..platforms.whatsapp import api_types as wa
from .fake_http import FakeRequest, FakeResponse, serve_http

__all__ = [
    "FakeWhatsApp",
    "WhatsAppCall",
    "WhatsAppSent",
    "media_message_payload",
    "message_payload",
    "open_fake_whatsapp",
    "sign",
    "text_message_payload",
]

API_VERSION = "v21.0"
# Where the fake serves media bytes (Meta: https://lookaside.fbsbx.com/whatsapp_business/attachments/).
MEDIA_PATH = "/whatsapp_business/attachments/"


def sign(body: bytes, app_secret: str) -> str:
    """``X-Hub-Signature-256`` for ``body``."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def message_payload(
    from_: str,
    kind: str,
    body: Any,
    *,
    message_id: str,
    name: str = "Test User",
    phone_number_id: str = "100200300",
    display_number: str = "15550001111",
    timestamp: int = 1_700_000_000,
) -> wa.Webhook:
    """A webhook notification for one incoming message of type ``kind``
    (``body`` is the object named after it), shaped like Meta's."""
    # ``kind`` names the field that holds ``body``: built as JSON, typed here.
    message = cast(
        wa.WebhookMessage,
        {"from": from_, "id": message_id, "timestamp": str(timestamp), "type": kind, kind: body},
    )
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "WABA_ID",
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {
                                "display_phone_number": display_number,
                                "phone_number_id": phone_number_id,
                            },
                            "contacts": [{"profile": {"name": name}, "wa_id": from_}],
                            "messages": [message],
                        },
                    }
                ],
            }
        ],
    }


def text_message_payload(from_: str, text: str, *, message_id: str, **options: Any) -> wa.Webhook:
    """A webhook notification for one incoming text message, shaped like Meta's."""
    return message_payload(from_, "text", {"body": text}, message_id=message_id, **options)


def media_message_payload(
    from_: str,
    kind: str,
    media_id: str,
    mime_type: str,
    sha256: str,
    *,
    message_id: str,
    url: str | None = None,
    caption: str | None = None,
    filename: str | None = None,
    voice: bool | None = None,
    **options: Any,
) -> wa.Webhook:
    """A webhook notification for an image, sticker, audio (``voice``: a
    voice note), video or document message, shaped like Meta's."""
    media: wa.WebhookMedia = {"mime_type": mime_type, "sha256": sha256, "id": media_id}
    if url is not None:
        media["url"] = url
    if caption is not None:
        media["caption"] = caption
    if filename is not None:
        media["filename"] = filename
    if voice is not None:
        media["voice"] = voice
    return message_payload(from_, kind, media, message_id=message_id, **options)


@dataclass
class WhatsAppCall:
    method: str
    path: str
    body: Any
    time: float
    status: int = 0
    response: Any = None


@dataclass
class WhatsAppSent:
    message_id: str
    to: str
    text: str
    time: float
    payload: wa.OutboundMessage
    """The body as sent (checked by the fake before it counts as sent)."""


@dataclass
class _Media:
    data: bytes
    mime_type: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass
class _Failure:
    status: int
    code: int
    message: str
    headers: list[tuple[str, str]]
    times: int


class FakeWhatsApp:
    def __init__(
        self,
        *,
        access_token: str,
        phone_number_id: str,
        app_secret: str,
        verify_token: str,
        send_limit: int | None = None,
        send_window: float = 1.0,
    ) -> None:
        self.access_token = access_token
        self.phone_number_id = phone_number_id
        self.app_secret = app_secret
        self.verify_token = verify_token
        self.send_limit = send_limit
        self.send_window = send_window
        self.server_url = ""
        self.calls: list[WhatsAppCall] = []
        self.sent: list[WhatsAppSent] = []
        self._changed = trio.Event()
        self._send_times: deque[float] = deque()
        self._failures: list[_Failure] = []
        self._next_id = 1
        self._next_inbound_id = 1
        self._next_media_id = 1
        self.media: dict[str, _Media] = {}
        self.downloads: list[str] = []
        self._client = httpx.AsyncClient()

    @property
    def base_url(self) -> str:
        """The ``api_base_url`` to configure (includes the API version)."""
        return f"{self.server_url}/{API_VERSION}"

    # -- test helpers ------------------------------------------------------

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds; re-checked after every call
        the bot makes. Put a ``trio.fail_after`` around it."""
        while not predicate():
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def texts_to(self, to: str) -> list[str]:
        return [s.text for s in self.sent if s.to == to]

    def fail_next(
        self,
        status: int,
        message: str,
        *,
        code: int = 1,
        headers: list[tuple[str, str]] | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` sends with this Graph error."""
        self._failures.append(_Failure(status, code, message, headers or [], times))

    async def post_webhook(
        self,
        webhook_url: str,
        body: bytes | wa.Webhook | dict[str, Any],
        *,
        signature: str | None = "sign",
    ) -> httpx.Response:
        """POST ``body`` to the adapter's webhook: a notification, or any
        JSON object (a test may send what Meta never would), or raw bytes.
        ``signature="sign"`` signs it with the app secret; ``None`` sends no
        signature header; any other string is sent as is."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if signature == "sign":
            headers["X-Hub-Signature-256"] = sign(raw, self.app_secret)
        elif signature is not None:
            headers["X-Hub-Signature-256"] = signature
        return await self._client.post(webhook_url, content=raw, headers=headers)

    async def deliver_text(
        self,
        webhook_url: str,
        from_: str,
        text: str,
        *,
        name: str = "Test User",
        message_id: str | None = None,
    ) -> httpx.Response:
        """Deliver an incoming text message the way Meta does (signed)."""
        if message_id is None:
            message_id = self._inbound_id()
        payload = text_message_payload(
            from_, text, message_id=message_id, name=name, phone_number_id=self.phone_number_id
        )
        return await self.post_webhook(webhook_url, payload)

    def add_media(self, data: bytes, mime_type: str) -> str:
        """Keep a file a user sends; returns its media id."""
        media_id = f"{1037543291543600 + self._next_media_id}"
        self._next_media_id += 1
        self.media[media_id] = _Media(data, mime_type)
        return media_id

    def media_url(self, media_id: str) -> str:
        return f"{self.server_url}{MEDIA_PATH}?mid={media_id}&ext=1700000300&hash=ATu"

    async def deliver_media(
        self,
        webhook_url: str,
        from_: str,
        kind: str,
        data: bytes,
        mime_type: str,
        *,
        caption: str | None = None,
        filename: str | None = None,
        voice: bool | None = None,
        name: str = "Test User",
        message_id: str | None = None,
    ) -> httpx.Response:
        """Deliver an incoming ``kind`` message (image, sticker, audio, video,
        document) holding ``data``, the way Meta does (signed)."""
        media_id = self.add_media(data, mime_type)
        payload = media_message_payload(
            from_,
            kind,
            media_id,
            mime_type,
            self.media[media_id].sha256,
            url=self.media_url(media_id),
            caption=caption,
            filename=filename,
            voice=voice,
            message_id=message_id or self._inbound_id(),
            name=name,
            phone_number_id=self.phone_number_id,
        )
        return await self.post_webhook(webhook_url, payload)

    async def deliver_message(
        self,
        webhook_url: str,
        from_: str,
        kind: str,
        body: Any,
        *,
        message_id: str | None = None,
    ) -> httpx.Response:
        """Deliver an incoming message of any other ``kind`` (``location``,
        ``contacts``, ``interactive``, ``reaction``…) with its object ``body``."""
        payload = message_payload(
            from_,
            kind,
            body,
            message_id=message_id or self._inbound_id(),
            phone_number_id=self.phone_number_id,
        )
        return await self.post_webhook(webhook_url, payload)

    async def press_button(
        self, webhook_url: str, from_: str, sent: WhatsAppSent, title: str
    ) -> httpx.Response:
        """Deliver the ``interactive.button_reply`` a user's press on the
        reply button titled ``title`` of the sent message makes."""
        found = [button_id for button_id, shown in buttons_of(sent) if shown == title]
        assert found, f"no button {title!r} on {sent.message_id}"
        reply: wa.WebhookInteractive = {
            "type": "button_reply",
            "button_reply": {"id": found[0], "title": title},
        }
        payload = message_payload(
            from_,
            "interactive",
            reply,
            message_id=self._inbound_id(),
            phone_number_id=self.phone_number_id,
        )
        message = payload["entry"][0]["changes"][0]["value"]["messages"][0]
        message["context"] = {"from": "15550001111", "id": sent.message_id}
        return await self.post_webhook(webhook_url, payload)

    def _inbound_id(self) -> str:
        message_id = f"wamid.IN{self._next_inbound_id}"
        self._next_inbound_id += 1
        return message_id

    async def verify(
        self, webhook_url: str, *, verify_token: str | None = None, challenge: str = "1158201444"
    ) -> httpx.Response:
        """The subscription check Meta makes when the webhook is configured."""
        params = {
            "hub.mode": "subscribe",
            "hub.verify_token": self.verify_token if verify_token is None else verify_token,
            "hub.challenge": challenge,
        }
        return await self._client.get(webhook_url, params=params)

    # -- Graph API ---------------------------------------------------------

    async def handle(self, request: FakeRequest) -> FakeResponse:
        body = request.json_or_none()
        call = WhatsAppCall(request.method, request.path, body, trio.current_time())
        self.calls.append(call)
        if request.path == MEDIA_PATH:
            download = self._download(request)
            call.status = download.status
            return download
        status, response, headers = self._answer(request, body)
        call.status, call.response = status, response
        self._notify()
        return FakeResponse.json(response, status, headers)

    def _answer(self, request: FakeRequest, body: Any) -> tuple[int, Any, list[tuple[str, str]]]:
        auth = request.headers.get("authorization", "")
        if auth != f"Bearer {self.access_token}":
            error = _graph_error("Invalid OAuth access token - Cannot parse access token", 190)
            return 401, error, []
        if request.method == "GET" and request.path == f"/{API_VERSION}/{self.phone_number_id}":
            details: wa.PhoneNumber = {
                "display_phone_number": "+1 555-000-1111",
                "verified_name": "Hermes Test",
                "id": self.phone_number_id,
            }
            return 200, details, []
        media_id = request.path.removeprefix(f"/{API_VERSION}/")
        if request.method == "GET" and media_id in self.media:
            return self._media_info(media_id, request.query.get("phone_number_id"))
        expected = f"/{API_VERSION}/{self.phone_number_id}/messages"
        if request.method != "POST" or request.path != expected:
            segments = request.path.strip("/").split("/")
            object_id = segments[1] if len(segments) > 1 else ""
            message = (
                f"Unsupported {request.method.lower()} request. "
                f"Object with ID '{object_id}' does not exist"
            )
            return 400, _graph_error(message, 100, "GraphMethodException"), []
        if self._failures:
            failure = self._failures[0]
            failure.times -= 1
            if failure.times <= 0:
                self._failures.pop(0)
            return failure.status, _graph_error(failure.message, failure.code), failure.headers
        if not isinstance(body, dict) or body.get("messaging_product") != "whatsapp":
            return 400, _graph_error("(#100) The parameter messaging_product is required.", 100), []
        to = body.get("to")
        text = (body.get("text") or {}).get("body") if isinstance(body.get("text"), dict) else None
        if not to:
            return 400, _graph_error("(#100) The parameter to is required.", 100), []
        if body.get("type") == "interactive":
            problem, text = _interactive_problem(body.get("interactive"))
            if problem:
                return (
                    400,
                    _graph_error(f"(#131009) Parameter value is not valid: {problem}", 131009),
                    [],
                )
        elif body.get("type", "text") != "text" or not isinstance(text, str) or not text:
            return 400, _graph_error("(#100) Param text['body'] is required.", 100), []
        assert isinstance(text, str)
        if len(text) > 4096:
            error = _graph_error(
                "(#100) Param text['body'] must be at most 4096 characters long.", 100
            )
            return 400, error, []
        now = trio.current_time()
        if self.send_limit is not None:
            while self._send_times and self._send_times[0] <= now - self.send_window:
                self._send_times.popleft()
            if len(self._send_times) >= self.send_limit:
                return 429, _graph_error("(#130429) Rate limit hit", 130429), []
            self._send_times.append(now)
        message_id = f"wamid.OUT{self._next_id}"
        self._next_id += 1
        # Checked above: a text or reply-button message.
        sent = cast(wa.OutboundMessage, body)
        self.sent.append(WhatsAppSent(message_id, str(to), text, now, sent))
        answer: wa.SendAnswer = {
            "messaging_product": "whatsapp",
            "contacts": [{"input": to, "wa_id": to}],
            "messages": [{"id": message_id}],
        }
        return 200, answer, []

    def _media_info(
        self, media_id: str, phone_number_id: str | None
    ) -> tuple[int, Any, list[tuple[str, str]]]:
        if phone_number_id is not None and phone_number_id != self.phone_number_id:
            message = "(#100) The media does not belong to this phone number."
            return 400, _graph_error(message, 100), []
        media = self.media[media_id]
        info: wa.MediaInfo = {
            "messaging_product": "whatsapp",
            "url": self.media_url(media_id),
            "mime_type": media.mime_type,
            "sha256": media.sha256,
            "file_size": str(len(media.data)),
            "id": media_id,
        }
        return 200, info, []

    def _download(self, request: FakeRequest) -> FakeResponse:
        if request.method != "GET":
            return FakeResponse.text("method not allowed", 405)
        if request.headers.get("authorization", "") != f"Bearer {self.access_token}":
            return FakeResponse.text("unauthorized", 401)
        media = self.media.get(request.query.get("mid", ""))
        if media is None:
            return FakeResponse.text("not found", 404)
        self.downloads.append(request.query["mid"])
        return FakeResponse(200, media.data, [("content-type", media.mime_type)])


def _interactive_problem(interactive: Any) -> tuple[str, str]:
    """What Meta would refuse in an ``interactive`` reply-button message
    (empty when nothing), and its body text."""
    if not isinstance(interactive, dict) or interactive.get("type") != "button":
        return "interactive.type must be one of {button, list, ...}", ""
    body = interactive.get("body")
    text = body.get("text") if isinstance(body, dict) else None
    if not isinstance(text, str) or not text:
        return "interactive.body.text is required", ""
    if len(text) > 1024:
        return "interactive.body.text must be at most 1024 characters", text
    action = interactive.get("action")
    buttons = action.get("buttons") if isinstance(action, dict) else None
    if not isinstance(buttons, list) or not 1 <= len(buttons) <= 3:
        return "interactive.action.buttons must hold 1 to 3 buttons", text
    ids: set[str] = set()
    titles: set[str] = set()
    for button in buttons:
        reply = button.get("reply") if isinstance(button, dict) else None
        if button.get("type") != "reply" or not isinstance(reply, dict):
            return "a button must be of type reply", text
        button_id, title = reply.get("id"), reply.get("title")
        if not isinstance(button_id, str) or not 1 <= len(button_id) <= 256:
            return "a button id must be 1 to 256 characters", text
        if not isinstance(title, str) or not 1 <= len(title) <= 20:
            return "a button title must be 1 to 20 characters", text
        if button_id in ids or title in titles:
            return "button ids and titles must be unique", text
        ids.add(button_id)
        titles.add(title)
    return "", text


def buttons_of(sent: WhatsAppSent) -> list[tuple[str, str]]:
    """``(id, title)`` of the reply buttons of a sent message (none: [])."""
    interactive = sent.payload.get("interactive")
    if not isinstance(interactive, dict):
        return []
    return [(b["reply"]["id"], b["reply"]["title"]) for b in interactive["action"]["buttons"]]


def _graph_error(message: str, code: int, type_: str = "OAuthException") -> wa.GraphErrorAnswer:
    return {"error": {"message": message, "type": type_, "code": code, "fbtrace_id": "AbCdEfGhIjK"}}


@asynccontextmanager
async def open_fake_whatsapp(
    *,
    access_token: str = "EAAG-fake-access-token",
    phone_number_id: str = "100200300",
    app_secret: str = "fake-app-secret",
    verify_token: str = "fake-verify-token",
    send_limit: int | None = None,
    send_window: float = 1.0,
    host: str = "127.0.0.1",
    port: int = 0,
) -> AsyncIterator[FakeWhatsApp]:
    """Run a fake Graph API; ``fake.base_url`` is the ``api_base_url`` to use."""
    fake = FakeWhatsApp(
        access_token=access_token,
        phone_number_id=phone_number_id,
        app_secret=app_secret,
        verify_token=verify_token,
        send_limit=send_limit,
        send_window=send_window,
    )
    async with fake._client, serve_http(fake.handle, host=host, port=port) as url:
        fake.server_url = url
        yield fake
