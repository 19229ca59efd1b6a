"""Markdown code fences, line by line (CommonMark rules).

The paginator, the terminal's block splitter and the Telegram converter all
need to know where a fenced code block starts and ends; this is the one place
that knows the rules. A few callers keep a deliberately different detail as a
local check next to their call, saying why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Fence", "open_fence"]

# Up to three spaces of indentation, then a run of 3+ backticks or tildes.
# The run is greedy, so ``info`` never starts with the fence character.
_MARKER = re.compile(r" {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True, slots=True)
class Fence:
    """An open code fence."""

    char: str  # "`" or "~"
    length: int  # the opening run; a closing run must be at least this long
    line: str  # the opening line as given, for reopening the block elsewhere
    info: str  # everything after the opening run, unstripped

    @property
    def marker(self) -> str:
        """The shortest run that closes this fence."""
        return self.char * self.length

    def closes(self, line: str) -> bool:
        """Whether ``line`` (without its newline) closes this fence: up to
        three spaces, a run of the same character at least as long, and
        nothing but whitespace after it."""
        m = _MARKER.match(line)
        if m is None:
            return False
        run = m.group(1)
        return run[0] == self.char and len(run) >= self.length and not line[m.end() :].strip()


def open_fence(line: str) -> Fence | None:
    """The fence ``line`` (without its newline) opens, if any."""
    m = _MARKER.match(line)
    if m is None:
        return None
    run = m.group(1)
    info = line[m.end() :]
    # A backtick fence's info string may not contain backticks, which keeps
    # inline ```code``` on one line from opening a block.
    if run[0] == "`" and "`" in info:
        return None
    return Fence(run[0], len(run), line, info)
