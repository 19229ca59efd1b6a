"""Markdown → MarkdownV2 conversion, escaping, and the MarkdownV2 parser."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_trio.consumers.messenger import measure
from hermes_trio.platforms.telegram.format import (
    escape_code,
    escape_link_url,
    escape_markdown_v2,
    to_markdown_v2,
)
from hermes_trio.testing.telegram_markdown import MarkdownV2Error, parse_markdown_v2


def visible(markdown: str) -> tuple[str, list[tuple[str, str]]]:
    """What a Telegram user sees for the converted text: (text, [(type, covered text)])."""
    parsed = parse_markdown_v2(to_markdown_v2(markdown))
    units = parsed.text.encode("utf-16-le")
    spans = [
        (
            e["type"],
            units[2 * e["offset"] : 2 * (e["offset"] + e["length"])].decode("utf-16-le"),
        )
        for e in parsed.entities
    ]
    return parsed.text, spans


# -- escaping ---------------------------------------------------------------


def test_escape_every_reserved_character() -> None:
    assert escape_markdown_v2("_*[]()~`>#+-=|{}.!") == "".join(
        "\\" + c for c in "_*[]()~`>#+-=|{}.!"
    )
    assert escape_markdown_v2("a\\b") == "a\\\\b"
    assert escape_markdown_v2("plain text, ok? yes: 100%") == "plain text, ok? yes: 100%"


def test_escape_code_only_touches_backtick_and_backslash() -> None:
    assert escape_code("a_b*c`d\\e.f") == "a_b*c\\`d\\\\e.f"


def test_escape_link_url() -> None:
    assert escape_link_url("https://x.y/a_(b)\\") == "https://x.y/a_(b\\)\\\\"


# -- conversion -------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("Hello **world**!", "Hello *world*\\!"),
        ("__bold__ too", "*bold* too"),
        ("*italic* and _also_", "_italic_ and _also_"),
        ("~~gone~~", "~gone~"),
        ("1.5 + 2 = 3.5", "1\\.5 \\+ 2 \\= 3\\.5"),
        ("use `a_b()` here", "use `a_b()` here"),
        ("``a`b``", "`a\\`b`"),
        ("[docs](https://example.com/a_(b))", "[docs](https://example.com/a_(b\\))"),
        ("# Title (v2)", "*Title \\(v2\\)*"),
        ("- one\n* two", "• one\n• two"),
        ("> quoted *bit*\nafter", ">quoted _bit_\nafter"),
        ("snake_case_name", "snake\\_case\\_name"),
        ("\\*not italic\\*", "\\*not italic\\*"),
        ("a\\b", "a\\\\b"),
        ("***both***", "_*both*_"),
        ("*a **b** c*", "_a *b* c_"),
    ],
)
def test_conversion(source: str, expected: str) -> None:
    assert to_markdown_v2(source) == expected


def test_fenced_code_keeps_content_and_language() -> None:
    source = 'Run:\n```python\nprint("a\\\\b`", 1.5)\n```\nDone.'
    out = to_markdown_v2(source)
    assert out == 'Run:\n```python\nprint("a\\\\\\\\b\\`", 1.5)\n```\nDone\\.'
    text, spans = visible(source)
    assert text == 'Run:\nprint("a\\\\b`", 1.5)\n\nDone.'
    assert spans == [("pre", 'print("a\\\\b`", 1.5)\n')]
    assert parse_markdown_v2(out).entities[0]["language"] == "python"


def test_unterminated_fence_is_closed_so_a_streaming_message_renders() -> None:
    out = to_markdown_v2("Here:\n```py\ndef f(")
    assert out.endswith("```py\ndef f(\n```")
    assert visible("Here:\n```py\ndef f(")[1] == [("pre", "def f(\n")]


def test_unclosed_inline_markup_stays_literal() -> None:
    assert visible("a **half") == ("a **half", [])
    assert visible("a `half") == ("a `half", [])
    assert visible("[a](https://x.y") == ("[a](https://x.y", [])


def test_links_need_a_real_url() -> None:
    assert visible("[a](not a url)") == ("[a](not a url)", [])
    assert visible("[a](javascript:x)") == ("[a](javascript:x)", [])
    assert visible("see [here](https://x.y/p?q=1)") == ("see here", [("text_link", "here")])


def test_code_inside_bold_becomes_plain_text() -> None:
    # Telegram does not nest code in bold; keep the words, drop the code mark.
    assert visible("**run `ls` now**") == ("run ls now", [("bold", "run ls now")])


def test_adjacent_italics_never_form_an_underline() -> None:
    out = to_markdown_v2("*a*_b_")
    assert "__" not in out
    assert visible("*a*_b_") == ("ab", [("italic", "ab")])


def test_nested_same_entity_is_kept_as_text() -> None:
    text, spans = visible("# a **b** c")
    assert text == "a **b** c"
    assert spans == [("bold", "a **b** c")]


# -- the parser (Telegram's side) -------------------------------------------


def test_parser_entities_and_utf16_offsets() -> None:
    parsed = parse_markdown_v2("😀 *bold* _it_ `c` [l](https://x.y)")
    assert parsed.text == "😀 bold it c l"
    assert [(e["type"], e["offset"], e["length"]) for e in parsed.entities] == [
        ("bold", 3, 4),
        ("italic", 8, 2),
        ("code", 11, 1),
        ("text_link", 13, 1),
    ]


@pytest.mark.parametrize(
    ("markup", "message"),
    [
        ("Hello.", "Character '.' is reserved"),
        ("a - b", "Character '-' is reserved"),
        ("*open", "Can't find end of Bold entity at byte offset 0"),
        ("x `code", "Can't find end of Code entity at byte offset 2"),
        ("[a](https://x", "Can't find end of a URL"),
        ("a > b", "Character '>' is reserved"),
    ],
)
def test_parser_rejects_what_telegram_rejects(markup: str, message: str) -> None:
    with pytest.raises(MarkdownV2Error, match=message.replace("(", r"\(").replace(".", r"\.")):
        parse_markdown_v2(markup)


def test_parser_escapes_and_code_rules() -> None:
    assert parse_markdown_v2("a\\.b\\\\c").text == "a.b\\c"
    # Inside code only ` and \ are special.
    assert parse_markdown_v2("`a.b-c*`").text == "a.b-c*"
    assert parse_markdown_v2(">quote\n>more\nout").entities == (
        {"type": "blockquote", "offset": 0, "length": 11},
    )


# -- properties -------------------------------------------------------------

_PIECES = [
    *"*_~`[]()#>-+=|{}.!\\ \n\rab1é😀:/",
    "https://x.y",
    "```",
    "**",
    "__",
    "~~",
    "> ",
    "# ",
    "- ",
    "```py\n",
    "](",
    "](https://a.b)",
]
markdownish = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_escaped_plain_text_always_parses_back_to_itself(text: str) -> None:
    assert parse_markdown_v2(escape_markdown_v2(text)).text == text


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_plain_text_without_markup_is_shown_unchanged(text: str) -> None:
    # No Markdown syntax characters at all: what the user sees is the input.
    plain = "".join(c for c in text if c not in "*_~`[]#>-+\\")
    parsed = parse_markdown_v2(to_markdown_v2(plain))
    assert parsed.text == plain


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(), markdownish))
def test_converted_output_always_parses_and_is_never_longer(text: str) -> None:
    # Parsing raises on any unescaped reserved character outside entities
    # and on any unclosed entity; the visible length must stay within the
    # length the message editor measured on the original.
    parsed = parse_markdown_v2(to_markdown_v2(text))
    assert measure(parsed.text, "utf16") <= measure(text, "utf16")
