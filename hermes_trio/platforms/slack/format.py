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

Inline Markdown is parsed by markdown-it-py (CommonMark's rules, the same
engine as the Telegram converter) and rendered from its tokens; blocks are
line-based, so each line of an answer being written converts on its own.

Pure functions; ``to_mrkdwn`` never raises.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from markdown_it.token import Token

from ...markdown_fence import open_fence
from ..markdown_inline import inline_parser, inline_tokens, with_contents

__all__ = ["escape", "to_mrkdwn"]

_PARSER = inline_parser(autolinks=True)
_LINKABLE = ("http://", "https://", "mailto:")
_MARKS = {"strong": "*", "em": "_", "s": "~"}
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.+?)[ \t#]*$")
_BULLET = re.compile(r"^([ \t]*)[-*+][ \t]+")
_TASK = re.compile(r"\[([ xX])\][ \t]+")
_RULE = re.compile(r"^[ \t]{0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_TABLE_ROW = re.compile(r"^[ \t]*\|.*\|[ \t]*$")
_TABLE_RULE = re.compile(r"^[ \t]*\|?(?:[ \t]*:?-+:?[ \t]*\|)+(?:[ \t]*:?-+:?[ \t]*)?$")
# Never passed on: Slack has no use for them, and the converter has always
# dropped them.
_DROPPED = str.maketrans("", "", "\x01\x02")
RULE_LINE = "──────────"


def escape(text: str) -> str:
    """Slack's three control characters as entities."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(markdown: str) -> str:
    """``markdown`` as Slack mrkdwn."""
    lines = markdown.translate(_DROPPED).split("\n")
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


# A message is converted whole on every edit while it streams: its finished
# lines come from here.
@lru_cache(maxsize=512)
def _line(line: str) -> str:
    if _RULE.match(line):
        return RULE_LINE
    heading = _HEADING.match(line)
    if heading:
        # The whole line is bold already: bold inside it would end it early.
        return f"*{_inline(heading.group(1), bold=False)}*"
    bullet = _BULLET.match(line)
    if bullet:
        rest = line[bullet.end() :]
        box = ""
        task = _TASK.match(rest)
        if task:
            box = "☐ " if task.group(1) == " " else "☑ "
            rest = rest[task.end() :]
        return f"{bullet.group(1)}• {box}{_inline(rest)}"
    return _inline(line)


def _inline(text: str, *, bold: bool = True) -> str:
    tokens = _strong_outside(
        [t for t in inline_tokens(_PARSER, text) if t.type != "text" or t.content]
    )
    return "".join(_render(tokens, bold=bold, in_link=False))


def _strong_outside(tokens: list[Token]) -> list[Token]:
    """``***x***`` parses as italic around bold; Slack's habit is ``*_x_*``."""
    for i in range(len(tokens) - 1):
        if tokens[i].type != "em_open" or tokens[i + 1].type != "strong_open":
            continue
        level = tokens[i + 1].level
        close = next(
            (j for j in range(i + 2, len(tokens)) if tokens[j].level == level),
            len(tokens),
        )
        if close + 1 < len(tokens) and tokens[close + 1].type == "em_close":
            tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
            tokens[close], tokens[close + 1] = tokens[close + 1], tokens[close]
    return tokens


def _render(tokens: Sequence[Token], *, bold: bool, in_link: bool) -> list[str]:
    out: list[str] = []
    for tok, inner in with_contents(tokens):
        name, _, edge = tok.type.rpartition("_")
        if tok.type == "code_inline":
            out.append(f"`{escape(tok.content)}`")
        elif name in _MARKS and edge in ("open", "close"):
            out.append(_MARKS[name] if bold or name != "strong" else "")
        elif tok.type in ("link_open", "image"):
            label = "".join(_render(inner, bold=bold, in_link=True))
            # A link cannot hold a link: inside one, a link is its words.
            attr = "src" if tok.type == "image" else "href"
            out.append(label if in_link else _link(tok, label, attr=attr))
        else:
            out.append(escape(tok.content))
    return out


def _link(tok: Token, label: str, *, attr: str) -> str:
    url = str(tok.attrGet(attr) or "")
    if tok.markup == "autolink":
        # ``<https://…>`` Slack shows as a link; any other scheme as text.
        return f"<{escape(url)}>" if url.startswith(_LINKABLE[:2]) else escape(f"<{url}>")
    if not url.startswith(_LINKABLE) or any(c.isspace() for c in url):
        # Slack would show a relative or odd target as a broken link.
        return f"{label} ({escape(url)})"
    return f"<{escape(url).replace('|', '%7C')}|{label.replace('|', '¦')}>"
