"""Separate think blocks (``<think>…</think>`` and friends) from visible text.

Models that reason in-band wrap the reasoning in tags. :class:`ThinkFilter`
splits a token stream into visible text and reasoning as it arrives, holding
back only a chunk tail that may still turn into a tag; :func:`strip_think_blocks`
cleans a whole final answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["DEFAULT_THINK_TAGS", "Filtered", "ThinkFilter", "is_tag_name", "strip_think_blocks"]

DEFAULT_THINK_TAGS: tuple[str, ...] = (
    "think",
    "thinking",
    "reasoning",
    "thought",
    "REASONING_SCRATCHPAD",
)


@dataclass(frozen=True, slots=True)
class Filtered:
    """What one fed chunk yielded: visible ``text`` and hidden ``reasoning``."""

    text: str = ""
    reasoning: str = ""


_EMPTY = Filtered()


def is_tag_name(name: str) -> bool:
    """Whether ``name`` can be a think tag's: not empty, no ``<``, ``>``,
    ``/`` or white space."""
    return bool(name) and not any(c in name for c in "<>/") and not any(c.isspace() for c in name)


@lru_cache(maxsize=32)
def _tag_tables(
    tags: tuple[str, ...],
) -> tuple[dict[str, str], frozenset[str], list[int], int, frozenset[str], frozenset[str]]:
    names = {tag.lower() for tag in tags}
    for name in names:
        if not is_tag_name(name):
            raise ValueError(f"invalid think tag name: {name!r}")
    # Lowercase open tag -> the closing tag that ends its block.
    opens = {f"<{name}>": f"</{name}>" for name in names}
    orphans = frozenset(opens.values())
    candidates = [*opens, *orphans]
    lengths = sorted({len(c) for c in candidates})
    prefixes = frozenset(c[:k] for c in candidates for k in range(1, len(c)))
    # The character after "<" rules most "<" out at once ("a < b", "<div>").
    first_chars = frozenset(c[1] for c in candidates)
    return opens, orphans, lengths, max(lengths, default=0), prefixes, first_chars


class ThinkFilter:
    """Streaming splitter of think blocks.

    Tags match case-insensitively; ``<tag>`` opens a block that only
    ``</tag>`` of the same name closes, and inside a block every other tag is
    plain reasoning text (blocks do not nest). A closing tag outside any block
    is dropped: models whose chat template opens the block for them emit
    only the ``</think>``, and it must not reach the user.
    """

    __slots__ = (
        "_closing",
        "_first_chars",
        "_held",
        "_lengths",
        "_longest",
        "_opens",
        "_orphans",
        "_prefixes",
    )

    def __init__(self, tags: Sequence[str] = DEFAULT_THINK_TAGS) -> None:
        if isinstance(tags, str):
            raise TypeError("tags must be a sequence of tag names, not a string")
        # Every model step makes a filter; the tag tables are made once per tag set.
        (
            self._opens,
            self._orphans,
            self._lengths,
            self._longest,
            self._prefixes,
            self._first_chars,
        ) = _tag_tables(tuple(tags))
        self._closing: str | None = None
        self._held = ""

    def feed(self, chunk: str) -> Filtered:
        if not self._held and "<" not in chunk:
            if not chunk:
                return _EMPTY
            return Filtered(reasoning=chunk) if self._closing else Filtered(text=chunk)
        s = self._held + chunk
        self._held = ""
        return self._scan(s)

    def flush(self) -> Filtered:
        """End of stream: release the held tail and start over outside any block."""
        held, inside = self._held, self._closing is not None
        self._held = ""
        self._closing = None
        if not held:
            return _EMPTY
        # A held tail never became a tag, so it is what surrounds it.
        return Filtered(reasoning=held) if inside else Filtered(text=held)

    def _scan(self, s: str) -> Filtered:
        text: list[str] = []
        reasoning: list[str] = []
        n = len(s)
        start = 0  # first character not yet emitted
        search = 0  # where to look for the next "<"
        while True:
            i = s.find("<", search)
            if i < 0:
                break
            closing = self._closing
            if closing is not None:
                length = len(closing)
                segment = s[i : i + length].lower()
                if segment == closing:
                    if i > start:
                        reasoning.append(s[start:i])
                    self._closing = None
                    start = search = i + length
                    continue
                if n - i < length and closing.startswith(segment):
                    self._held = s[i:]
                    n = i
                    break
                search = i + 1
                continue
            after = s[i + 1 : i + 2]
            if after and after.lower() not in self._first_chars:
                search = i + 1
                continue
            end = self._match(s, i)
            if end:
                if i > start:
                    text.append(s[start:i])
                start = search = end
                continue
            if n - i < self._longest and s[i:].lower() in self._prefixes:
                self._held = s[i:]
                n = i
                break
            search = i + 1
        if n > start:
            (reasoning if self._closing else text).append(s[start:n])
        return Filtered("".join(text), "".join(reasoning))

    def _match(self, s: str, i: int) -> int:
        """If a tag starts at ``s[i]`` outside a block, act on it and return its end."""
        for length in self._lengths:
            segment = s[i : i + length]
            if len(segment) < length:
                break
            segment = segment.lower()
            closing = self._opens.get(segment)
            if closing is not None:
                self._closing = closing
                return i + length
            if segment in self._orphans:
                return i + length
        return 0


def strip_think_blocks(text: str, tags: Sequence[str] = DEFAULT_THINK_TAGS) -> str:
    """Remove think blocks (including an unclosed trailing one) from a final text."""
    think = ThinkFilter(tags)
    return (think.feed(text).text + think.flush().text).strip()
