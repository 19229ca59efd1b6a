"""The ``compaction`` item of the Responses API (pure): a summary sealed
so that only this install can read it back.

A compacted conversation goes back to the client as a ``compaction``
item whose ``encrypted_content`` is the summary, sealed with AES-256-GCM
(``cryptography``'s AEAD, never a scheme of our own) under a key the
store keeps for the install. The item's id is the associated data: the
content of one item cannot be passed off under another's id. A client
that sends the item back (``input``, also with ``store: false``) gets the
summary in place in the conversation; content that was altered, or sealed
by another install (another key), does not open.
"""

from __future__ import annotations

import base64
import binascii
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .responses_types import CompactionItem

__all__ = ["KEY_BYTES", "Sealer", "compaction_item"]

KEY_BYTES = 32
"""An AES-256 key."""

# The first byte of every sealed content: a later format can be told apart.
_VERSION = b"\x01"
_NONCE_BYTES = 12
# Keeps this key's use apart from any other use of AES-GCM with it.
_CONTEXT = b"hermes-trio compaction\x00"


class Sealer:
    """Seals and opens summaries under one install's key."""

    __slots__ = ("_aead",)

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"a sealing key is {KEY_BYTES} bytes, not {len(key)}")
        self._aead = AESGCM(key)

    def seal(self, item_id: str, text: str) -> str:
        """``text`` sealed for the item ``item_id`` (URL-safe base64)."""
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, text.encode(), _CONTEXT + item_id.encode())
        return base64.urlsafe_b64encode(_VERSION + nonce + sealed).decode("ascii")

    def open(self, item_id: str, content: str) -> str | None:
        """The text sealed in ``content`` for ``item_id``; None when it was
        altered, sealed for another id, or sealed under another key."""
        try:
            raw = base64.urlsafe_b64decode(content.encode("ascii"))
        except (binascii.Error, UnicodeEncodeError, ValueError):
            return None
        if len(raw) <= 1 + _NONCE_BYTES or raw[:1] != _VERSION:
            return None
        nonce, sealed = raw[1 : 1 + _NONCE_BYTES], raw[1 + _NONCE_BYTES :]
        try:
            plain = self._aead.decrypt(nonce, sealed, _CONTEXT + item_id.encode())
        except InvalidTag:
            return None
        try:
            return plain.decode()
        except UnicodeDecodeError:
            return None


def compaction_item(sealer: Sealer, item_id: str, summary: str) -> CompactionItem:
    """The ``compaction`` item that carries ``summary``."""
    return {
        "type": "compaction",
        "id": item_id,
        "encrypted_content": sealer.seal(item_id, summary),
    }
