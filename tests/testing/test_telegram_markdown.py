"""The testing kit's MarkdownV2 parser against Telegram's own documentation."""

from __future__ import annotations

from hermes_trio.testing.telegram_markdown import parse_markdown_v2

# The Bot API's "MarkdownV2 style" example, as https://core.telegram.org/bots/api
# gives it (nesting, the ``___`` ambiguity, custom emoji, the expandable quote).
DOCUMENTED = "\n".join(
    [
        "*bold \\*text*",
        "_italic \\*text_",
        "__underline__",
        "~strikethrough~",
        "||spoiler||",
        "*bold _italic bold ~italic bold strikethrough ||italic bold strikethrough spoiler||~ "
        "__underline italic bold___ bold*",
        "[inline URL](http://www.example.com/)",
        "[inline mention of a user](tg://user?id=123456789)",
        "![👍](tg://emoji?id=5368324170671202286)",
        "`inline fixed-width code`",
        "```",
        "pre-formatted fixed-width code block",
        "```",
        "```python",
        "pre-formatted fixed-width code block written in the Python programming language",
        "```",
        ">Block quotation started",
        ">Block quotation continued",
        ">Block quotation continued",
        ">Block quotation continued",
        ">The last line of the block quotation",
        "**>The expandable block quotation started right after the previous block quotation",
        ">It is separated from the previous block quotation by an empty bold entity",
        ">Expandable block quotation continued",
        ">Hidden by default part of the expandable block quotation started",
        ">Expandable block quotation continued",
        ">The last line of the expandable block quotation with the expandability mark||",
    ]
)


def test_telegrams_documented_example_parses_as_documented() -> None:
    parsed = parse_markdown_v2(DOCUMENTED)
    units = parsed.text.encode("utf-16-le")
    spans = [
        (e["type"], units[2 * e["offset"] : 2 * (e["offset"] + e["length"])].decode("utf-16-le"))
        for e in parsed.entities
    ]
    nested = "italic bold strikethrough spoiler"
    assert [kind for kind, _ in spans] == [
        "bold", "italic", "underline", "strikethrough", "spoiler",
        "bold", "italic", "strikethrough", "spoiler", "underline",
        "text_link", "text_link", "custom_emoji", "code", "pre", "pre",
        "blockquote", "expandable_blockquote",
    ]  # fmt: skip
    assert spans[0] == ("bold", "bold *text")
    assert spans[8] == ("spoiler", nested)
    # "___" closes the underline first, then the italic.
    assert spans[9] == ("underline", "underline italic bold")
    assert spans[6][1].endswith("underline italic bold")
    assert spans[12] == ("custom_emoji", "👍")
    assert parsed.entities[15]["language"] == "python"
    assert spans[16][1].startswith("Block quotation started\n")
    assert spans[16][1].endswith("The last line of the block quotation\n")
    # The empty bold "**" only separates the two quotes; the "||" is the mark.
    assert spans[17][1].startswith("The expandable block quotation started")
    assert spans[17][1].endswith("with the expandability mark")
    assert [e.get("url") for e in parsed.entities[10:12]] == [
        "http://www.example.com/",
        "tg://user?id=123456789",
    ]
