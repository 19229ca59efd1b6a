"""The Discord objects hermes-trio sends and reads, as TypedDicts written
after Discord's own reference (API v10): the REST objects after the OpenAPI
spec (discord/discord-api-spec, ``specs/openapi.json``: ``MessageResponse``,
``UserResponse``, ``MessageCreateRequest``…), the gateway payloads and the
interaction after the developer docs (``events/gateway-events``,
``interactions/receiving-and-responding``).

Each TypedDict declares the fields the adapter or the fake
(``testing/fake_discord.py``) uses, with the reference's types and
required-ness; Discord sends more, and a TypedDict lets the rest through.
What comes from Discord is still checked field by field where it is read
(``messages.py``, ``gateway.py``): the types say what Discord promises, not
what a payload proves.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "ActionRow",
    "AllowedMentions",
    "Attachment",
    "Button",
    "ComponentData",
    "Embed",
    "ErrorBody",
    "ErrorDetails",
    "FieldError",
    "GatewayBot",
    "GatewayPayload",
    "GuildMember",
    "Heartbeat",
    "Hello",
    "Identify",
    "IdentifyData",
    "IdentifyProperties",
    "InnerErrors",
    "Interaction",
    "InteractionCallback",
    "InteractionCallbackData",
    "Message",
    "MessageCreate",
    "MessageCreateParams",
    "MessageEditParams",
    "PartialApplication",
    "Ready",
    "Resume",
    "ResumeData",
    "SendPayload",
    "SessionStartLimit",
    "UnavailableGuild",
    "User",
]


# -- users -------------------------------------------------------------------


class User(TypedDict):
    """``UserResponse`` (the fields used here)."""

    id: str
    username: str
    discriminator: str
    global_name: str | None
    bot: NotRequired[bool]


class GuildMember(TypedDict):
    """A guild member: ``user`` is left out in MESSAGE_CREATE's ``member``,
    present in an interaction's."""

    user: NotRequired[User]
    roles: list[str]
    nick: NotRequired[str | None]
    permissions: NotRequired[str]


# -- messages ----------------------------------------------------------------


class Attachment(TypedDict):
    """``MessageAttachmentResponse``."""

    id: str
    filename: str
    size: int
    url: str
    proxy_url: str
    content_type: NotRequired[str]


class Embed(TypedDict, total=False):
    """``MessageEmbedResponse`` (every field optional; hermes-trio sends
    none and reads none)."""

    type: str
    title: str
    description: str
    url: str


class Button(TypedDict):
    """A button component (type 2): ``ButtonComponentForMessageRequest``.
    Link buttons (style 5) have a ``url`` and no ``custom_id``."""

    type: Literal[2]
    style: Literal[1, 2, 3, 4, 5, 6]
    label: NotRequired[str]
    custom_id: NotRequired[str]
    url: NotRequired[str]
    disabled: NotRequired[bool]


class ActionRow(TypedDict):
    """An action row (type 1): ``ActionRowComponentForMessageRequest``, as
    hermes-trio uses it: a row of buttons."""

    type: Literal[1]
    components: list[Button]


class Message(TypedDict):
    """``MessageResponse``: a message as the REST API answers it."""

    id: str
    type: int
    """``MessageType``: 0 DEFAULT, 19 REPLY, the others system messages."""
    channel_id: str
    author: User
    content: str
    timestamp: str
    edited_timestamp: str | None
    tts: bool
    mention_everyone: bool
    mentions: list[User]
    mention_roles: list[str]
    attachments: list[Attachment]
    embeds: list[Embed]
    pinned: bool
    components: list[ActionRow]


class MessageCreate(Message):
    """The MESSAGE_CREATE dispatch's data: a message with the gateway's
    extra fields (``guild_id`` only in a server)."""

    guild_id: NotRequired[str]
    member: NotRequired[GuildMember]


class AllowedMentions(TypedDict, total=False):
    """``MessageAllowedMentionsRequest``."""

    parse: list[Literal["users", "roles", "everyone"]]
    users: list[str]
    roles: list[str]
    replied_user: bool


class MessageCreateParams(TypedDict, total=False):
    """``MessageCreateRequest`` (the body of ``POST /channels/{id}/messages``)."""

    content: str
    allowed_mentions: AllowedMentions
    components: list[ActionRow]
    flags: int


class MessageEditParams(TypedDict, total=False):
    """``MessageEditRequestPartial`` (``PATCH /channels/{id}/messages/{mid}``):
    a field left out stays as it is; ``components: []`` takes them away."""

    content: str
    allowed_mentions: AllowedMentions
    components: list[ActionRow]
    flags: int


# -- interactions --------------------------------------------------------------


class ComponentData(TypedDict):
    """The ``data`` of a MESSAGE_COMPONENT interaction (type 3)."""

    custom_id: str
    component_type: int
    values: NotRequired[list[str]]


class Interaction(TypedDict):
    """The INTERACTION_CREATE dispatch's data, as a button press makes it:
    ``member`` in a server, ``user`` in a DM."""

    id: str
    application_id: str
    type: int
    """``InteractionTypes``: 3 MESSAGE_COMPONENT."""
    data: NotRequired[ComponentData]
    guild_id: NotRequired[str]
    channel_id: NotRequired[str]
    member: NotRequired[GuildMember]
    user: NotRequired[User]
    token: str
    version: Literal[1]
    message: NotRequired[Message]
    locale: NotRequired[str]


class InteractionCallbackData(TypedDict, total=False):
    """The ``data`` of an interaction callback that answers with a message
    (``IncomingWebhookInteractionRequest``) or updates one (type 7)."""

    content: str
    flags: int
    """64: EPHEMERAL, only the presser sees it."""
    allowed_mentions: AllowedMentions
    components: list[ActionRow]


class InteractionCallback(TypedDict):
    """The body of ``POST /interactions/{id}/{token}/callback``
    (``InteractionCallbackTypes``: 4 a reply, 5 deferred reply, 6 deferred
    update, 7 update the message)."""

    type: int
    data: NotRequired[InteractionCallbackData]


# -- REST answers --------------------------------------------------------------


class SessionStartLimit(TypedDict):
    """``GatewayBotSessionStartLimitResponse``."""

    total: int
    remaining: int
    reset_after: int
    max_concurrency: int


class GatewayBot(TypedDict):
    """``GatewayBotResponse`` (``GET /gateway/bot``)."""

    url: str
    shards: int
    session_start_limit: SessionStartLimit


class FieldError(TypedDict):
    """One error of a form field (``Error``; the spec types ``code`` as an
    integer, Discord sends a name such as ``BASE_TYPE_MAX_LENGTH``)."""

    code: str
    message: str


class InnerErrors(TypedDict):
    """``InnerErrors``: the errors of one field."""

    _errors: list[FieldError]


ErrorDetails = dict[str, "ErrorDetails"] | InnerErrors
"""``ErrorDetails``: per field (nested like the request body), its errors."""

# A TypedDict of the functional form: ``global`` is a Python keyword.
ErrorBody = TypedDict(
    "ErrorBody",
    {
        "message": str,
        "code": int,
        "errors": NotRequired[ErrorDetails],
        "retry_after": NotRequired[float],
        "global": NotRequired[bool],
    },
)
"""``ErrorResponse`` and ``RatelimitedResponse``: Discord's error answers
(``errors`` on a form error, ``retry_after`` and ``global`` on a 429)."""


# -- the gateway ---------------------------------------------------------------


class GatewayPayload(TypedDict):
    """A gateway frame (``op``: the opcode, ``d``: its data, ``s`` and ``t``
    only on dispatches, op 0). ``d`` is any JSON value; its shape depends on
    ``op`` and ``t`` (``Hello``, ``Ready``, ``MessageCreate``…)."""

    op: int
    d: NotRequired[Any]
    s: NotRequired[int | None]
    t: NotRequired[str | None]


class Hello(TypedDict):
    """HELLO (op 10) data."""

    heartbeat_interval: float
    """Milliseconds (an integer from Discord)."""


class UnavailableGuild(TypedDict):
    id: str
    unavailable: NotRequired[bool]


class PartialApplication(TypedDict):
    id: str
    flags: int


class Ready(TypedDict):
    """READY dispatch data."""

    v: int
    user: User
    guilds: list[UnavailableGuild]
    session_id: str
    resume_gateway_url: str
    application: PartialApplication


class IdentifyProperties(TypedDict):
    os: str
    browser: str
    device: str


class IdentifyData(TypedDict):
    token: str
    intents: int
    properties: IdentifyProperties


class ResumeData(TypedDict):
    token: str
    session_id: str
    seq: int | None


class Identify(TypedDict):
    """IDENTIFY (op 2)."""

    op: Literal[2]
    d: IdentifyData


class Resume(TypedDict):
    """RESUME (op 6)."""

    op: Literal[6]
    d: ResumeData


class Heartbeat(TypedDict):
    """HEARTBEAT (op 1): ``d`` is the last sequence number, or null."""

    op: Literal[1]
    d: int | None


SendPayload = Identify | Resume | Heartbeat
"""What the client sends over the gateway."""
