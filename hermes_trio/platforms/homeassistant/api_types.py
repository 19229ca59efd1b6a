"""The Home Assistant objects hermes-trio sends and reads, as TypedDicts:
the REST API's (developers.home-assistant.io, ``docs/api/rest``: ``GET
/api/``, ``POST /api/events/<event_type>``, ``POST
/api/services/<domain>/<service>``) as the adapter uses them, and the
adapter's own webhook contract, which HA's ``rest_command`` calls
(``adapter.py`` documents it).

Shared by the adapter (``adapter.py``) and the fake
(``testing/fake_homeassistant.py``). A webhook body is checked field by
field where it is read: the types say what the contract promises, not what
a body proves.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

__all__ = ["ApiMessage", "NotifyData", "ReplyEvent", "WebhookAnswer", "WebhookMessage"]


class WebhookMessage(TypedDict):
    """The body HA's ``rest_command`` posts to the adapter's ``/hermes``:
    only ``text`` is required; the chat is ``conversation_id``, else
    ``user_id``, else ``"homeassistant"``."""

    text: str
    conversation_id: NotRequired[str]
    user_id: NotRequired[str]
    user_name: NotRequired[str]
    message_id: NotRequired[str]


class WebhookAnswer(TypedDict):
    """What the adapter's webhook answers: ``ok``, and why not (``error``)
    or that the sender is not allowed (``ignored``)."""

    ok: bool
    error: NotRequired[str]
    ignored: NotRequired[bool]


class ReplyEvent(TypedDict):
    """The event data of an answer fired as ``POST /api/events/<reply_event>``
    (``hermes_reply`` by default); automations trigger on it."""

    conversation_id: str
    text: str
    message_id: str


class NotifyData(TypedDict):
    """The service data of ``POST /api/services/notify/<service>``."""

    message: str
    title: NotRequired[str]


class ApiMessage(TypedDict):
    """What ``GET /api/`` (``"API running."``) and ``POST /api/events/...``
    (``"Event <type> fired."``) answer."""

    message: str
