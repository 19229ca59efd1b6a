from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.wire import SSEComment, SSEDecoder, SSEEvent, encode_comment, encode_event


def decode(*chunks: bytes, comments: bool = False) -> list[SSEEvent | SSEComment]:
    decoder = SSEDecoder(comments=comments)
    out: list[SSEEvent | SSEComment] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    out.extend(decoder.close())
    return out


# -- line endings -------------------------------------------------------------


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"])
def test_each_line_ending(eol: bytes) -> None:
    stream = b"data: a" + eol + b"data: b" + eol + eol
    assert decode(stream) == [SSEEvent("a\nb")]


def test_mixed_line_endings() -> None:
    assert decode(b"data: a\rdata: b\r\ndata: c\n\r\n") == [SSEEvent("a\nb\nc")]


def test_crlf_split_across_feeds_is_one_line_end() -> None:
    # Had the LF counted as its own line end it would be a blank line and
    # dispatch "a" before "b" joined it.
    assert decode(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [SSEEvent("a\nb")]


def test_cr_then_empty_feed_then_lf() -> None:
    assert decode(b"data: a\r", b"", b"\n\n") == [SSEEvent("a")]


def test_lone_cr_at_feed_end_completes_the_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r\r") == [SSEEvent("a")]


def test_event_dispatches_as_soon_as_blank_line_arrives() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.feed(b"\n") == [SSEEvent("a")]


# -- UTF-8 and BOM ------------------------------------------------------------


def test_multibyte_character_split_across_feeds() -> None:
    raw = "data: é😀\n\n".encode()
    chunks = [raw[i : i + 1] for i in range(len(raw))]
    assert decode(*chunks) == [SSEEvent("é😀")]


def test_invalid_utf8_becomes_replacement_character() -> None:
    assert decode(b"data: a\xffb\n\n") == [SSEEvent("a\ufffdb")]


def test_leading_bom_is_stripped_once() -> None:
    bom = "\ufeff".encode()
    assert decode(bom + b"data: a\n\n") == [SSEEvent("a")]
    # A second BOM is part of the field name, so that line is an unknown field.
    assert decode(bom + bom + b"data: a\n\ndata: b\n\n") == [SSEEvent("b")]


def test_bom_split_across_feeds() -> None:
    bom = "\ufeff".encode()
    assert decode(bom[:1], bom[1:2], bom[2:] + b"data: a\n\n") == [SSEEvent("a")]


def test_bom_later_in_stream_is_kept() -> None:
    assert decode(b"data: a\n\n", "data: \ufeffb\n\n".encode()) == [
        SSEEvent("a"),
        SSEEvent("\ufeffb"),
    ]


# -- fields -------------------------------------------------------------------


def test_comments_are_skipped_by_default() -> None:
    assert decode(b": keep-alive\n\ndata: a\n\n") == [SSEEvent("a")]


def test_comments_reported_when_asked() -> None:
    assert decode(b": keep-alive\n:raw\ndata: a\n\n", comments=True) == [
        SSEComment("keep-alive"),
        SSEComment("raw"),
        SSEEvent("a"),
    ]


def test_only_one_leading_space_is_removed() -> None:
    assert decode(b"data:  two\n\ndata:none\n\n") == [SSEEvent(" two"), SSEEvent("none")]


def test_field_without_colon_has_empty_value() -> None:
    assert decode(b"data\ndata\n\n") == [SSEEvent("\n")]


def test_empty_data_field_dispatches_empty_string() -> None:
    assert decode(b"data:\n\n") == [SSEEvent("")]


def test_event_without_data_is_not_dispatched_and_type_resets() -> None:
    assert decode(b"event: ping\n\ndata: a\n\n") == [SSEEvent("a", "message")]


def test_event_type() -> None:
    assert decode(b"event: delta\ndata: a\n\ndata: b\n\n") == [
        SSEEvent("a", "delta"),
        SSEEvent("b", "message"),
    ]


def test_empty_event_type_means_message() -> None:
    assert decode(b"event:\ndata: a\n\n") == [SSEEvent("a", "message")]


def test_id_persists_across_events() -> None:
    assert decode(b"id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n") == [
        SSEEvent("a", id="7"),
        SSEEvent("b", id="7"),
        SSEEvent("c", id=""),
    ]


def test_id_set_by_undispatched_block_still_counts() -> None:
    assert decode(b"id: 3\n\ndata: a\n\n") == [SSEEvent("a", id="3")]


def test_id_with_nul_is_ignored() -> None:
    assert decode(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n") == [
        SSEEvent("a", id="1"),
        SSEEvent("b", id="1"),
    ]


def test_retry_only_ascii_digits() -> None:
    assert decode(b"retry: 1500\ndata: a\n\n") == [SSEEvent("a", retry=1500)]
    for bad in (b"retry: 15x\n", b"retry: -1\n", b"retry:\n", "retry: ١٢\n".encode()):
        assert decode(bad + b"data: a\n\n") == [SSEEvent("a")]


def test_retry_is_reported_once() -> None:
    assert decode(b"retry: 10\n\ndata: a\n\ndata: b\n\n") == [
        SSEEvent("a", retry=10),
        SSEEvent("b"),
    ]


def test_unknown_fields_and_case_sensitive_names_are_ignored() -> None:
    assert decode(b"foo: bar\nData: x\nEVENT: y\ndata: a\n\n") == [SSEEvent("a")]


def test_colon_in_value_is_kept() -> None:
    assert decode(b'data: {"a": "b:c"}\n\n') == [SSEEvent('{"a": "b:c"}')]


# -- end of stream ------------------------------------------------------------


def test_unterminated_event_is_dropped_at_close() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\ndata: b\n") == [SSEEvent("a")]
    assert decoder.close() == []


def test_unterminated_last_line_is_dropped_at_close() -> None:
    assert decode(b"data: a\n\ndata: b") == [SSEEvent("a")]


def test_feed_after_close_is_an_error() -> None:
    decoder = SSEDecoder()
    decoder.close()
    with pytest.raises(RuntimeError):
        decoder.feed(b"data: a\n\n")


def test_long_line_in_many_feeds() -> None:
    decoder = SSEDecoder()
    for _ in range(1000):
        assert decoder.feed(b"x") == []
    assert decoder.feed(b"\n\n") == []  # "xxx…" is an unknown field
    assert decoder.feed(b"data: " + b"y" * 5000 + b"\n\n") == [SSEEvent("y" * 5000)]


# -- encoders -----------------------------------------------------------------


def test_encode_plain_event() -> None:
    assert encode_event("hi") == b"data: hi\n\n"


def test_encode_multiline_and_fields() -> None:
    assert encode_event("a\nb\r\nc\rd", event="delta", id="5", retry=100) == (
        b"event: delta\nid: 5\nretry: 100\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
    )


def test_encode_is_utf8() -> None:
    assert encode_event("é") == "data: é\n\n".encode()


def test_encode_keeps_leading_space_through_decode() -> None:
    assert decode(encode_event(" x")) == [SSEEvent(" x")]


@pytest.mark.parametrize(
    "kwargs",
    [{"event": "a\nb"}, {"id": "a\rb"}, {"id": "a\0b"}, {"retry": -1}, {"retry": True}],
)
def test_encode_rejects_unencodable_fields(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        encode_event("x", **kwargs)  # type: ignore[arg-type]


def test_encode_comment() -> None:
    assert encode_comment() == b": keep-alive\n\n"
    assert encode_comment("a\nb") == b": a\n: b\n\n"
    assert decode(encode_comment("a\nb"), comments=True) == [SSEComment("a"), SSEComment("b")]


# -- properties ---------------------------------------------------------------

# Text with line breaks, multi-byte characters and emoji; no surrogates, since
# those cannot be encoded as UTF-8.
_text = st.text(
    alphabet=st.one_of(
        st.sampled_from("ab :\n\r\x00é€😀\ufeff"),
        st.characters(exclude_categories=("Cs",)),
    ),
    max_size=20,
)
_line = st.text(
    alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\r\n"),
    max_size=10,
)


@dataclass(frozen=True)
class _Comment:
    text: str


@dataclass(frozen=True)
class _Event:
    data: str
    event: str | None
    id: str | None
    retry: int | None


_items = st.lists(
    st.one_of(
        st.builds(_Comment, _line),
        st.builds(
            _Event,
            _text,
            st.none() | _line.filter(bool),
            st.none() | _line.filter(lambda s: "\0" not in s),
            st.none() | st.integers(0, 10**6),
        ),
    ),
    max_size=8,
)


def _expected(items: list[_Comment | _Event]) -> list[SSEEvent | SSEComment]:
    out: list[SSEEvent | SSEComment] = []
    last_id = None
    for item in items:
        if isinstance(item, _Comment):
            out.append(SSEComment(item.text))
            continue
        if item.id is not None:
            last_id = item.id
        data = item.data.replace("\r\n", "\n").replace("\r", "\n")
        out.append(SSEEvent(data, item.event or "message", last_id, item.retry))
    return out


def _encode(items: list[_Comment | _Event], eol: str, bom: bool) -> bytes:
    raw = b"".join(
        encode_comment(item.text)
        if isinstance(item, _Comment)
        else encode_event(item.data, event=item.event, id=item.id, retry=item.retry)
        for item in items
    )
    # The encoders write LF; no value holds a line break any more, so every LF
    # is a line end and can be swapped for another style wholesale.
    raw = raw.replace(b"\n", eol.encode())
    return ("\ufeff".encode() if bom else b"") + raw


@given(items=_items, eol=st.sampled_from(["\n", "\r", "\r\n"]), bom=st.booleans(), data=st.data())
def test_any_split_decodes_like_the_whole(
    items: list[_Comment | _Event], eol: str, bom: bool, data: st.DataObject
) -> None:
    raw = _encode(items, eol, bom)
    whole = decode(raw, comments=True)
    assert whole == _expected(items)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=12)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    assert decode(*chunks, comments=True) == whole


@given(data=_text, event=st.none() | _line.filter(bool), id=st.none() | _line)
def test_encode_event_round_trip(data: str, event: str | None, id: str | None) -> None:
    if id is not None and "\0" in id:
        id = None
    assert decode(encode_event(data, event=event, id=id)) == [
        SSEEvent(data.replace("\r\n", "\n").replace("\r", "\n"), event or "message", id)
    ]


@given(data=_text)
def test_byte_at_a_time(data: str) -> None:
    raw = encode_event(data) + encode_event(data, event="e")
    expected = decode(raw)
    assert decode(*(raw[i : i + 1] for i in range(len(raw)))) == expected
