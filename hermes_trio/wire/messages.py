"""The messages of a conversation, in Chat Completions' shapes.

A conversation is a ``list[Message]``: what a request brought (checked by
the server before it becomes one), what the agent adds each turn, what the
store keeps and the model reads. These are the shapes the package writes;
a user message's content parts and a tool call's arguments stay the
client's own JSON.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "ChatAssistantMessage",
    "ChatFunctionCall",
    "ChatImagePart",
    "ChatImageURL",
    "ChatSystemMessage",
    "ChatTextPart",
    "ChatTool",
    "ChatToolCall",
    "ChatToolFunction",
    "ChatToolMessage",
    "ChatUserMessage",
    "Message",
]


class ChatFunctionCall(TypedDict):
    """The function a tool call names; ``arguments`` is JSON text."""

    name: str
    arguments: str


class ChatToolCall(TypedDict):
    """One tool call of an assistant message."""

    id: str
    type: str
    function: ChatFunctionCall


class ChatSystemMessage(TypedDict):
    role: Literal["system"]
    content: str


class ChatTextPart(TypedDict):
    type: Literal["text"]
    text: str


class ChatImageURL(TypedDict):
    """An image's ``url``: an https URL or a ``data:`` URL."""

    url: str


class ChatImagePart(TypedDict):
    type: Literal["image_url"]
    image_url: ChatImageURL


class ChatUserMessage(TypedDict):
    """``content`` is text or content parts: the package writes text and
    image parts (:class:`ChatTextPart`, :class:`ChatImagePart`); a client's
    parts (files, audio, an image's ``detail``) pass through as it sent them."""

    role: Literal["user"]
    content: str | list[Any]


class ChatAssistantMessage(TypedDict):
    """What the model said; a pure tool-call turn has ``content`` None."""

    role: Literal["assistant"]
    content: str | None
    tool_calls: NotRequired[list[ChatToolCall]]


class ChatToolMessage(TypedDict):
    """A tool call's result, answering the call ``tool_call_id``."""

    role: Literal["tool"]
    tool_call_id: str
    content: str


class ChatToolFunction(TypedDict):
    """A tool the model may call; ``parameters`` is its JSON schema."""

    name: str
    description: NotRequired[str]
    parameters: NotRequired[dict[str, Any]]
    strict: NotRequired[bool]


class ChatTool(TypedDict):
    """One entry of a Chat Completions request's ``tools``."""

    type: str
    function: ChatToolFunction


Message = ChatSystemMessage | ChatUserMessage | ChatAssistantMessage | ChatToolMessage
"""One message of a conversation."""
