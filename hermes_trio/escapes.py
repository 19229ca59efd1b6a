"""Text from outside, made safe to show: control characters and
bidirectional overrides written as visible escapes.

A request's path, an MCP server's error, its tool names and its stderr are
someone else's words. Written raw into a log line or onto a terminal, a
newline forges a log line, an escape sequence repaints the terminal and a
right-to-left override (U+202E) disguises what is shown. Every value that
came from outside goes through :func:`escape_controls` before a log line or
a terminal view shows it.

This module imports nothing of hermes-trio's, so every layer may use it.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["escape_controls", "escape_log_records"]


def _escaped(char: str) -> str:
    if char.isprintable():
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape_controls(text: str) -> str:
    """``text`` with every character that is not printable written as a
    visible escape (``\\x0a``): C0 and C1 controls (a newline, ``%0a`` in a
    path, an escape sequence for the terminal), a line separator a log
    shipper splits on (U+2028, U+0085) and the bidirectional controls
    (U+200E/F, U+202A-U+202E, U+2066-U+2069) must not forge or disguise a
    log line. Printable text of any script passes unchanged."""
    if text.isprintable():
        return text
    return "".join(_escaped(char) for char in text)


_escaped_loggers: set[str] = set()


def _outside(name: str) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in _escaped_loggers)


def escape_log_records(*loggers: str) -> None:
    """Escape the message of every record of ``loggers`` (and their
    children) as it is made, for every handler: for libraries that log
    their peer's words (the ``mcp`` SDK logs what a server sent) in lines
    we do not write ourselves. Tracebacks keep their newlines."""
    if not _escaped_loggers:
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            if _outside(record.name):
                message = record.getMessage()
                escaped = escape_controls(message)
                if escaped != message:
                    record.msg, record.args = escaped, None
            return record

        logging.setLogRecordFactory(factory)
    _escaped_loggers.update(loggers)
