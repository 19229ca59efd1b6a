"""What the model reads of a chat message: attachments sorted without I/O,
then fetched."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.consumers.messenger import PlatformError
from hermes_trio.gateway.sessions import duration_words
from hermes_trio.gateway.user_content import (
    IMAGE_TYPES,
    MAX_IMAGE_BYTES,
    MAX_IMAGES,
    sort_attachments,
    user_content,
)
from hermes_trio.platforms.base import Attachment, InboundMessage

MIME_TYPES = [*sorted(IMAGE_TYPES), "image/heic", "application/pdf", "audio/ogg", None]

attachments = st.builds(
    Attachment,
    mime_type=st.sampled_from(MIME_TYPES),
    name=st.one_of(st.none(), st.text(min_size=1, max_size=12)),
    size=st.one_of(st.none(), st.integers(0, 2 * MAX_IMAGE_BYTES)),
)


@given(st.lists(attachments, max_size=12), st.booleans())
def test_every_attachment_is_used_or_answered_for(found: list[Attachment], vision: bool) -> None:
    decided = sort_attachments(tuple(found), vision=vision)
    assert len(decided.images) + len(decided.refusals) == len(found)
    assert len(decided.images) <= MAX_IMAGES
    for image in decided.images:
        assert vision and image.mime_type in IMAGE_TYPES
        assert image.size is None or image.size <= MAX_IMAGE_BYTES
    assert all(line.strip() and "\n" not in line for line in decided.refusals)


def test_each_refusal_says_why() -> None:
    heic = Attachment("image/heic", "IMG_1.heic")
    big = Attachment("image/png", "huge.png", MAX_IMAGE_BYTES + 1)
    voice = Attachment("audio/ogg", None)
    decided = sort_attachments((heic, big, voice), vision=True)
    assert decided.images == []
    assert decided.refusals == [
        "I can't read IMG_1.heic (image/heic): I can only use text and JPEG, PNG, GIF "
        "or WebP images, not that kind of image.",
        "I can't look at huge.png (image/png): it is larger than 20 MB.",
        "I can't read audio/ogg: I can only use text and JPEG, PNG, GIF or WebP images, "
        "not files of that kind.",
    ]
    (off,) = sort_attachments((Attachment("image/png", "a.png"),), vision=False).refusals
    assert off == "I can't look at a.png (image/png): this model does not take images."


async def test_fetched_images_become_data_urls_and_failures_a_reply() -> None:
    async def png() -> bytes:
        return b"\x89PNG..."

    async def broken() -> bytes:
        raise PlatformError("telegram file download: HTTP 502")

    message = InboundMessage(
        "telegram",
        "1",
        "2",
        "look",
        attachments=(
            Attachment("image/PNG", "a.png", fetch=png),
            Attachment("image/jpeg", "b.jpg", fetch=broken),
        ),
    )
    prepared = await user_content(message, vision=True)
    url = "data:image/png;base64," + base64.b64encode(b"\x89PNG...").decode()
    assert prepared.content == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": url}},
    ]
    assert prepared.replies == ["I could not download b.jpg (image/jpeg); please send it again."]


async def test_text_alone_stays_a_string_and_nothing_usable_is_none() -> None:
    assert (await user_content(InboundMessage("t", "1", "2", "hi"), vision=True)).content == "hi"
    only_pdf = InboundMessage("t", "1", "2", " ", attachments=(Attachment("application/pdf"),))
    prepared = await user_content(only_pdf, vision=True)
    assert prepared.content is None and len(prepared.replies) == 1


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (0, "0 s"),
        (59.4, "59 s"),
        (60, "1 min"),
        (600, "10 min"),
        (3600, "1 h"),
        (7500, "2 h 5 min"),
    ],
)
def test_durations_read_like_a_person_says_them(seconds: float, words: str) -> None:
    assert duration_words(seconds) == words
