"""Common Markdown → Telegram MarkdownV2.

Pure functions, no I/O. ``to_markdown_v2`` turns what a model writes
(``**bold**``, ``*italic*``, ``~~strike~~``, `` `code` ``, fenced blocks,
``[links](url)``, ``# headings``, ``> quotes``, ``- bullets``) into Telegram
MarkdownV2 in which every reserved character outside an entity is escaped, so
Telegram never rejects the markup. Whatever is not understood is kept as
escaped literal text: the reader sees the original characters.

Inline Markdown is parsed by markdown-it-py (CommonMark's delimiter rules)
and this module renders its token stream; the Slack converter renders the
same stream. Blocks stay line-based here: see ``to_markdown_v2``.

Telegram's side, the parser that checks this output, lives with the fake
Bot API in :mod:`hermes_trio.testing.telegram_markdown`.

Length: Telegram applies its 4096 limit to the text *after* entity parsing.
The converter never makes that visible text longer than the input (markers
vanish, escapes count once, bullets swap one character for one), so measuring
the original Markdown is a safe upper bound.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from markdown_it.token import Token

from ...markdown_fence import Fence, open_fence
from ..markdown_inline import inline_parser, inline_tokens, with_contents

__all__ = [
    "RESERVED",
    "escape_code",
    "escape_link_url",
    "escape_markdown_v2",
    "to_markdown_v2",
]

RESERVED = "_*[]()~`>#+-=|{}.!"
_ESCAPE_RE = re.compile(r"([_*\[\]()~`>#+\-=|{}.!\\])")
_CODE_ESCAPE_RE = re.compile(r"([`\\])")
_URL_ESCAPE_RE = re.compile(r"([)\\])")


def escape_markdown_v2(text: str) -> str:
    """Escape ``text`` for use outside entities (backslash included: Telegram
    would otherwise read ``\\x`` as an escaped ``x`` and drop the backslash)."""
    return _ESCAPE_RE.sub(r"\\\1", text)


def escape_code(text: str) -> str:
    """Escape ``text`` for use inside ``code`` and ``pre`` entities."""
    return _CODE_ESCAPE_RE.sub(r"\\\1", text)


def escape_link_url(url: str) -> str:
    """Escape ``url`` for the ``(...)`` part of an inline link."""
    return _URL_ESCAPE_RE.sub(r"\\\1", url)


# ---------------------------------------------------------------------------
# Pieces of the output. Text is stored unescaped and escaped when joined, so
# no code path can forget to escape.


@dataclass(slots=True)
class _Text:
    text: str


@dataclass(slots=True)
class _Code:
    text: str


@dataclass(slots=True)
class _Raw:
    """Already-valid MarkdownV2 (a URL part, a pre block)."""

    text: str


@dataclass(slots=True)
class _Marker:
    text: str


_Tok = _Text | _Code | _Raw | _Marker


def _join(tokens: list[_Tok]) -> str:
    out: list[str] = []
    prev_marker = ""
    for tok in tokens:
        if isinstance(tok, _Marker):
            if tok.text == "_" and prev_marker == "_":
                # "__" would open an underline. The two italic markers are
                # either an empty italic or the end of one italic and the
                # start of the next: dropping both is the same text either way.
                out.pop()
                prev_marker = ""
                continue
            out.append(tok.text)
            prev_marker = tok.text
            continue
        if isinstance(tok, _Text):
            if not tok.text:
                continue
            out.append(escape_markdown_v2(tok.text))
        elif isinstance(tok, _Code):
            out.append(escape_code(tok.text))
        else:
            out.append(tok.text)
        prev_marker = ""
    return "".join(out)


# ---------------------------------------------------------------------------
# Inline: markdown-it's tokens rendered under Telegram's nesting rules.

# ``<https://…>`` stays text, as Telegram users have always seen it.
_PARSER = inline_parser(autolinks=False)
_LINK_URL_RE = re.compile(r"(?:https?://|tg://|mailto:)[^\s]+\Z", re.IGNORECASE)
# Entities that may not contain code (Telegram's nesting rules).
_NO_CODE_INSIDE = frozenset({"bold", "italic", "strike", "link", "quote"})
_EMPHASIS = {"strong": ("bold", "*"), "em": ("italic", "_"), "s": ("strike", "~")}


def _render(tokens: Sequence[Token], stack: list[str], out: list[_Tok]) -> None:
    # Per emphasis opened at this level: whether it became an entity (False:
    # Telegram cannot nest an entity in itself, so its markers stay text).
    opened: list[bool] = []
    for tok, inner in with_contents(tokens):
        name, _, edge = tok.type.rpartition("_")
        if tok.type == "code_inline":
            if _NO_CODE_INSIDE.intersection(stack):
                out.append(_Text(tok.content))
            else:
                out += [_Marker("`"), _Code(tok.content), _Marker("`")]
        elif name in _EMPHASIS and edge == "open":
            kind, mark = _EMPHASIS[name]
            opened.append(kind not in stack)
            if opened[-1]:
                stack.append(kind)
            out.append(_Marker(mark) if opened[-1] else _Text(tok.markup))
        elif name in _EMPHASIS and edge == "close":
            if opened.pop():
                stack.pop()
                out.append(_Marker(_EMPHASIS[name][1]))
            else:
                out.append(_Text(tok.markup))
        elif tok.type == "link_open":
            _link(tok.attrGet("href"), inner, stack, out)
        elif tok.type == "image":
            out.append(_Text("!"))
            _link(tok.attrGet("src"), inner, stack, out)
        else:
            out.append(_Text(tok.content))


def _link(
    url: str | int | float | None, label: Sequence[Token], stack: list[str], out: list[_Tok]
) -> None:
    text = "".join(t.content for t in label)
    if isinstance(url, str) and text.strip() and _LINK_URL_RE.match(url):
        out.append(_Marker("["))
        _render(label, [*stack, "link"], out)
        out += [_Marker("]("), _Raw(escape_link_url(url)), _Marker(")")]
        return
    # Not a link Telegram would take: the characters as written (the URL as
    # markdown-it read it is never longer than its source).
    out.append(_Text("["))
    _render(label, stack, out)
    out.append(_Text(f"]({url or ''})"))


def _inline_tokens(s: str, stack: list[str]) -> list[_Tok]:
    out: list[_Tok] = []
    _render(inline_tokens(_PARSER, s), list(stack), out)
    return out


# ---------------------------------------------------------------------------
# Blocks: fenced code, headings, quotes and bullets are line-based. Inline
# markup does not span lines, which also keeps a half-streamed message
# stable: an unclosed ``**`` shows literally until its closer arrives.

_LANG_RE = re.compile(r"[\w+#.-]+\Z")
_HEADING_RE = re.compile(r"^ {0,3}#{1,6}[ \t]+(?P<text>.*?)(?:[ \t]+#+)?[ \t]*$")
_QUOTE_RE = re.compile(r"^ {0,3}>[ ]?(?P<text>.*)$")
_BULLET_RE = re.compile(r"^(?P<indent>[ \t]*)[-*+][ \t]+(?P<text>.*)$")
_RULE_RE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")


def to_markdown_v2(text: str) -> str:
    """Convert common Markdown to Telegram MarkdownV2 that always parses."""
    lines = text.split("\n")
    out: list[_Tok] = []
    i = 0
    while i < len(lines):
        if i:
            out.append(_Text("\n"))
        line = lines[i]
        fence = open_fence(line)
        # Stricter than CommonMark here: no backtick in the info string of a
        # tilde fence either, so such a line stays text as it always has.
        if fence is not None and "`" not in fence.info:
            body: list[str] = []
            i += 1
            while i < len(lines) and not _closes_fence(fence, lines[i]):
                body.append(lines[i])
                i += 1
            out.append(_Raw(_pre_block(fence, body)))
            i += 1
            continue
        out += _line_tokens(line)
        i += 1
    return _join(out)


def _pre_block(fence: Fence, body: list[str]) -> str:
    # An unterminated fence runs to the end and is closed for it: mid-stream,
    # a half-written code block still renders as code.
    info = fence.info.split()
    lang = info[0] if info and _LANG_RE.match(info[0]) else ""
    code = "\n".join(body)
    return f"```{lang}\n" + (escape_code(code) + "\n" if body else "") + "```"


def _closes_fence(fence: Fence, line: str) -> bool:
    """Whether ``line`` closes ``fence``.

    Looser than :meth:`Fence.closes`, and kept so: only leading spaces count
    as indentation, so a tab or other whitespace after at most three spaces
    may precede the closing run.
    """
    return len(line) - len(line.lstrip(" ")) <= 3 and fence.closes(line.strip())


# A message is converted whole on every edit while it streams: its finished
# lines come from here. The pieces are never changed after they are made.
@lru_cache(maxsize=512)
def _line_tokens(line: str) -> tuple[_Tok, ...]:
    if _RULE_RE.match(line):
        return (_Text(line),)
    m = _HEADING_RE.match(line)
    if m and m.group("text").strip():
        return (_Marker("*"), *_inline_tokens(m.group("text"), ["bold"]), _Marker("*"))
    m = _QUOTE_RE.match(line)
    if m:
        return (_Marker(">"), *_inline_tokens(m.group("text"), ["quote"]))
    m = _BULLET_RE.match(line)
    if m:
        return (_Text(m.group("indent") + "• "), *_inline_tokens(m.group("text"), []))
    return tuple(_inline_tokens(line, []))
