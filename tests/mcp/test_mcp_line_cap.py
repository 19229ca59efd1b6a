"""The sans-IO half of the capped stdio transport: lines cut at a cap,
and the id of an answer found at either end of a line too long to keep."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.mcp.line_cap import KEEP, LineCap, Oversized, answer_id

BIG = "x" * 5000


def ends(line: bytes, keep: int = KEEP) -> tuple[bytes, bytes]:
    return line[:keep], line[-keep:]


def python_order(ident: object, text: str) -> bytes:
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}).encode()


def typescript_order(ident: object, text: str) -> bytes:
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    return json.dumps({"result": result, "jsonrpc": "2.0", "id": ident}).encode()


@pytest.mark.parametrize("order", [python_order, typescript_order])
@pytest.mark.parametrize("ident", [7, 0, -3, 12345678901, "abc", 'q"uo\\te', "ünï", ""])
def test_the_id_is_found_at_either_end(order: object, ident: int | str) -> None:
    line = order(ident, "x" * 5000)  # type: ignore[operator]
    assert answer_id(*ends(line)) == ident


def test_escaped_quotes_and_backslashes_in_the_tail_are_skipped() -> None:
    text = "y" * 3000 + '"}],"id":666,"x":"' + '\\"' * 50 + "\\\\" * 50 + '\\\\"'
    line = typescript_order("real", text)
    assert b'"id":666' not in line  # escaped: it is text, not a member
    assert answer_id(*ends(line)) == "real"
    assert answer_id(*ends(python_order(5, text))) == 5


def test_an_error_answer_is_an_answer() -> None:
    error = {"code": -32000, "message": "boom", "data": "d" * 5000}
    line = json.dumps({"error": error, "jsonrpc": "2.0", "id": 9}).encode()
    assert answer_id(*ends(line)) == 9


@pytest.mark.parametrize(
    "message",
    [
        # A request of the server's: its id is not one of ours.
        {"jsonrpc": "2.0", "id": 4, "method": "sampling/createMessage", "params": {"p": BIG}},
        {"method": "sampling/createMessage", "params": {"p": BIG}, "jsonrpc": "2.0", "id": 4},
        # A notification: no id.
        {"method": "notifications/message", "params": {"data": "x" * 5000}, "jsonrpc": "2.0"},
        {"jsonrpc": "2.0", "result": {"t": "x" * 5000}},
        {"jsonrpc": "2.0", "id": True, "result": {"t": "x" * 5000}},
        {"jsonrpc": "2.0", "id": 1.5, "result": {"t": "x" * 5000}},
        {"jsonrpc": "2.0", "id": None, "result": {"t": "x" * 5000}},
    ],
)
def test_what_is_not_an_answer_with_an_id_has_none(message: dict[str, object]) -> None:
    assert answer_id(*ends(json.dumps(message).encode())) is None


def test_an_id_cut_by_the_kept_end_is_not_guessed() -> None:
    line = typescript_order(123456, "x" * 5000)
    assert answer_id(line[:KEEP], line[-4:]) is None  # '56}' of 123456
    assert answer_id(line[:KEEP], line[-12:]) is None  # 'id": 123456}': its key cut
    head = python_order(123456, "x" * 5000)[:29]
    assert head.endswith(b'"id": 1234')
    assert answer_id(head, b"}") is None


@pytest.mark.parametrize(
    ("head", "tail"),
    [(b"", b""), (b"not json", b"at all"), (b"[1,2", b"3]"), (b'{"id":1', b"garbage")],
)
def test_garbage_has_no_id(head: bytes, tail: bytes) -> None:
    assert answer_id(head, tail) is None


def test_lines_are_whole_until_one_is_too_long() -> None:
    cap = LineCap(2 * KEEP + 10)
    long = typescript_order(3, "z" * 5000)
    out = cap.feed(b'{"a":1}\n{"b"')
    assert out == [b'{"a":1}']
    assert cap.feed(b":2}\n" + long[:100]) == [b'{"b":2}']
    assert cap.feed(long[100:]) == []
    assert cap.held <= cap.limit
    assert cap.feed(b"\n\nrest") == [Oversized(len(long), 3), b""]
    assert cap.held == 4


def test_a_line_of_exactly_the_cap_is_whole() -> None:
    cap = LineCap(2 * KEEP)
    assert cap.feed(b"a" * (2 * KEEP) + b"\n") == [b"a" * (2 * KEEP)]
    assert cap.feed(b"a" * (2 * KEEP + 1) + b"\n") == [Oversized(2 * KEEP + 1, None)]


def test_a_cap_that_cannot_hold_both_ends_is_refused() -> None:
    with pytest.raises(ValueError, match="must hold both kept ends"):
        LineCap(10, keep=8)


def reference(data: bytes, limit: int, keep: int) -> list[bytes | Oversized]:
    out: list[bytes | Oversized] = []
    for line in data.split(b"\n")[:-1]:
        if len(line) <= limit:
            out.append(line)
        else:
            out.append(Oversized(len(line), answer_id(line[:keep], line[-keep:])))
    return out


lines = st.lists(
    st.one_of(
        st.binary(max_size=80).map(lambda b: b.replace(b"\n", b"")),
        st.builds(
            lambda order, ident, text: order(ident, text).decode(),
            st.sampled_from([python_order, typescript_order]),
            st.one_of(st.integers(), st.text(max_size=6)),
            st.text(alphabet='ab"\\{}:,\n ', max_size=120),
        ).map(str.encode),
    ),
    max_size=8,
)


@given(lines, st.integers(16, 120), st.data())
def test_any_chunking_gives_the_same_lines_and_holds_no_more_than_the_cap(
    parts: list[bytes], limit: int, data: st.DataObject
) -> None:
    keep = 8
    stream = b"\n".join(parts) + data.draw(st.sampled_from([b"", b"\n", b"tail"]))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    cap = LineCap(limit, keep=keep)
    out: list[bytes | Oversized] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        out += cap.feed(stream[start:end])
        assert cap.held <= limit
    assert out == reference(stream, limit, keep)


@given(
    st.sampled_from([python_order, typescript_order]),
    st.one_of(st.integers(), st.text(max_size=40)),
    st.text(max_size=3000),
)
def test_the_id_of_any_answer_is_found(order: object, ident: int | str, text: str) -> None:
    line = order(ident, text)  # type: ignore[operator]
    found = answer_id(*ends(line))
    if len(line) > 2 * KEEP:
        assert found == ident
    else:
        assert found in (ident, None)
