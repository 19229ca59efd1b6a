"""Common Markdown, as models write it, to Slack's mrkdwn.

Slack does not render Markdown in ``text``: bold is ``*one star*``, italic
``_underscores_``, strike ``~one tilde~``, links ``<url|label>``, and there
are no headings or language tags on code fences. ``&``, ``<`` and ``>`` are
control characters and must be escaped everywhere, code included (Slack
shows ``&lt;`` as ``<``). Code is otherwise left exactly as written.

Pure functions; ``to_mrkdwn`` never raises.
"""

from __future__ import annotations

import re

__all__ = ["escape", "to_mrkdwn"]

_FENCE = re.compile(r"^[ \t]*```")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_LINK = re.compile(r"\[([^\[\]\n]+)\]\(([^()\s]+)\)")
_BARE_URL = re.compile(r"<(https?://[^\s<>|]+)>")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.+?)[ \t#]*$")
_BULLET = re.compile(r"^([ \t]*)[-*+][ \t]+")
# Markers no model text contains: where our own bold stars and links go
# while the rest of the line is converted.
_STAR = "\x01"
_HOLD = "\x02"


def escape(text: str) -> str:
    """Slack's three control characters as entities."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(markdown: str) -> str:
    """``markdown`` as Slack mrkdwn."""
    markdown = markdown.replace(_STAR, "").replace(_HOLD, "")
    out: list[str] = []
    in_fence = False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            # Slack shows a language tag as the first line of code: drop it.
            out.append("```")
            in_fence = not in_fence
        elif in_fence:
            out.append(escape(line))
        else:
            out.append(_line(line))
    return "\n".join(out)


def _line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading:
        text = _BOLD.sub(lambda m: m.group(1) or m.group(2), heading.group(1))
        return f"{_STAR}{_inline(text)}{_STAR}".replace(_STAR, "*")
    bullet = _BULLET.match(line)
    if bullet:
        return f"{bullet.group(1)}• {_inline(line[bullet.end() :])}".replace(_STAR, "*")
    return _inline(line).replace(_STAR, "*")


def _inline(text: str) -> str:
    """Inline code spans kept as they are (escaped); the rest converted."""
    pieces: list[str] = []
    at = 0
    for code in _INLINE_CODE.finditer(text):
        pieces.append(_prose(text[at : code.start()]))
        pieces.append(f"`{escape(code.group(2))}`")
        at = code.end()
    pieces.append(_prose(text[at:]))
    return "".join(pieces)


def _prose(text: str) -> str:
    held: list[str] = []

    def hold(rendered: str) -> str:
        held.append(rendered)
        return f"{_HOLD}{len(held) - 1}{_HOLD}"

    def link(match: re.Match[str]) -> str:
        label, url = match.group(1), match.group(2)
        label = _styles(escape(label)).replace("|", "¦")
        return hold(f"<{escape(url).replace('|', '%7C')}|{label}>")

    text = _LINK.sub(link, text)
    text = _BARE_URL.sub(lambda m: hold(f"<{escape(m.group(1))}>"), text)
    text = _styles(escape(text))
    return re.sub(f"{_HOLD}(\\d+){_HOLD}", lambda m: held[int(m.group(1))], text)


def _styles(text: str) -> str:
    text = _BOLD.sub(lambda m: f"{_STAR}{m.group(1) or m.group(2)}{_STAR}", text)
    text = _ITALIC.sub(r"_\1_", text)
    return _STRIKE.sub(r"~\1~", text)
