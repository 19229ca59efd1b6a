"""The request-body parser (pure): UTF-8, depth and the field paths it names."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from hermes_trio.server.parsing.errors import APIError
from hermes_trio.server.parsing.request_json import (
    MAX_DEPTH,
    field_path,
    parse_request_json,
    too_deep,
    too_deep_in_text,
    unencodable,
)

_keys = st.text(alphabet=st.characters(codec="utf-8"), max_size=4)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=30,
)


@given(_json, st.integers(min_value=0, max_value=6), st.sampled_from([None, 0, 2]))
def test_the_text_scanner_finds_the_path_the_tree_walk_finds(value, limit, indent) -> None:
    raw = json.dumps(value, indent=indent).encode()
    assert too_deep_in_text(raw, limit) == too_deep(value, limit)


@given(_json)
@example(-9223372036854775809)
@example([18446744073709551616, {"n": 123456789012345678901234567890}])
def test_bodies_within_the_limits_parse_as_the_standard_library_does(value) -> None:
    raw = json.dumps(value).encode()
    assert parse_request_json(raw) == json.loads(raw)


def _refused(raw: bytes) -> APIError:
    with pytest.raises(APIError) as info:
        parse_request_json(raw)
    assert info.value.status == 400
    return info.value


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        (b'{"a": [1, {"b": "\\ud800"}]}', "a[1].b"),
        (b'{"a": "ok", "b": ["x", "\\udc00y"]}', "b[1]"),
        (b'{"a": {"\\ud83d": 1}}', "a"),
        (b'"\\ud800"', None),
        # Raw bytes of an encoded surrogate (CESU-8), not an escape.
        (b'{"a": "\xed\xa0\x80"}', "a"),
    ],
)
def test_a_lone_surrogate_is_named_by_its_path(raw: bytes, param: str | None) -> None:
    error = _refused(raw)
    assert error.param == param and "surrogate" in error.message


def test_a_surrogate_pair_is_fine() -> None:
    assert parse_request_json(b'{"a": "\\ud83d\\ude00"}') == {"a": "\U0001f600"}


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1000, 2000])
def test_too_deep_names_the_first_levels(depth: int) -> None:
    raw = b'{"messages": [{"content": ' + b"[" * depth + b"]" * depth + b"}]}"
    error = _refused(raw)
    assert error.param == "messages[0].content[0]"
    assert str(MAX_DEPTH) in error.message


def test_exactly_the_limit_is_fine() -> None:
    depth = MAX_DEPTH - 1
    raw = b'{"a": ' + b"[" * depth + b"]" * depth + b"}"
    assert parse_request_json(raw)["a"] is not None


@pytest.mark.parametrize("raw", [b"{", b"", b'{"a": NaN}', b"\xff", b'{"a": "\xff"}'])
def test_invalid_json_is_invalid_json(raw: bytes) -> None:
    assert _refused(raw).code == "invalid_json"


def test_field_path() -> None:
    parts: list[Any] = ["messages", 0, "content", 2, "text"]
    assert field_path(parts) == "messages[0].content[2].text"
    assert field_path([0, "a"]) == "[0].a"
    assert field_path([]) == ""


def test_unencodable_checks_keys_and_values() -> None:
    assert unencodable({"a": ["\ud800"]}) == ["a", 0]
    assert unencodable({"ok": "fine", "\udfff": 1}) == []
    assert unencodable({"a": "fine"}) is None
