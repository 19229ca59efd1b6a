"""Common Markdown, as models write it, to Slack's mrkdwn.

Slack does not render Markdown in ``text``: bold is ``*one star*``, italic
``_underscores_``, strike ``~one tilde~``, links ``<url|label>``, and there
are no headings, tables, or language tags on code fences. ``&``, ``<`` and
``>`` are control characters and must be escaped everywhere, code included
(Slack shows ``&lt;`` as ``<``; a leading ``&gt;`` is still a quote). So a
model can never ping anyone: its ``<@U…>`` or ``<!channel>`` arrive escaped.

What becomes what: headings → bold lines; ``- item`` → ``• item`` (task
boxes ``[ ]``/``[x]`` → ☐/☑); horizontal rules → a line; ``![alt](url)``
→ a link; a table → a code block, so its columns stay aligned; ``\\*``
and the other backslash escapes → the character itself. Code (fenced with
backticks or tildes, or inline) is left exactly as written, escaped.

Pure functions; ``to_mrkdwn`` never raises.
"""

from __future__ import annotations

import re

from ..markdown_fence import open_fence

__all__ = ["escape", "to_mrkdwn"]

_INLINE_CODE = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.DOTALL)
# A URL may hold one level of balanced parentheses (Wikipedia's do).
_LINK = re.compile(r"(!?)\[([^\[\]\n]+)\]\(((?:[^()\s]|\([^()\s]*\))+)\)")
_LINKABLE = ("http://", "https://", "mailto:")
_BARE_URL = re.compile(r"<(https?://[^\s<>|]+)>")
_BOLD_ITALIC = re.compile(r"\*\*\*(?=\S)(.+?)(?<=\S)\*\*\*")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.+?)[ \t#]*$")
_BULLET = re.compile(r"^([ \t]*)[-*+][ \t]+")
_TASK = re.compile(r"\[([ xX])\][ \t]+")
_RULE = re.compile(r"^[ \t]{0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_TABLE_ROW = re.compile(r"^[ \t]*\|.*\|[ \t]*$")
_TABLE_RULE = re.compile(r"^[ \t]*\|?(?:[ \t]*:?-+:?[ \t]*\|)+(?:[ \t]*:?-+:?[ \t]*)?$")
_BACKSLASH_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
# Markers no model text contains: where our own bold stars and held pieces
# (links, escaped characters) go while the rest of the line is converted.
_STAR = "\x01"
_HOLD = "\x02"
_HELD = re.compile(f"{_HOLD}(\\d+){_HOLD}")
RULE_LINE = "──────────"


def escape(text: str) -> str:
    """Slack's three control characters as entities."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(markdown: str) -> str:
    """``markdown`` as Slack mrkdwn."""
    lines = markdown.replace(_STAR, "").replace(_HOLD, "").split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = open_fence(line)
        if fence is not None:
            # Slack shows a language tag as the first line of code: drop it.
            out.append("```")
            i += 1
            while i < len(lines) and not fence.closes(lines[i]):
                out.append(escape(lines[i]))
                i += 1
            # Closed here even when the model has not closed it yet (an
            # answer still being written): Slack shows an open fence as text.
            out.append("```")
            i += 1
        elif _TABLE_ROW.match(line) and i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1]):
            end = i + 2
            while end < len(lines) and _TABLE_ROW.match(lines[end]):
                end += 1
            out.extend(["```", *(escape(row.strip()) for row in lines[i:end]), "```"])
            i = end
        else:
            out.append(_line(line))
            i += 1
    return "\n".join(out)


def _line(line: str) -> str:
    if _RULE.match(line):
        return RULE_LINE
    heading = _HEADING.match(line)
    if heading:
        text = _BOLD_ITALIC.sub(r"\1", heading.group(1))
        text = _BOLD.sub(lambda m: m.group(1) or m.group(2), text)
        return f"{_STAR}{_inline(text)}{_STAR}".replace(_STAR, "*")
    bullet = _BULLET.match(line)
    if bullet:
        rest = line[bullet.end() :]
        box = ""
        task = _TASK.match(rest)
        if task:
            box = "☐ " if task.group(1) == " " else "☑ "
            rest = rest[task.end() :]
        return f"{bullet.group(1)}• {box}{_inline(rest)}".replace(_STAR, "*")
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
        label, url = match.group(2), match.group(3)
        label = _styles(escape(label)).replace(_STAR, "*")
        if not url.startswith(_LINKABLE):
            # Slack would show a relative or odd target as a broken link.
            return hold(f"{label} ({escape(url)})")
        return hold(f"<{escape(url).replace('|', '%7C')}|{label.replace('|', '¦')}>")

    text = _BACKSLASH_ESCAPE.sub(lambda m: hold(escape(m.group(1))), text)
    text = _LINK.sub(link, text)
    text = _BARE_URL.sub(lambda m: hold(f"<{escape(m.group(1))}>"), text)
    text = _styles(escape(text))
    # A link's label may hold an escaped character: two passes put all back.
    for _ in range(2):
        text = _HELD.sub(lambda m: held[int(m.group(1))], text)
    return text


def _styles(text: str) -> str:
    text = _BOLD_ITALIC.sub(lambda m: f"{_STAR}_{m.group(1)}_{_STAR}", text)
    text = _BOLD.sub(lambda m: f"{_STAR}{m.group(1) or m.group(2)}{_STAR}", text)
    text = _ITALIC.sub(r"_\1_", text)
    return _STRIKE.sub(r"~\1~", text)
