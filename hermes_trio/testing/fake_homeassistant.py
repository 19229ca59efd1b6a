"""A fake Home Assistant REST API, and the webhook call HA would make.

    async with open_fake_homeassistant() as fake:
        config = HomeAssistantConfig(url=fake.base_url, token=fake.token)
        adapter = HomeAssistantAdapter(config, client, webhook_port=0)
        ...
        await fake.post_message(adapter.webhook_url, "lights on", conversation_id="kitchen")
        assert fake.replies("kitchen") == ["Done."]

Implements the REST endpoints the adapter uses, with HA's answers: ``GET
/api/`` (``{"message": "API running."}``), ``POST /api/events/<type>``
(``{"message": "Event <type> fired."}``), ``POST /api/services/<domain>/
<service>`` (a list of changed states); a wrong bearer token is 401
``401: Unauthorized``. ``fail_next`` injects an error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import trio

from ..platforms.homeassistant.api_types import ApiMessage, WebhookMessage
from .fake_http import FakeRequest, FakeResponse, serve_http

__all__ = ["FakeHomeAssistant", "HAEvent", "HAServiceCall", "open_fake_homeassistant"]


@dataclass
class HAEvent:
    event_type: str
    data: dict[str, Any]
    """The event data as posted: any JSON object, its fields set by the
    event type (the adapter's reply event: ``ReplyEvent``)."""
    time: float


@dataclass
class HAServiceCall:
    domain: str
    service: str
    data: dict[str, Any]
    """The service data as posted: any JSON object, its fields set by the
    service (``notify.*``: ``NotifyData``)."""
    time: float


@dataclass
class HACall:
    method: str
    path: str
    time: float
    status: int = 0
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


class FakeHomeAssistant:
    def __init__(self, token: str, *, reply_event: str = "hermes_reply") -> None:
        self.token = token
        self.reply_event = reply_event
        self.base_url = ""
        self.calls: list[HACall] = []
        self.events: list[HAEvent] = []
        self.service_calls: list[HAServiceCall] = []
        self._failures: list[tuple[int, str]] = []
        self._client = httpx.AsyncClient()
        self._changed = trio.Event()

    # -- test helpers ------------------------------------------------------

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds; re-checked after every call
        the bot makes. Put a ``trio.fail_after`` around it."""
        while not predicate():
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def replies(self, conversation_id: str | None = None) -> list[str]:
        """Texts of reply events (optionally for one conversation)."""
        return [
            str(e.data.get("text"))
            for e in self.events
            if e.event_type == self.reply_event
            and (conversation_id is None or e.data.get("conversation_id") == conversation_id)
        ]

    def notifications(self, service: str | None = None) -> list[str]:
        """Messages sent through ``notify.<service>``."""
        return [
            str(c.data.get("message"))
            for c in self.service_calls
            if c.domain == "notify" and (service is None or c.service == service)
        ]

    def fail_next(self, status: int, text: str = "") -> None:
        self._failures.append((status, text))

    async def post_message(
        self,
        webhook_url: str,
        text: str,
        *,
        conversation_id: str | None = "default",
        user_id: str | None = None,
        user_name: str | None = None,
        secret: str | None = None,
    ) -> httpx.Response:
        """What HA's ``rest_command`` sends to the adapter (bearer: ``secret``,
        by default the HA token, which the adapter also falls back to)."""
        body: WebhookMessage = {"text": text}
        if conversation_id is not None:
            body["conversation_id"] = conversation_id
        if user_id is not None:
            body["user_id"] = user_id
        if user_name is not None:
            body["user_name"] = user_name
        headers = {"Authorization": f"Bearer {self.token if secret is None else secret}"}
        return await self._client.post(webhook_url, json=body, headers=headers)

    # -- REST API ----------------------------------------------------------

    async def handle(self, request: FakeRequest) -> FakeResponse:
        body = request.json_or_none()
        call = HACall(
            request.method, request.path, trio.current_time(), body=body, headers=request.headers
        )
        self.calls.append(call)
        response = self._answer(request, body, call.time)
        call.status = response.status
        self._notify()
        return response

    def _answer(self, request: FakeRequest, body: Any, now: float) -> FakeResponse:
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return FakeResponse.text("401: Unauthorized", 401)
        if self._failures:
            status, text = self._failures.pop(0)
            return FakeResponse.text(text or f"{status}: error", status)
        parts = request.path.strip("/").split("/")
        if request.method == "GET" and parts == ["api"]:
            return FakeResponse.json(ApiMessage(message="API running."))
        if body is not None and not isinstance(body, dict):
            return FakeResponse.json({"message": "Event data should be a JSON object"}, 400)
        data = body or {}
        if request.method == "POST" and len(parts) == 3 and parts[:2] == ["api", "events"]:
            self.events.append(HAEvent(parts[2], data, now))
            return FakeResponse.json(ApiMessage(message=f"Event {parts[2]} fired."))
        if request.method == "POST" and len(parts) == 4 and parts[:2] == ["api", "services"]:
            self.service_calls.append(HAServiceCall(parts[2], parts[3], data, now))
            return FakeResponse.json([])
        return FakeResponse.text("404: Not Found", 404)


@asynccontextmanager
async def open_fake_homeassistant(
    token: str = "fake-ha-long-lived-token",
    *,
    reply_event: str = "hermes_reply",
    host: str = "127.0.0.1",
    port: int = 0,
) -> AsyncIterator[FakeHomeAssistant]:
    """Run a fake HA; ``fake.base_url`` is the ``url`` to configure."""
    fake = FakeHomeAssistant(token, reply_event=reply_event)
    async with fake._client, serve_http(fake.handle, host=host, port=port) as url:
        fake.base_url = url
        yield fake
