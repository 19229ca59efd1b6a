"""Telegram's MarkdownV2 parser, for checking what we send.

``parse_markdown_v2`` follows Telegram's own parser (tdlib's
``parse_markdown_v2``): it returns the text a user sees plus its entities, or
raises ``MarkdownV2Error`` with the message Telegram would give. The fake Bot
API uses it, and the property tests check the converter
(``platforms.telegram_format.to_markdown_v2``) against it. Nothing in the
product parses MarkdownV2, so it lives in the testing kit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..platforms.telegram_format import RESERVED

__all__ = ["MarkdownV2Error", "ParsedText", "parse_markdown_v2"]


class MarkdownV2Error(ValueError):
    """Telegram would refuse this MarkdownV2 text; ``str()`` is its reason."""


@dataclass(frozen=True, slots=True)
class ParsedText:
    """What the user sees: the text and its entities (UTF-16 offsets)."""

    text: str
    entities: tuple[dict[str, Any], ...] = ()


_TYPE_NAMES = {
    "bold": "Bold",
    "italic": "Italic",
    "underline": "Underline",
    "strikethrough": "Strikethrough",
    "spoiler": "Spoiler",
    "code": "Code",
    "pre": "Pre",
    "text_link": "TextUrl",
    "custom_emoji": "CustomEmoji",
    "blockquote": "BlockQuote",
}
_PARSER_URL_RE = re.compile(
    r"(?:(?:https?|tg|ton|mailto):|(?:[\w-]+\.)+[a-z]{2,}(?:[/?#:]|\Z))", re.IGNORECASE
)


def _reserved_error(ch: str) -> MarkdownV2Error:
    return MarkdownV2Error(
        f"Character '{ch}' is reserved and must be escaped with the preceding '\\'"
    )


def _utf16(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


def parse_markdown_v2(text: str) -> ParsedText:
    """Parse MarkdownV2 the way Telegram does (tdlib's algorithm)."""
    result: list[str] = []
    entities: list[dict[str, Any]] = []
    # Open entities: [type, argument, utf16 offset, byte offset, result index]
    nested: list[list[Any]] = []
    utf16 = 0
    have_quote = False
    can_start_quote = True
    n = len(text)

    def at(k: int) -> str:
        return text[k] if k < n else ""

    def byte_offset(k: int) -> int:
        return len(text[:k].encode("utf-8"))

    def cant_find_end(entry: list[Any]) -> MarkdownV2Error:
        name = _TYPE_NAMES.get(entry[0], entry[0])
        if entry[0] == "pre" and entry[1]:
            name = "PreCode"
        return MarkdownV2Error(f"Can't find end of {name} entity at byte offset {entry[3]}")

    i = 0
    while i < n:
        c = text[i]
        nxt = at(i + 1)
        if c == "\\" and nxt and 0 < ord(nxt) <= 126:
            i += 1
            utf16 += 1
            result.append(nxt)
            if nxt != "\r":
                can_start_quote = nxt == "\n"
            i += 1
            continue
        in_code = bool(nested) and nested[-1][0] in ("code", "pre")
        reserved = "`" if in_code else RESERVED + "\n"
        if c not in reserved:
            utf16 += _utf16(c)
            if c != "\r":
                can_start_quote = False
            result.append(c)
            i += 1
            continue

        top = nested[-1][0] if nested else None
        if top is None:
            is_end = False
        elif have_quote and c == "\n" and (i + 1 == n or nxt != ">"):
            is_end = True
        else:
            is_end = {
                "bold": c == "*",
                "italic": c == "_" and nxt != "_",
                "code": c == "`",
                "pre": c == "`" and nxt == "`" and at(i + 2) == "`",
                "text_link": c == "]",
                "underline": c == "_" and nxt == "_",
                "strikethrough": c == "~",
                "spoiler": c == "|" and nxt == "|",
                "custom_emoji": c == "]",
                "blockquote": False,
            }[top]

        if not is_end:
            start = i
            argument = ""
            if c == "_":
                if nxt == "_":
                    kind = "underline"
                    i += 1
                else:
                    kind = "italic"
            elif c == "*":
                kind = "bold"
            elif c == "~":
                kind = "strikethrough"
            elif c == "|":
                if nxt != "|":
                    raise _reserved_error(c)
                i += 1
                kind = "spoiler"
            elif c == "[":
                kind = "text_link"
            elif c == "`":
                if nxt == "`" and at(i + 2) == "`":
                    i += 3
                    kind = "pre"
                    lang_end = i
                    while lang_end < n and not text[lang_end].isspace() and text[lang_end] != "`":
                        lang_end += 1
                    if i != lang_end and lang_end < n and text[lang_end] != "`":
                        argument = text[i:lang_end]
                        i = lang_end
                    if at(i) in ("\n", "\r"):
                        if at(i + 1) in ("\n", "\r") and at(i) != at(i + 1):
                            i += 2
                        else:
                            i += 1
                    i -= 1
                else:
                    kind = "code"
            elif c == "!":
                if nxt != "[":
                    raise _reserved_error(c)
                i += 1
                kind = "custom_emoji"
            elif c == "\n":
                utf16 += 1
                result.append("\n")
                can_start_quote = True
                i += 1
                continue
            elif c == ">":
                if not can_start_quote:
                    raise _reserved_error(c)
                if have_quote:
                    i += 1
                    continue
                kind = "blockquote"
                have_quote = True
            else:
                raise _reserved_error(c)
            nested.append([kind, argument, utf16, byte_offset(start), len(result)])
            i += 1
            continue

        # End of an entity.
        entry = nested[-1]
        kind = entry[0]
        if c == "\n" and kind != "blockquote":
            # Only an expandable-quote marker "||" may sit right before the
            # newline that ends a quote; anything else is an unclosed entity.
            if kind != "spoiler" or entry[3] != byte_offset(i) - 2:
                raise cant_find_end(entry)
            nested.pop()
            entry = nested[-1]
            kind = entry[0]
            if kind != "blockquote":
                raise cant_find_end(entry)
            kind = "expandable_blockquote"
        skip = utf16 == entry[2]
        extra: dict[str, Any] = {}
        if kind in ("underline", "spoiler"):
            i += 1
        elif kind == "pre":
            i += 2
            if entry[1]:
                extra["language"] = entry[1]
        elif kind == "text_link":
            if at(i + 1) != "(":
                url = "".join(result[entry[4] :])
            else:
                i += 2
                url_start = i
                url_chars: list[str] = []
                while i < n and text[i] != ")":
                    if text[i] == "\\" and at(i + 1) and 0 < ord(at(i + 1)) <= 126:
                        url_chars.append(text[i + 1])
                        i += 2
                        continue
                    url_chars.append(text[i])
                    i += 1
                if at(i) != ")":
                    raise MarkdownV2Error(
                        f"Can't find end of a URL at byte offset {byte_offset(url_start)}"
                    )
                url = "".join(url_chars)
            if _PARSER_URL_RE.match(url):
                extra["url"] = url
            else:
                skip = True
        elif kind == "custom_emoji":
            if at(i + 1) != "(":
                raise MarkdownV2Error("Custom emoji entity must contain a tg://emoji URL")
            close = text.find(")", i + 2)
            if close < 0:
                raise MarkdownV2Error(
                    f"Can't find end of a custom emoji URL at byte offset {byte_offset(i + 2)}"
                )
            i = close
        elif kind in ("blockquote", "expandable_blockquote"):
            have_quote = False
            result.append(c)
            can_start_quote = True
            utf16 += 1
            skip = False
        if not skip:
            entities.append({"type": kind, "offset": entry[2], "length": utf16 - entry[2], **extra})
        nested.pop()
        i += 1

    if have_quote:
        kind = "blockquote"
        if nested[-1][0] == "spoiler" and nested[-1][3] == len(text.encode("utf-8")) - 2:
            nested.pop()
            kind = "expandable_blockquote"
        if nested[-1][0] == "blockquote":
            entry = nested.pop()
            if utf16 != entry[2]:
                entities.append({"type": kind, "offset": entry[2], "length": utf16 - entry[2]})
    if nested:
        raise cant_find_end(nested[-1])
    entities.sort(key=lambda e: (e["offset"], -e["length"]))
    return ParsedText("".join(result), tuple(entities))
