"""The WhatsApp Cloud API objects hermes-trio sends and reads, as TypedDicts
written after Meta's reference (WhatsApp Business Platform, Cloud API):
the ``messages`` webhook (``webhooks/reference/messages``: text, media,
button, interactive, location…), the send-message body and its answer
(``POST /{phone number id}/messages``), the media URL answer
(``GET /{media id}``), the phone number fields read at start, and the Graph
API's error answer.

Each TypedDict declares the fields the adapter (``adapter.py``) or the fake
(``testing/fake_whatsapp.py``) uses; Meta sends more, and a TypedDict lets
the rest through. A webhook body is checked field by field where it is read:
the types say what Meta promises, not what a payload proves.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

__all__ = [
    "Contact",
    "ContactProfile",
    "GraphError",
    "GraphErrorAnswer",
    "InteractiveReply",
    "MediaInfo",
    "MessageContext",
    "Metadata",
    "OutboundInteractive",
    "OutboundMessage",
    "PhoneNumber",
    "QuickReplyButton",
    "ReplyButton",
    "SendAnswer",
    "SentContact",
    "SentMessage",
    "TextBody",
    "Webhook",
    "WebhookChange",
    "WebhookEntry",
    "WebhookInteractive",
    "WebhookLocation",
    "WebhookMedia",
    "WebhookMessage",
    "WebhookValue",
]


# -- the messages webhook --------------------------------------------------------


class TextBody(TypedDict):
    """``text`` of a text message (and of a sent one, with ``preview_url``)."""

    body: str
    preview_url: NotRequired[bool]


class WebhookMedia(TypedDict):
    """``image``, ``sticker``, ``audio``, ``video`` or ``document`` of a
    message: the media id to fetch, never the bytes."""

    id: str
    mime_type: str
    sha256: str
    caption: NotRequired[str]
    filename: NotRequired[str]
    """Documents only."""
    voice: NotRequired[bool]
    """Audio only: a voice note."""
    url: NotRequired[str]
    animated: NotRequired[bool]
    """Stickers only."""


class InteractiveReply(TypedDict):
    """A ``button_reply`` or ``list_reply``: the id and title of the button
    or row the user picked."""

    id: str
    title: str
    description: NotRequired[str]
    """List rows only."""


class WebhookInteractive(TypedDict):
    """``interactive`` of a message: the reply to a reply-button or list
    message, under the key ``type`` names."""

    type: Literal["button_reply", "list_reply"]
    button_reply: NotRequired[InteractiveReply]
    list_reply: NotRequired[InteractiveReply]


class QuickReplyButton(TypedDict):
    """``button`` of a message: a quick-reply button of a template pressed."""

    payload: str
    text: str


class WebhookLocation(TypedDict, total=False):
    """``location`` of a message (a pin has no ``name`` or ``address``)."""

    latitude: float
    longitude: float
    name: str
    address: str
    url: str


# The functional form: ``from`` is a Python keyword.
MessageContext = TypedDict("MessageContext", {"from": str, "id": str})
"""``context``: the message this one replies to (``id``) and its sender."""

WebhookMessage = TypedDict(
    "WebhookMessage",
    {
        "from": str,
        "id": str,
        "timestamp": str,
        "type": str,
        "context": NotRequired[MessageContext],
        "text": NotRequired[TextBody],
        "image": NotRequired[WebhookMedia],
        "sticker": NotRequired[WebhookMedia],
        "audio": NotRequired[WebhookMedia],
        "video": NotRequired[WebhookMedia],
        "document": NotRequired[WebhookMedia],
        "interactive": NotRequired[WebhookInteractive],
        "button": NotRequired[QuickReplyButton],
        "location": NotRequired[WebhookLocation],
    },
)
"""One of ``value.messages``: ``from`` is the sender's wa_id, ``type``
names the key that holds the content (``text``, ``image``…; the kinds not
declared here — contacts, order, reaction, system, unsupported — are read
by name, if at all)."""


class ContactProfile(TypedDict):
    name: str


class Contact(TypedDict):
    """One of ``value.contacts``: the sender's profile."""

    profile: ContactProfile
    wa_id: str


class Metadata(TypedDict):
    display_phone_number: str
    phone_number_id: str


class WebhookValue(TypedDict):
    """``value`` of a ``messages`` change (``statuses`` instead of
    ``messages`` for delivery receipts, not read here)."""

    messaging_product: Literal["whatsapp"]
    metadata: Metadata
    contacts: NotRequired[list[Contact]]
    messages: NotRequired[list[WebhookMessage]]


class WebhookChange(TypedDict):
    field: str
    value: WebhookValue


class WebhookEntry(TypedDict):
    id: str
    """The WhatsApp Business Account id."""
    changes: list[WebhookChange]


class Webhook(TypedDict):
    """The body of a webhook notification (``POST /webhook``)."""

    object: Literal["whatsapp_business_account"]
    entry: list[WebhookEntry]


# -- sending ----------------------------------------------------------------------


class ReplyButtonTitle(TypedDict):
    id: str
    title: str


class ReplyButton(TypedDict):
    type: Literal["reply"]
    reply: ReplyButtonTitle


class InteractiveBody(TypedDict):
    text: str


class InteractiveAction(TypedDict):
    buttons: list[ReplyButton]


class OutboundInteractive(TypedDict):
    """``interactive`` of a sent reply-button message."""

    type: Literal["button"]
    body: InteractiveBody
    action: InteractiveAction


class OutboundMessage(TypedDict):
    """The body of ``POST /{phone number id}/messages``: a text message or an
    interactive one."""

    messaging_product: Literal["whatsapp"]
    recipient_type: NotRequired[Literal["individual"]]
    to: str
    type: NotRequired[Literal["text", "interactive"]]
    """``text`` when left out."""
    text: NotRequired[TextBody]
    interactive: NotRequired[OutboundInteractive]


class SentContact(TypedDict):
    input: str
    wa_id: str


class SentMessage(TypedDict):
    id: str


class SendAnswer(TypedDict):
    """What ``POST /{phone number id}/messages`` answers."""

    messaging_product: Literal["whatsapp"]
    contacts: list[SentContact]
    messages: list[SentMessage]


class MediaInfo(TypedDict):
    """What ``GET /{media id}`` answers: a short-lived download URL."""

    messaging_product: Literal["whatsapp"]
    url: str
    mime_type: str
    sha256: str
    file_size: str
    id: str


class PhoneNumber(TypedDict, total=False):
    """``GET /{phone number id}?fields=display_phone_number,verified_name``:
    the fields asked for, and ``id``."""

    id: str
    display_phone_number: str
    verified_name: str


class GraphError(TypedDict, total=False):
    """The Graph API's ``error`` object."""

    message: str
    type: str
    code: int
    error_subcode: int
    fbtrace_id: str


class GraphErrorAnswer(TypedDict):
    error: GraphError
