"""Markdown → Slack mrkdwn: what models write, and properties over any text."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from hermes_trio.platforms.slack.format import RULE_LINE, escape, to_mrkdwn

CASES = [
    # emphasis
    ("**bold**, *it*, ~~gone~~", "*bold*, _it_, ~gone~"),
    ("__bold__ and _it_", "*bold* and _it_"),
    ("***both***", "*_both_*"),
    ("**bold _it_ inside**", "*bold _it_ inside*"),
    ("**unclosed", "**unclosed"),
    ("2 * 3 * 4 and snake_case_name", "2 * 3 * 4 and snake_case_name"),
    ("a ** b ** c", "a ** b ** c"),
    # escapes
    ("a <b> & c", "a &lt;b&gt; &amp; c"),
    ("<@U123> and <!channel>", "&lt;@U123&gt; and &lt;!channel&gt;"),  # nobody is pinged
    ("&amp; stays text", "&amp;amp; stays text"),
    (r"\*not italic\* and \_no\_", "*not italic* and _no_"),
    (r"C:\path\to", r"C:\path\to"),
    (r"\<b\>", "&lt;b&gt;"),
    # links
    ("[docs](https://x.io/?a=1&b=2)", "<https://x.io/?a=1&amp;b=2|docs>"),
    ("[**bold** docs](https://x.io)", "<https://x.io|*bold* docs>"),
    ("[a|b](https://x.io/p|q)", "<https://x.io/p%7Cq|a¦b>"),
    (
        "[wiki](https://en.wikipedia.org/wiki/Trio_(software))",
        "<https://en.wikipedia.org/wiki/Trio_(software)|wiki>",
    ),
    ("![a cat](https://x.io/cat.png)", "<https://x.io/cat.png|a cat>"),
    ("<https://x.io/a_b_c>", "<https://x.io/a_b_c>"),
    ("see https://x.io/a_b?x=1&y=2", "see https://x.io/a_b?x=1&amp;y=2"),
    ("[relative](docs/x.md)", "relative (docs/x.md)"),
    ("[mail](mailto:a@b.c)", "<mailto:a@b.c|mail>"),
    # code
    ("a `x < y` b", "a `x &lt; y` b"),
    ("`**not bold**`", "`**not bold**`"),
    ("``a ` b``", "`a ` b`"),
    ("```python\nif a < b:\n    print('**')\n```", "```\nif a &lt; b:\n    print('**')\n```"),
    ("~~~\n**code**\n~~~", "```\n**code**\n```"),
    ("````\n```\nstill code\n````", "```\n```\nstill code\n```"),
    ("```inline``` **b**", "`inline` *b*"),
    ("```sh\nstill being written **", "```\nstill being written **\n```"),
    # blocks
    ("# Title", "*Title*"),
    ("## Plan **now**\ntext", "*Plan now*\ntext"),
    ("#hashtag", "#hashtag"),
    ("- one\n- two\n  - nested\n* three\n+ four", "• one\n• two\n  • nested\n• three\n• four"),
    ("1. one\n2. **two**", "1. one\n2. *two*"),
    ("- [ ] todo\n- [x] done", "• ☐ todo\n• ☑ done"),
    ("> quoted **x**", "&gt; quoted *x*"),
    ("a\n\n---\n\nb", f"a\n\n{RULE_LINE}\n\nb"),
    ("* * *", RULE_LINE),
    (
        "| a | b |\n|---|:-:|\n| 1 | <2> |\nafter",
        "```\n| a | b |\n|---|:-:|\n| 1 | &lt;2&gt; |\n```\nafter",
    ),
    ("| just | pipes |", "| just | pipes |"),
    ("", ""),
    ("\n\n", "\n\n"),
]


@pytest.mark.parametrize(("markdown", "mrkdwn"), CASES)
def test_what_models_write(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


def test_escape() -> None:
    assert escape("<&>") == "&lt;&amp;&gt;"


def outside_links(text: str) -> str:
    return re.sub(r"<[^<>\s|]+(\|[^<>]*)?>", "", text)


@given(st.text())
@example("\x01**x**\x02")
@example("[a](b)<c>&")
def test_never_raises_and_escapes_every_control_character(text: str) -> None:
    out = to_mrkdwn(text)
    # Every < or > belongs to one of our links; every & is an entity.
    assert "<" not in outside_links(out) and ">" not in outside_links(out)
    assert not re.search(r"&(?!amp;|lt;|gt;)", out)
    assert "\x01" not in out and "\x02" not in out


@given(st.text(alphabet=st.characters(exclude_characters="`~\n\x01\x02"), min_size=1))
def test_fenced_code_is_kept_as_written(code: str) -> None:
    assert to_mrkdwn(f"```python\n{code}\n```") == f"```\n{escape(code)}\n```"
    assert to_mrkdwn(f"~~~\n{code}\n~~~") == f"```\n{escape(code)}\n```"


@given(st.text(alphabet=st.characters(exclude_characters="`\n\x01\x02"), min_size=1))
def test_inline_code_is_kept_as_written(code: str) -> None:
    assert to_mrkdwn(f"see `{code}` here") == f"see `{escape(code)}` here"


plain = st.text(alphabet=st.characters(categories=["L", "N", "Zs"], exclude_characters="\n"))


@given(plain)
def test_plain_prose_is_unchanged(text: str) -> None:
    if not re.match(r"^[ \t]*[-*+][ \t]", text):
        assert to_mrkdwn(text) == text


@given(st.lists(st.text(), max_size=5))
def test_lines_are_converted_one_by_one(lines: list[str]) -> None:
    # Outside code and tables, every input line gives one output line, so an
    # answer being written never jumps around.
    text = "\n".join(line.replace("\n", " ") for line in lines)
    if "`" not in text and "~~~" not in text and "|" not in text:
        assert to_mrkdwn(text).count("\n") == text.count("\n")
