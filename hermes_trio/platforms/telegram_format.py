"""Common Markdown → Telegram MarkdownV2.

Pure functions, no I/O. ``to_markdown_v2`` turns what a model writes
(``**bold**``, ``*italic*``, ``~~strike~~``, `` `code` ``, fenced blocks,
``[links](url)``, ``# headings``, ``> quotes``, ``- bullets``) into Telegram
MarkdownV2 in which every reserved character outside an entity is escaped, so
Telegram never rejects the markup. Whatever is not understood is kept as
escaped literal text: the reader sees the original characters.

Telegram's side, the parser that checks this output, lives with the fake
Bot API in :mod:`hermes_trio.testing.telegram_markdown`.

Length: Telegram applies its 4096 limit to the text *after* entity parsing.
The converter never makes that visible text longer than the input (markers
vanish, escapes count once, bullets swap one character for one), so measuring
the original Markdown is a safe upper bound.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..markdown_fence import Fence, open_fence

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
# Tokens of the output. Text is stored unescaped and escaped when joined, so
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
# Inline Markdown: a simplified CommonMark delimiter algorithm. Code spans and
# links are atomic; *, _ and ~ runs are matched by the delimiter stack, which
# keeps the work linear-ish on hostile input (the editor converts the whole
# message on every edit).

_ASCII_PUNCT = frozenset(string.punctuation)
_LINK_URL_RE = re.compile(r"(?:https?://|tg://|mailto:)[^\s]+\Z", re.IGNORECASE)
# Entities that may not contain code (Telegram's nesting rules).
_NO_CODE_INSIDE = frozenset({"bold", "italic", "strike", "link", "quote"})


def _is_punct(ch: str) -> bool:
    return ch in _ASCII_PUNCT or unicodedata.category(ch).startswith("P")


@dataclass(slots=True)
class _Delim:
    char: str
    count: int
    can_open: bool
    can_close: bool
    orig: int
    active: bool = True
    # Matches recorded on this run: (kind, pair id, raw delimiter text).
    opens: list[tuple[str, int, str]] = field(default_factory=list)
    closes: list[tuple[str, int, str]] = field(default_factory=list)


@dataclass(slots=True)
class _Link:
    label: list[Any]
    url: str
    raw: str


_Node = str | _Delim | _Code | _Link


def _parse_inline(s: str, *, links: bool = True) -> list[_Node]:
    nodes: list[_Node] = []
    delims: list[_Delim] = []
    buf: list[str] = []
    n = len(s)
    no_close_bracket_after = -1  # "[" at or after this index has no "]"

    def flush() -> None:
        if buf:
            nodes.append("".join(buf))
            buf.clear()

    i = 0
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n and s[i + 1] in _ASCII_PUNCT:
            buf.append(s[i + 1])
            i += 2
            continue
        if c == "`":
            run = _run_length(s, i, "`")
            close = _find_code_close(s, i + run, run)
            if close < 0:
                buf.append(s[i : i + run])
                i += run
                continue
            content = s[i + run : close]
            if len(content) >= 2 and content[0] == " " and content[-1] == " " and content.strip():
                content = content[1:-1]
            flush()
            nodes.append(_Code(content))
            i = close + run
            continue
        if c in "*_~":
            run = _run_length(s, i, c)
            before = s[i - 1] if i > 0 else " "
            after = s[i + run] if i + run < n else " "
            left = not after.isspace() and (
                not _is_punct(after) or before.isspace() or _is_punct(before)
            )
            right = not before.isspace() and (
                not _is_punct(before) or after.isspace() or _is_punct(after)
            )
            if c == "_":
                can_open = left and (not right or _is_punct(before))
                can_close = right and (not left or _is_punct(after))
            else:
                can_open, can_close = left, right
            if c == "~" and run < 2:
                can_open = can_close = False
            flush()
            d = _Delim(c, run, can_open, can_close, run)
            nodes.append(d)
            delims.append(d)
            i += run
            continue
        if c == "[" and links and i > no_close_bracket_after:
            link, end = _try_link(s, i)
            if link is None and end < 0:
                no_close_bracket_after = i
            if link is not None:
                flush()
                nodes.append(link)
                i = end
                continue
        buf.append(c)
        i += 1
    flush()
    _match_emphasis(delims)
    return nodes


def _run_length(s: str, i: int, ch: str) -> int:
    j = i
    while j < len(s) and s[j] == ch:
        j += 1
    return j - i


def _find_code_close(s: str, start: int, run: int) -> int:
    fence = "`" * run
    j = s.find(fence, start)
    while j >= 0:
        end = j + _run_length(s, j, "`")
        if end - j == run:
            return j
        j = s.find(fence, end)
    return -1


def _try_link(s: str, i: int) -> tuple[_Link | None, int]:
    """A ``[label](url)`` at ``i``: (link, end index), or (None, -1) when no
    ``]`` follows at all, or (None, 0) when this one is not a link."""
    close = s.find("]", i + 1)
    if close < 0:
        return None, -1
    if close + 1 >= len(s) or s[close + 1] != "(":
        return None, 0
    depth = 0
    j = close + 2
    while j < len(s):
        ch = s[j]
        if ch == "\\" and j + 1 < len(s):
            j += 2
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                break
            depth -= 1
        elif ch.isspace():
            break
        j += 1
    if j >= len(s) or s[j] != ")":
        return None, 0
    label = s[i + 1 : close]
    url = s[close + 2 : j]
    if not label.strip() or not _LINK_URL_RE.match(url):
        return None, 0
    return _Link(_parse_inline(label, links=False), url, s[i : j + 1]), j + 1


def _match_emphasis(delims: list[_Delim]) -> None:
    pair = 0
    # Lowest index worth searching for an opener, per (char, closer length % 3)
    # (CommonMark's openers_bottom): failed searches are not repeated.
    bottom: dict[tuple[str, int], int] = {}
    for ci, closer in enumerate(delims):
        if not closer.can_close:
            continue
        while closer.count > 0 and closer.active:
            key = (closer.char, closer.orig % 3)
            found = -1
            for oi in range(ci - 1, bottom.get(key, -1), -1):
                op = delims[oi]
                if not (op.active and op.can_open and op.count > 0 and op.char == closer.char):
                    continue
                if closer.char == "~" and (op.count < 2 or closer.count < 2):
                    continue
                # CommonMark's "rule of 3" keeps `*a**b*`-style runs sane.
                both = op.can_close or closer.can_open
                if both and (op.orig + closer.orig) % 3 == 0 and (op.orig % 3 or closer.orig % 3):
                    continue
                found = oi
                break
            if found < 0:
                bottom[key] = ci - 1
                break
            op = delims[found]
            use = 2 if op.count >= 2 and closer.count >= 2 else 1
            kind = {"~": "strike"}.get(closer.char, "bold" if use == 2 else "italic")
            pair += 1
            raw = closer.char * use
            op.opens.append((kind, pair, raw))
            closer.closes.append((kind, pair, raw))
            op.count -= use
            closer.count -= use
            for mid in delims[found + 1 : ci]:
                mid.active = False


_MARK = {"bold": "*", "italic": "_", "strike": "~"}


def _render(nodes: Sequence[_Node], stack: list[str], out: list[_Tok]) -> None:
    literal: set[int] = set()
    for node in nodes:
        if isinstance(node, str):
            out.append(_Text(node))
        elif isinstance(node, _Code):
            if _NO_CODE_INSIDE.intersection(stack):
                out.append(_Text(node.text))
            else:
                out += [_Marker("`"), node, _Marker("`")]
        elif isinstance(node, _Link):
            if "link" in stack:
                out.append(_Text(node.raw))
                continue
            out.append(_Marker("["))
            stack.append("link")
            _render(node.label, stack, out)
            stack.pop()
            out += [_Marker("]("), _Raw(escape_link_url(node.url)), _Marker(")")]
        else:
            for kind, pid, raw in node.closes:
                if pid in literal:
                    out.append(_Text(raw))
                else:
                    stack.pop()
                    out.append(_Marker(_MARK[kind]))
            out.append(_Text(node.char * node.count))
            # Later matches took the outer characters of the run.
            for kind, pid, raw in reversed(node.opens):
                if kind in stack:
                    # Telegram cannot nest an entity in itself; keep the text.
                    literal.add(pid)
                    out.append(_Text(raw))
                else:
                    stack.append(kind)
                    out.append(_Marker(_MARK[kind]))


def _inline_tokens(s: str, stack: list[str]) -> list[_Tok]:
    out: list[_Tok] = []
    _render(_parse_inline(s), list(stack), out)
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
            # An unterminated fence runs to the end and is closed for it:
            # mid-stream, a half-written code block still renders as code.
            info = fence.info.split()
            lang = info[0] if info and _LANG_RE.match(info[0]) else ""
            code = "\n".join(body)
            block = f"```{lang}\n" + (escape_code(code) + "\n" if body else "") + "```"
            out.append(_Raw(block))
            i += 1
            continue
        out += _line_tokens(line)
        i += 1
    return _join(out)


def _closes_fence(fence: Fence, line: str) -> bool:
    """Whether ``line`` closes ``fence``.

    Looser than :meth:`Fence.closes`, and kept so: only leading spaces count
    as indentation, so a tab or other whitespace after at most three spaces
    may precede the closing run.
    """
    return len(line) - len(line.lstrip(" ")) <= 3 and fence.closes(line.strip())


def _line_tokens(line: str) -> list[_Tok]:
    if _RULE_RE.match(line):
        return [_Text(line)]
    m = _HEADING_RE.match(line)
    if m and m.group("text").strip():
        return [_Marker("*"), *_inline_tokens(m.group("text"), ["bold"]), _Marker("*")]
    m = _QUOTE_RE.match(line)
    if m:
        return [_Marker(">"), *_inline_tokens(m.group("text"), ["quote"])]
    m = _BULLET_RE.match(line)
    if m:
        return [_Text(m.group("indent") + "• "), *_inline_tokens(m.group("text"), [])]
    return _inline_tokens(line, [])
