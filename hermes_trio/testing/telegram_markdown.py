"""Telegram's MarkdownV2 parser, for checking what we send.

``parse_markdown_v2`` follows Telegram's own parser (tdlib's
``parse_markdown_v2``): it returns the text a user sees plus its entities, or
raises ``MarkdownV2Error`` with the message Telegram would give. The fake Bot
API uses it, and the property tests check the converter
(``platforms.telegram.format.to_markdown_v2``) against it. Nothing in the
product parses MarkdownV2, so it lives in the testing kit.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..platforms.telegram.api_types import MessageEntity, MessageEntityType
from ..platforms.telegram.format import RESERVED

__all__ = ["MarkdownV2Error", "ParsedText", "parse_markdown_v2"]


class MarkdownV2Error(ValueError):
    """Telegram would refuse this MarkdownV2 text; ``str()`` is its reason."""


@dataclass(frozen=True, slots=True)
class ParsedText:
    """What the user sees: the text and its entities (UTF-16 offsets)."""

    text: str
    entities: tuple[MessageEntity, ...] = ()


_TYPE_NAMES: dict[MessageEntityType, str] = {
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
    return _Parser(text).parse()


@dataclass(slots=True)
class _Open:
    """An entity opened and not yet closed."""

    kind: MessageEntityType
    argument: str  # a pre block's language
    utf16: int  # where it starts in the visible text (UTF-16 units)
    byte: int  # where it starts in the markup (UTF-8 bytes), for errors
    index: int  # where it starts in the result list (a link's own URL)


# Which character ends the innermost open entity (``c``, then what follows).
_ENDS: dict[MessageEntityType, Callable[[str, str, str], bool]] = {
    "bold": lambda c, nxt, nxt2: c == "*",
    "italic": lambda c, nxt, nxt2: c == "_" and nxt != "_",
    "code": lambda c, nxt, nxt2: c == "`",
    "pre": lambda c, nxt, nxt2: c == "`" and nxt == "`" and nxt2 == "`",
    "text_link": lambda c, nxt, nxt2: c == "]",
    "underline": lambda c, nxt, nxt2: c == "_" and nxt == "_",
    "strikethrough": lambda c, nxt, nxt2: c == "~",
    "spoiler": lambda c, nxt, nxt2: c == "|" and nxt == "|",
    "custom_emoji": lambda c, nxt, nxt2: c == "]",
    "blockquote": lambda c, nxt, nxt2: False,
}
# The one-character openers: the character, what follows it, the entity.
_SIMPLE_OPENERS: dict[str, MessageEntityType] = {
    "*": "bold",
    "~": "strikethrough",
    "[": "text_link",
}


class _Parser:
    """One pass over the markup, as tdlib makes it; ``i`` is the cursor."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.i = 0
        self.result: list[str] = []
        self.entities: list[MessageEntity] = []
        self.nested: list[_Open] = []
        self.utf16 = 0
        self.have_quote = False
        self.can_start_quote = True

    def at(self, k: int) -> str:
        return self.text[k] if k < self.n else ""

    def byte_offset(self, k: int) -> int:
        return len(self.text[:k].encode("utf-8"))

    def cant_find_end(self, entry: _Open) -> MarkdownV2Error:
        name = _TYPE_NAMES.get(entry.kind, entry.kind)
        if entry.kind == "pre" and entry.argument:
            name = "PreCode"
        return MarkdownV2Error(f"Can't find end of {name} entity at byte offset {entry.byte}")

    def parse(self) -> ParsedText:
        while self.i < self.n:
            c = self.text[self.i]
            nxt = self.at(self.i + 1)
            if c == "\\" and nxt and 0 < ord(nxt) <= 126:
                self.escaped(nxt)
                continue
            in_code = bool(self.nested) and self.nested[-1].kind in ("code", "pre")
            reserved = "`" if in_code else RESERVED + "\n"
            if c not in reserved:
                self.utf16 += _utf16(c)
                if c != "\r":
                    self.can_start_quote = False
                self.result.append(c)
                self.i += 1
            elif self.is_end(c, nxt):
                self.close(c)
                self.i += 1
            else:
                self.open(c, nxt)
        return self.finish()

    def escaped(self, ch: str) -> None:
        self.utf16 += 1
        self.result.append(ch)
        if ch != "\r":
            self.can_start_quote = ch == "\n"
        self.i += 2

    def is_end(self, c: str, nxt: str) -> bool:
        if not self.nested:
            return False
        if self.have_quote and c == "\n" and (self.i + 1 == self.n or nxt != ">"):
            return True
        return _ENDS[self.nested[-1].kind](c, nxt, self.at(self.i + 2))

    def open(self, c: str, nxt: str) -> None:
        """Open the entity ``c`` starts (or take a newline, or refuse ``c``)."""
        start = self.i
        argument = ""
        kind: MessageEntityType
        if c in _SIMPLE_OPENERS:
            kind = _SIMPLE_OPENERS[c]
        elif c == "_":
            kind = "underline" if nxt == "_" else "italic"
            self.i += nxt == "_"
        elif c == "|" and nxt == "|":
            self.i += 1
            kind = "spoiler"
        elif c == "`" and nxt == "`" and self.at(self.i + 2) == "`":
            kind = "pre"
            argument = self.open_pre()
        elif c == "`":
            kind = "code"
        elif c == "!" and nxt == "[":
            self.i += 1
            kind = "custom_emoji"
        elif c == "\n":
            self.utf16 += 1
            self.result.append("\n")
            self.can_start_quote = True
            self.i += 1
            return
        elif c == ">" and self.can_start_quote:
            if self.have_quote:
                self.i += 1
                return
            kind = "blockquote"
            self.have_quote = True
        else:
            raise _reserved_error(c)
        self.nested.append(
            _Open(kind, argument, self.utf16, self.byte_offset(start), len(self.result))
        )
        self.i += 1

    def open_pre(self) -> str:
        """Past a pre block's ```` ``` ````, its language and line end; the language."""
        text, n = self.text, self.n
        self.i += 3
        argument = ""
        lang_end = self.i
        while lang_end < n and not text[lang_end].isspace() and text[lang_end] != "`":
            lang_end += 1
        if self.i != lang_end and lang_end < n and text[lang_end] != "`":
            argument = text[self.i : lang_end]
            self.i = lang_end
        if self.at(self.i) in ("\n", "\r"):
            if self.at(self.i + 1) in ("\n", "\r") and self.at(self.i) != self.at(self.i + 1):
                self.i += 2
            else:
                self.i += 1
        self.i -= 1
        return argument

    def close(self, c: str) -> None:
        """End the innermost entity at ``c``."""
        entry = self.nested[-1]
        kind = entry.kind
        if c == "\n" and kind != "blockquote":
            # Only an expandable-quote marker "||" may sit right before the
            # newline that ends a quote; anything else is an unclosed entity.
            if kind != "spoiler" or entry.byte != self.byte_offset(self.i) - 2:
                raise self.cant_find_end(entry)
            self.nested.pop()
            entry = self.nested[-1]
            if entry.kind != "blockquote":
                raise self.cant_find_end(entry)
            kind = "expandable_blockquote"
        skip = self.utf16 == entry.utf16
        language: str | None = None
        url: str | None = None
        if kind in ("underline", "spoiler"):
            self.i += 1
        elif kind == "pre":
            self.i += 2
            if entry.argument:
                language = entry.argument
        elif kind == "text_link":
            link = self.link_url(entry)
            if _PARSER_URL_RE.match(link):
                url = link
            else:
                skip = True
        elif kind == "custom_emoji":
            self.skip_emoji_url()
        elif kind in ("blockquote", "expandable_blockquote"):
            self.have_quote = False
            self.result.append(c)
            self.can_start_quote = True
            self.utf16 += 1
            skip = False
        if not skip:
            length = self.utf16 - entry.utf16
            entity: MessageEntity = {"type": kind, "offset": entry.utf16, "length": length}
            if language is not None:
                entity["language"] = language
            if url is not None:
                entity["url"] = url
            self.entities.append(entity)
        self.nested.pop()

    def link_url(self, entry: _Open) -> str:
        """The URL of the link ending at the cursor's ``]``: its ``(...)``, or its text."""
        text, n = self.text, self.n
        if self.at(self.i + 1) != "(":
            return "".join(self.result[entry.index :])
        self.i += 2
        url_start = self.i
        url_chars: list[str] = []
        while self.i < n and text[self.i] != ")":
            if text[self.i] == "\\" and self.at(self.i + 1) and 0 < ord(self.at(self.i + 1)) <= 126:
                url_chars.append(text[self.i + 1])
                self.i += 2
                continue
            url_chars.append(text[self.i])
            self.i += 1
        if self.at(self.i) != ")":
            raise MarkdownV2Error(
                f"Can't find end of a URL at byte offset {self.byte_offset(url_start)}"
            )
        return "".join(url_chars)

    def skip_emoji_url(self) -> None:
        if self.at(self.i + 1) != "(":
            raise MarkdownV2Error("Custom emoji entity must contain a tg://emoji URL")
        close = self.text.find(")", self.i + 2)
        if close < 0:
            raise MarkdownV2Error(
                "Can't find end of a custom emoji URL at byte offset "
                f"{self.byte_offset(self.i + 2)}"
            )
        self.i = close

    def finish(self) -> ParsedText:
        nested = self.nested
        if self.have_quote:
            kind: MessageEntityType = "blockquote"
            end = len(self.text.encode("utf-8"))
            if nested[-1].kind == "spoiler" and nested[-1].byte == end - 2:
                nested.pop()
                kind = "expandable_blockquote"
            if nested[-1].kind == "blockquote":
                entry = nested.pop()
                if self.utf16 != entry.utf16:
                    length = self.utf16 - entry.utf16
                    self.entities.append({"type": kind, "offset": entry.utf16, "length": length})
        if nested:
            raise self.cant_find_end(nested[-1])
        self.entities.sort(key=lambda e: (e["offset"], -e["length"]))
        return ParsedText("".join(self.result), tuple(self.entities))
