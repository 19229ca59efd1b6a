"""Where to split text that is longer than one platform message allows.

Pure functions and one small state object; no trio, no clock. The editor uses
``Paginator`` while text streams in (pages, once cut, never move) and
``split_all`` for text that is complete.

A break is chosen in this order of preference, always within the limit:
paragraph break, line break, space — all outside a code fence and leaving the
page at least half full — then a line break outside a fence that leaves the
page shorter, then a line break inside a fence, then a hard cut. A page cut inside a fence is closed
with the fence marker and the next page reopens it with the same info string,
so each message renders as a complete code block.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from hermes_trio.consumers.messenger import LengthUnit, measure
from hermes_trio.markdown_fence import Fence, open_fence

__all__ = ["Cut", "Paginator", "cut", "split_all"]


def _closes(fence: Fence, line: str) -> bool:
    """Whether ``line`` closes ``fence``.

    Looser than :meth:`Fence.closes`, and kept so because the paginator has
    always cut this way: only leading spaces count as indentation, so a tab or
    other whitespace after at most three spaces may precede the closing run.
    """
    return len(line) - len(line.lstrip(" ")) <= 3 and fence.closes(line.strip())


def _next_fence(fence: Fence | None, line: str) -> Fence | None:
    """Fence state after ``line``."""
    if fence is None:
        return open_fence(line)
    return None if _closes(fence, line) else fence


def _prefix_widths(text: str, unit: LengthUnit) -> list[int]:
    """``widths[i] == measure(text[:i], unit)`` for every ``i``."""
    widths = [0]
    total = 0
    for ch in text:
        if unit == "chars":
            total += 1
        elif unit == "utf16":
            total += 2 if ord(ch) > 0xFFFF else 1
        else:
            total += len(ch.encode("utf-8", "surrogatepass"))
        widths.append(total)
    return widths


@dataclass(frozen=True, slots=True)
class Cut:
    """One finished page and where the rest of the text continues.

    The continuation is ``reopen + text[resume:]``; ``reopen`` is a fence
    opening line (plus newline) when the page was cut inside a code block.
    """

    page: str
    resume: int
    reopen: str = ""


# Preference ranks; higher wins, then the later position. A short page before
# a code block still beats cutting the block.
_HARD, _FENCE_LINE, _SHORT, _SPACE, _LINE, _PARAGRAPH = range(6)


def cut(text: str, limit: int, unit: LengthUnit) -> Cut:
    """Cut the first page off ``text`` at the best break that fits ``limit``."""
    offset = len(text) - len(text.lstrip())
    body = text[offset:]
    widths = _prefix_widths(body, unit)
    if widths[-1] <= limit:
        return Cut(body.rstrip(), len(text))
    hard = max(1, bisect_right(widths, limit) - 1)
    floor = widths[hard] / 2

    best: tuple[int, int, int, Fence | None] | None = None  # rank, end, resume, fence

    def consider(rank: int, end: int, resume: int, fence: Fence | None) -> None:
        nonlocal best
        if not body[:end].strip():
            return
        if widths[end] < floor:
            if rank < _LINE:
                return
            rank = _SHORT
        if fence is not None and widths[end] + measure("\n" + fence.marker, unit) > limit:
            return
        if best is None or (rank, end) >= (best[0], best[1]):
            best = (rank, end, resume, fence)

    fence: Fence | None = None
    hard_fence: Fence | None = None
    pos = 0
    while pos <= hard:
        nl = body.find("\n", pos)
        end = nl if nl != -1 else len(body)
        line = body[pos:end]
        before = fence
        fence = _next_fence(fence, line)
        if pos <= hard <= end:
            hard_fence = before
        if before is None and fence is None:
            space = body.rfind(" ", pos, min(end, hard + 1))
            if space > pos:
                consider(_SPACE, space, space + 1, None)
        if nl == -1 or nl > hard:
            break
        if fence is None:
            paragraph = body.startswith("\n", nl + 1) or not line.strip()
            consider(_PARAGRAPH if paragraph else _LINE, nl, nl + 1, None)
        else:
            consider(_FENCE_LINE, nl, nl + 1, fence)
        pos = nl + 1

    if best is None:
        end = hard
        if hard_fence is not None:
            budget = limit - measure("\n" + hard_fence.marker, unit)
            end = max(1, bisect_right(widths, budget) - 1)
        best = (_HARD, end, end, hard_fence)

    _, end, resume, at_fence = best
    page = body[:end].rstrip()
    reopen = ""
    if at_fence is not None:
        page = f"{page}\n{at_fence.marker}"
        reopen = at_fence.line.strip() + "\n"  # the opening line, to reopen the block
    return Cut(page, offset + resume, reopen)


def split_all(text: str, limit: int, unit: LengthUnit) -> list[str]:
    """Complete ``text`` as pages of at most ``limit``; none empty."""
    pages: list[str] = []
    rest = text.strip()
    while rest and measure(rest, unit) > limit:
        c = cut(rest, limit, unit)
        tail = rest[c.resume :]
        pages.append(c.page)
        if not tail.strip():
            return pages
        following = (c.reopen + tail).strip()
        # A reopened fence must not stop the text from getting shorter.
        if measure(following, unit) >= measure(rest, unit):
            following = tail.strip()
        rest = following
    if rest:
        pages.append(rest)
    return pages


@dataclass
class Paginator:
    """Pages of one streaming text segment.

    ``raw[:consumed]`` lives in ``frozen`` pages that will not change; the
    live page is ``carry + raw[consumed:]``. Cutting happens as soon as the
    live page plus ``reserve`` (the cursor) would exceed the limit, so the
    live page always fits with its cursor.
    """

    limit: int
    unit: LengthUnit
    reserve: str = ""
    raw: str = ""
    consumed: int = 0
    carry: str = ""
    frozen: list[str] = field(default_factory=list)

    def live(self) -> str:
        """The live page as shown (without cursor); empty until text follows
        a cut, so a reopened fence is never shown on its own."""
        if not self.raw[self.consumed :].strip():
            return ""
        return (self.carry + self.raw[self.consumed :]).strip()

    def append(self, text: str, *, paginate: bool = True) -> None:
        self.raw += text
        if not paginate:
            return
        live = self.live()
        while live and measure(live + self.reserve, self.unit) > self.limit:
            before = measure(live, self.unit)
            body = self.carry + self.raw[self.consumed :]
            c = cut(body, self.limit, self.unit)
            if c.resume >= len(self.carry):
                self.consumed += c.resume - len(self.carry)
                self.carry = c.reopen
            else:
                self.carry = c.reopen + self.carry[c.resume :]
            self.frozen.append(c.page)
            live = self.live()
            if measure(live, self.unit) >= before:
                self.carry = ""  # pathological fence line; progress beats pretty output
                live = self.live()

    def finalize(self, text: str) -> list[str]:
        """Pages for the complete ``text``, reusing frozen pages when it
        still starts with what they show (the usual case)."""
        text = text.strip()
        prefix = self.raw[: self.consumed].lstrip()
        if self.frozen and prefix and text.startswith(prefix):
            rest = text[len(prefix) :]
            if not rest.strip():
                return list(self.frozen)
            return [*self.frozen, *split_all(self.carry + rest, self.limit, self.unit)]
        return split_all(text, self.limit, self.unit)
