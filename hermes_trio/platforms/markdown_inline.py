"""The one Markdown engine of the chat converters: markdown-it-py, inline.

Telegram's MarkdownV2 and Slack's mrkdwn converters render the token stream
this parses. One line at a time: inline markup never spans lines, so an
answer being written (edited in place as it streams) never jumps around.
"""

from __future__ import annotations

from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.token import Token

__all__ = ["inline_parser", "inline_tokens", "link_children"]


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


def link_children(tokens: Sequence[Token], start: int) -> tuple[list[Token], int]:
    """The label tokens of the link opened at ``start``, and its close's index."""
    depth = 0
    for end in range(start, len(tokens)):
        kind = tokens[end].type
        depth += kind == "link_open"
        depth -= kind == "link_close"
        if depth == 0:
            return list(tokens[start + 1 : end]), end
    return list(tokens[start + 1 :]), len(tokens)
