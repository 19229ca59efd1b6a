"""The Slack objects the project uses, as ``TypedDict``s written after Slack's
own reference: the Web API methods' arguments and answers (slackapi's
OpenAPI spec, ``web-api/slack_web_openapi_v2.json``, and, for the streaming
methods it does not hold yet, docs.slack.dev/reference/methods), the Block
Kit blocks the bot writes, the Events API ``message`` / ``app_mention``
events, the ``block_actions`` payload of a button press, and the Socket
Mode envelopes that carry them. The adapter (``adapter.py``, ``events.py``,
``send.py``, ``api.py``) and the fake Slack (``testing/fake_slack.py``)
share them, so both hold to one contract.

A field Slack marks optional is ``NotRequired``; only the fields the project
reads or writes (and those next to them in the reference that it may meet)
are written out. These are shapes, not checks: JSON from the network keeps
being checked field by field where it is read (a ``TypedDict`` is a plain
dict at run time). The module is evaluated without ``from __future__
import annotations``, so ``__required_keys__`` tells the required fields
apart at run time too.
"""

from dataclasses import dataclass
from typing import Generic, Literal, NotRequired, TypedDict, TypeVar

__all__ = [
    "APPEND_STREAM",
    "AUTH_TEST",
    "CONNECTIONS_OPEN",
    "DELETE",
    "POST_EPHEMERAL",
    "POST_MESSAGE",
    "START_STREAM",
    "STOP_STREAM",
    "UPDATE",
    "Ack",
    "ActionsBlock",
    "AppMentionEvent",
    "AppendStreamParams",
    "AuthTestResponse",
    "Block",
    "BlockActionsPayload",
    "ButtonAction",
    "ButtonElement",
    "ChannelRef",
    "ChannelType",
    "ConnectionInfo",
    "ConnectionsOpenResponse",
    "DebugInfo",
    "DeleteParams",
    "DeleteResponse",
    "DisconnectEnvelope",
    "ErrorResponse",
    "EventCallback",
    "EventsApiEnvelope",
    "File",
    "HelloEnvelope",
    "InteractiveEnvelope",
    "Message",
    "MessageContainer",
    "MessageEvent",
    "MessageRef",
    "MrkdwnText",
    "NoParams",
    "OtherBlock",
    "PlainText",
    "PostEphemeralParams",
    "PostEphemeralResponse",
    "PostMessageParams",
    "PostMessageResponse",
    "SectionBlock",
    "SocketModeEnvelope",
    "SocketModeMessage",
    "StartStreamParams",
    "StartStreamResponse",
    "StopStreamParams",
    "StreamResponse",
    "TeamRef",
    "UpdateParams",
    "UpdateResponse",
    "User",
    "WebApiCall",
    "WebApiMethod",
]

# -- Block Kit (the blocks the bot writes) -------------------------------------


class PlainText(TypedDict):
    """A ``plain_text`` text object."""

    type: Literal["plain_text"]
    text: str
    emoji: NotRequired[bool]


class MrkdwnText(TypedDict):
    """A ``mrkdwn`` text object."""

    type: Literal["mrkdwn"]
    text: str
    verbatim: NotRequired[bool]


class ButtonElement(TypedDict):
    """A ``button`` element: ``text`` at most 75 characters, ``action_id``
    at most 255 (unique in its block), ``value`` at most 2000."""

    type: Literal["button"]
    text: PlainText
    action_id: NotRequired[str]
    value: NotRequired[str]
    style: NotRequired[Literal["primary", "danger"]]
    url: NotRequired[str]
    accessibility_label: NotRequired[str]


class SectionBlock(TypedDict):
    """A ``section`` block; its text object holds 1–3000 characters."""

    type: Literal["section"]
    text: NotRequired[PlainText | MrkdwnText]
    block_id: NotRequired[str]


class ActionsBlock(TypedDict):
    """An ``actions`` block: 1–25 interactive elements (the bot writes only
    buttons)."""

    type: Literal["actions"]
    elements: list[ButtonElement]
    block_id: NotRequired[str]


class OtherBlock(TypedDict):
    """A block of the other layout kinds Slack knows; the project writes
    none of them, so their own fields are not written out."""

    type: Literal["context", "divider", "header", "image", "input", "rich_text"]
    block_id: NotRequired[str]


Block = SectionBlock | ActionsBlock | OtherBlock

# -- objects -------------------------------------------------------------------


class File(TypedDict):
    """A file object (``objs_file``): what a message shares."""

    id: str
    name: NotRequired[str]
    title: NotRequired[str]
    mimetype: NotRequired[str]
    filetype: NotRequired[str]
    size: NotRequired[int]
    url_private: NotRequired[str]
    url_private_download: NotRequired[str]


class Message(TypedDict):
    """A message object (``objs_message``), as Web API answers and
    ``block_actions`` payloads show it."""

    type: NotRequired[str]
    subtype: NotRequired[str]
    text: str
    ts: NotRequired[str]
    thread_ts: NotRequired[str]
    user: NotRequired[str]
    bot_id: NotRequired[str]
    team: NotRequired[str]
    blocks: NotRequired[list[Block]]
    files: NotRequired[list[File]]


# -- Web API: arguments --------------------------------------------------------


class NoParams(TypedDict):
    """A method called with its token alone (``auth.test``,
    ``apps.connections.open``)."""


class MessageRef(TypedDict):
    """``channel`` and ``ts``: the arguments that name one message."""

    channel: str
    ts: str


class PostMessageParams(TypedDict):
    """``chat.postMessage``."""

    channel: str
    text: NotRequired[str]
    """Required without ``blocks``; with them, the notification's text."""
    blocks: NotRequired[list[Block]]
    thread_ts: NotRequired[str]
    reply_broadcast: NotRequired[bool]
    mrkdwn: NotRequired[bool]
    unfurl_links: NotRequired[bool]
    unfurl_media: NotRequired[bool]


class UpdateParams(MessageRef):
    """``chat.update``: ``blocks`` left out keeps the old ones, ``[]`` takes
    them away."""

    text: NotRequired[str]
    blocks: NotRequired[list[Block]]


class DeleteParams(MessageRef):
    """``chat.delete``."""


class PostEphemeralParams(TypedDict):
    """``chat.postEphemeral``: shown to ``user`` alone."""

    channel: str
    user: str
    text: NotRequired[str]
    blocks: NotRequired[list[Block]]
    thread_ts: NotRequired[str]


class StartStreamParams(TypedDict):
    """``chat.startStream``: ``recipient_user_id`` and ``recipient_team_id``
    are required outside direct messages; ``markdown_text`` at most 12,000
    characters."""

    channel: str
    thread_ts: NotRequired[str]
    markdown_text: NotRequired[str]
    recipient_user_id: NotRequired[str]
    recipient_team_id: NotRequired[str]


class AppendStreamParams(MessageRef):
    """``chat.appendStream``."""

    markdown_text: str


class StopStreamParams(MessageRef):
    """``chat.stopStream``."""

    markdown_text: NotRequired[str]
    blocks: NotRequired[list[Block]]


# -- Web API: answers ----------------------------------------------------------


class ErrorResponse(TypedDict):
    """Any method's failure: HTTP 200 (429 for a rate limit) with ``ok: false``."""

    ok: Literal[False]
    error: str
    needed: NotRequired[str]
    """The scope a ``missing_scope`` asks for."""
    provided: NotRequired[str]
    warning: NotRequired[str]


class AuthTestResponse(TypedDict):
    """``auth.test``."""

    ok: Literal[True]
    url: str
    team: str
    user: str
    team_id: str
    user_id: str
    bot_id: NotRequired[str]
    is_enterprise_install: NotRequired[bool]


class ConnectionsOpenResponse(TypedDict):
    """``apps.connections.open``: a one-time Socket Mode URL."""

    ok: Literal[True]
    url: str


class PostMessageResponse(TypedDict):
    """``chat.postMessage``."""

    ok: Literal[True]
    channel: str
    ts: str
    message: Message


class UpdateResponse(TypedDict):
    """``chat.update``."""

    ok: Literal[True]
    channel: str
    ts: str
    text: str
    message: Message


class DeleteResponse(TypedDict):
    """``chat.delete``."""

    ok: Literal[True]
    channel: str
    ts: str


class PostEphemeralResponse(TypedDict):
    """``chat.postEphemeral``."""

    ok: Literal[True]
    message_ts: str


class StreamResponse(TypedDict):
    """``chat.appendStream`` and ``chat.stopStream``."""

    ok: Literal[True]
    channel: str
    ts: str
    message: NotRequired[Message]


class StartStreamResponse(TypedDict):
    """``chat.startStream``: the streaming message's ``ts``."""

    ok: Literal[True]
    channel: str
    ts: str


P = TypeVar("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class WebApiCall(Generic[R]):
    """One call of a Web API method: its name and arguments; ``R`` is its
    ``ok: true`` answer."""

    method: str
    params: object
    """A ``TypedDict`` of the method's arguments, sent as the JSON body."""


@dataclass(frozen=True, slots=True)
class WebApiMethod(Generic[P, R]):
    """A Web API method: its name, the arguments it takes (``P``) and its
    ``ok: true`` answer (``R``). Called with the arguments, it gives the
    call to make."""

    name: str

    def __call__(self, params: P) -> WebApiCall[R]:
        return WebApiCall(self.name, params)


AUTH_TEST: WebApiMethod[NoParams, AuthTestResponse] = WebApiMethod("auth.test")
CONNECTIONS_OPEN: WebApiMethod[NoParams, ConnectionsOpenResponse] = WebApiMethod(
    "apps.connections.open"
)
POST_MESSAGE: WebApiMethod[PostMessageParams, PostMessageResponse] = WebApiMethod(
    "chat.postMessage"
)
UPDATE: WebApiMethod[UpdateParams, UpdateResponse] = WebApiMethod("chat.update")
DELETE: WebApiMethod[DeleteParams, DeleteResponse] = WebApiMethod("chat.delete")
POST_EPHEMERAL: WebApiMethod[PostEphemeralParams, PostEphemeralResponse] = WebApiMethod(
    "chat.postEphemeral"
)
START_STREAM: WebApiMethod[StartStreamParams, StartStreamResponse] = WebApiMethod(
    "chat.startStream"
)
APPEND_STREAM: WebApiMethod[AppendStreamParams, StreamResponse] = WebApiMethod("chat.appendStream")
STOP_STREAM: WebApiMethod[StopStreamParams, StreamResponse] = WebApiMethod("chat.stopStream")

# -- Events API ----------------------------------------------------------------

ChannelType = Literal["im", "mpim", "channel", "group", "app_home"]


class _MessageFields(TypedDict):
    """What a ``message`` event carries; an ``app_mention`` event is the
    same message, so it carries the same fields."""

    user: NotRequired[str]
    """Absent from some subtypes (a bot's message has ``bot_id``)."""
    text: NotRequired[str]
    ts: str
    channel: str
    event_ts: str
    thread_ts: NotRequired[str]
    subtype: NotRequired[str]
    bot_id: NotRequired[str]
    channel_type: NotRequired[ChannelType]
    team: NotRequired[str]
    files: NotRequired[list[File]]
    blocks: NotRequired[list[Block]]
    client_msg_id: NotRequired[str]


class MessageEvent(_MessageFields):
    """A ``message`` event (``message.im``, ``message.channels``, …)."""

    type: Literal["message"]


class AppMentionEvent(_MessageFields):
    """An ``app_mention`` event: a message that mentions the app."""

    type: Literal["app_mention"]


class EventCallback(TypedDict):
    """The Events API's outer event (``event_callback``)."""

    type: Literal["event_callback"]
    team_id: str
    api_app_id: str
    event_id: str
    event_time: int
    event: MessageEvent | AppMentionEvent
    token: NotRequired[str]
    event_context: NotRequired[str]


# -- interactivity -------------------------------------------------------------


class User(TypedDict):
    """The user in an interaction payload."""

    id: str
    username: NotRequired[str]
    name: NotRequired[str]
    team_id: NotRequired[str]


class TeamRef(TypedDict):
    id: str
    domain: NotRequired[str]


class ChannelRef(TypedDict):
    id: str
    name: NotRequired[str]


class MessageContainer(TypedDict):
    """Where the pressed element is: a message."""

    type: Literal["message"]
    message_ts: str
    channel_id: str
    is_ephemeral: bool
    thread_ts: NotRequired[str]


class ButtonAction(TypedDict):
    """One press of a ``button`` in ``block_actions``' ``actions``."""

    type: Literal["button"]
    action_id: str
    block_id: str
    text: PlainText
    value: NotRequired[str]
    style: NotRequired[Literal["primary", "danger"] | None]
    action_ts: str


class BlockActionsPayload(TypedDict):
    """A ``block_actions`` payload: someone used an interactive element of a
    message."""

    type: Literal["block_actions"]
    user: User
    api_app_id: str
    token: str
    container: MessageContainer
    trigger_id: str
    team: TeamRef
    channel: ChannelRef
    message: Message
    response_url: str
    actions: list[ButtonAction]


# -- Socket Mode ---------------------------------------------------------------


class DebugInfo(TypedDict):
    host: NotRequired[str]
    build_number: NotRequired[int]
    approximate_connection_time: NotRequired[int]


class ConnectionInfo(TypedDict):
    app_id: str


class HelloEnvelope(TypedDict):
    """The first message of a connection."""

    type: Literal["hello"]
    num_connections: int
    debug_info: DebugInfo
    connection_info: NotRequired[ConnectionInfo]


class DisconnectEnvelope(TypedDict):
    """Slack will close the connection: ``refresh_requested``, ``warning``,
    ``link_disabled``."""

    type: Literal["disconnect"]
    reason: str
    debug_info: DebugInfo


class EventsApiEnvelope(TypedDict):
    """An Events API event, to acknowledge with its ``envelope_id``; sent
    again, with ``retry_attempt`` above 0, when the ack came late."""

    envelope_id: str
    type: Literal["events_api"]
    accepts_response_payload: bool
    retry_attempt: int
    retry_reason: str
    payload: EventCallback


class InteractiveEnvelope(TypedDict):
    """An interaction (a button press), to acknowledge with its ``envelope_id``."""

    envelope_id: str
    type: Literal["interactive"]
    accepts_response_payload: bool
    payload: BlockActionsPayload


SocketModeEnvelope = EventsApiEnvelope | InteractiveEnvelope
"""The envelopes that carry a payload (and need an ack)."""
SocketModeMessage = HelloEnvelope | DisconnectEnvelope | SocketModeEnvelope
"""Everything Slack sends over a Socket Mode connection that the project handles."""


class Ack(TypedDict):
    """The app's answer to an envelope, at once."""

    envelope_id: str
