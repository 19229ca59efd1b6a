"""What the model reads of a chat message: its text, and the images sent with it.

A photo becomes an ``image_url`` content part holding a ``data:`` URL, so the
model server needs no access to the platform (a local model cannot fetch a
Telegram file, and a Slack file needs the bot's token). Anything the model
cannot use — a document, a voice note, an image too large, or any image when
``model.vision`` is off — gets a short reply saying so, never silence.

``sort_attachments`` decides without I/O; ``user_content`` downloads what it
decided to use.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass, field

from ..consumers.messenger import PlatformError
from ..platforms.base import Attachment, InboundMessage
from ..wire.messages import ChatImagePart, ChatTextPart

__all__ = [
    "IMAGE_TYPES",
    "MAX_IMAGES",
    "MAX_IMAGE_BYTES",
    "Sorted",
    "UserContent",
    "sort_attachments",
    "user_content",
]

log = logging.getLogger("hermes_trio.gateway")

# What OpenAI-compatible vision models accept as image content parts.
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
# OpenAI's own limit per image; a bigger photo is refused before it is fetched.
MAX_IMAGE_BYTES = 20 * 1024 * 1024
# Images one message may hand the model; more are refused with a reply.
MAX_IMAGES = 8


@dataclass
class Sorted:
    """The attachments of one message, split by what happens to them."""

    images: list[Attachment] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    """One short line per attachment the model will not see, and why."""


def _label(attachment: Attachment) -> str:
    # Both come from the sender: one short line each, whatever they say.
    kind = _one_line(attachment.mime_type or "")
    name = _one_line(attachment.name or "")
    if name and kind:
        return f"{name} ({kind})"
    return name or kind or "a file of unknown type"


def _one_line(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def sort_attachments(attachments: tuple[Attachment, ...], *, vision: bool) -> Sorted:
    """Which attachments reach the model, and a reply line for each that does not."""
    result = Sorted()
    for attachment in attachments:
        mime = (attachment.mime_type or "").lower()
        if not mime:
            # Not a file at all (a shared contact), or one the platform did not type.
            result.refusals.append(
                f"I can't use {_label(attachment)}: I can only read text and "
                "JPEG, PNG, GIF or WebP images."
            )
        elif mime not in IMAGE_TYPES:
            what = "that kind of image" if attachment.is_image else "files of that kind"
            result.refusals.append(
                f"I can't read {_label(attachment)}: I can only use text and "
                f"JPEG, PNG, GIF or WebP images, not {what}."
            )
        elif not vision:
            result.refusals.append(
                f"I can't look at {_label(attachment)}: this model does not take images."
            )
        elif attachment.size is not None and attachment.size > MAX_IMAGE_BYTES:
            result.refusals.append(_too_large(attachment))
        elif len(result.images) >= MAX_IMAGES:
            result.refusals.append(
                f"I can look at {MAX_IMAGES} images of one message; "
                f"{_label(attachment)} was left out."
            )
        else:
            result.images.append(attachment)
    return result


def _too_large(attachment: Attachment) -> str:
    return (
        f"I can't look at {_label(attachment)}: it is larger than "
        f"{MAX_IMAGE_BYTES // (1024 * 1024)} MB."
    )


@dataclass
class UserContent:
    content: str | list[ChatTextPart | ChatImagePart] | None
    """The ``content`` of the user message; None when nothing is left for
    the model (only files it cannot use)."""
    replies: list[str]
    """What to tell the chat before the answer."""


async def user_content(message: InboundMessage, *, vision: bool) -> UserContent:
    """The user message's content for ``message``: its text, plus an image
    part for each image that could be fetched."""
    decided = sort_attachments(message.attachments, vision=vision)
    replies = list(decided.refusals)
    parts: list[ChatTextPart | ChatImagePart] = []
    for attachment in decided.images:
        try:
            data = await attachment.fetch()
        except PlatformError as exc:
            log.warning(
                "%s chat %s: could not fetch an image: %s", message.platform, message.chat_id, exc
            )
            replies.append(f"I could not download {_label(attachment)}; please send it again.")
            continue
        if len(data) > MAX_IMAGE_BYTES:
            replies.append(_too_large(attachment))
            continue
        mime = (attachment.mime_type or "").lower()
        url = f"data:{mime};base64,{base64.b64encode(data).decode()}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    text = message.text if message.text.strip() else ""
    if not parts:
        return UserContent(text or None, replies)
    text_parts: list[ChatTextPart | ChatImagePart] = (
        [{"type": "text", "text": text}] if text else []
    )
    return UserContent([*text_parts, *parts], replies)
