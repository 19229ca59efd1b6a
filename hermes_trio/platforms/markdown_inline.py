"""The one Markdown engine of the chat converters: markdown-it-py, inline.

Telegram's MarkdownV2 and Slack's mrkdwn converters render the token stream
this parses. One line at a time: inline markup never spans lines, so an
answer being written (edited in place as it streams) never jumps around.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from markdown_it import MarkdownIt
from markdown_it.token import Token

__all__ = ["inline_parser", "inline_tokens", "with_contents"]


def inline_parser(*, autolinks: bool) -> MarkdownIt:
    """CommonMark inline rules plus ``~~strike~~``, no raw HTML.

    Text stays as written: ``&amp;`` is not decoded (a model writing it means
    the characters), NUL and CR are not rewritten, and a link's URL is not
    percent-encoded (a link shown as text is never longer than its source).
    """
    md = _AsWritten("commonmark", {"html": False}).enable("strikethrough")
    md.disable(["entity", "normalize", *([] if autolinks else ["autolink"])])
    return md


class _AsWritten(MarkdownIt):
    """Link targets and autolink texts exactly as the source gives them."""

    def normalizeLink(self, url: str) -> str:
        return url

    def normalizeLinkText(self, link: str) -> str:
        return link


def inline_tokens(md: MarkdownIt, line: str) -> list[Token]:
    """The inline tokens of one line (no newline in it)."""
    tokens = md.parseInline(line)
    return list(tokens[0].children or []) if tokens else []


def with_contents(tokens: Sequence[Token]) -> Iterator[tuple[Token, list[Token]]]:
    """Each token of one level with what it holds: a link's ``link_open``
    with its label's tokens (its ``link_close`` is not given), an image with
    its alt text's, any other token with nothing."""
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.type != "link_open":
            yield tok, list(tok.children or [])
            i += 1
            continue
        depth, end = 0, i
        while end < len(tokens):
            depth += tokens[end].type == "link_open"
            depth -= tokens[end].type == "link_close"
            if depth == 0:
                break
            end += 1
        yield tok, list(tokens[i + 1 : end])
        i = end + 1
