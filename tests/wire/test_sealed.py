"""A compaction item's sealed summary opens only unaltered, under its own
id and its own install's key (hermes_trio.wire.sealed)."""

from __future__ import annotations

import base64
import os

from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.wire.sealed import KEY_BYTES, Sealer, compaction_item

KEY = bytes(range(KEY_BYTES))


@given(st.text(max_size=2000), st.text(min_size=1, max_size=40))
def test_a_summary_opens_as_it_was_sealed(text: str, item_id: str) -> None:
    sealer = Sealer(KEY)
    try:
        text.encode()
    except UnicodeEncodeError:
        return
    assert sealer.open(item_id, sealer.seal(item_id, text)) == text


def test_altered_moved_or_foreign_content_does_not_open() -> None:
    sealer = Sealer(KEY)
    item = compaction_item(sealer, "cmp_1", "the user likes tea")
    content = item["encrypted_content"]
    assert sealer.open("cmp_1", content) == "the user likes tea"
    raw = bytearray(base64.urlsafe_b64decode(content))
    for position in (0, 5, len(raw) // 2, len(raw) - 1):
        altered = bytearray(raw)
        altered[position] ^= 1
        assert sealer.open("cmp_1", base64.urlsafe_b64encode(bytes(altered)).decode()) is None
    assert sealer.open("cmp_2", content) is None
    assert Sealer(os.urandom(KEY_BYTES)).open("cmp_1", content) is None
    for garbage in ("", "!!!", "AAAA", content[:20], "é"):
        assert sealer.open("cmp_1", garbage) is None
    # Each sealing is fresh: the same summary twice gives two contents.
    assert compaction_item(sealer, "cmp_1", "x")["encrypted_content"] != (
        compaction_item(sealer, "cmp_1", "x")["encrypted_content"]
    )
