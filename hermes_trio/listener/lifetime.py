"""When the server gives up on one client connection, as a small state
machine fed with what happened on it (no sockets, no clock of its own).

A connection waits for a request's head, is busy while a request is
answered, waits again between keep-alive requests, and lingers for a moment
after the server has said its last byte. Each phase has its own deadline:

- a new connection must deliver its first request head within
  ``header_timeout`` of being accepted;
- between keep-alive requests a silent connection may wait ``idle_timeout``;
  once the next head has started it has ``header_timeout`` to finish it;
- while a request is answered the app owns the timing (body timeout,
  streaming), so there is no deadline here;
- after the server closed its sending side it reads and discards for up to
  ``linger`` seconds, so that a client still sending (a body the server
  answered without reading) gets the answer instead of a reset.
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass

from .errors import error_body

__all__ = ["ConnectionLifetime", "ConnectionLimits", "Expiry", "Phase", "raw_error_response"]


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout: float = 10.0
    """Seconds to deliver a request's head (the first one: from the accept)."""
    idle_timeout: float = 30.0
    """Seconds a connection may sit silent between requests."""
    linger: float = 2.0
    """Seconds to drain a client's input after the server's last byte."""


class Phase(enum.Enum):
    WAITING = "waiting"
    """No request on the connection, and no byte of the next one yet."""
    HEAD = "head"
    """Part of a request head arrived; the rest has not."""
    BUSY = "busy"
    """A request is being answered."""
    CLOSING = "closing"
    """The server's sending side is shut; only draining is left."""


class Expiry(enum.Enum):
    IDLE = "idle"
    """Nothing was asked in time: close without a word, as keep-alive does."""
    HEAD = "head"
    """A head started but did not finish in time: answer 408, then close."""
    LINGER = "linger"
    """Draining is over: close now."""


class ConnectionLifetime:
    """Phase and deadline of one connection; ``now`` is the caller's clock."""

    def __init__(self, limits: ConnectionLimits, now: float) -> None:
        self.limits = limits
        self.phase = Phase.WAITING
        self.deadline = now + limits.header_timeout
        # The first head's clock starts at the accept, not at its first byte:
        # a client that connects and then says nothing is a slow head too.
        self._fresh = True

    @property
    def quiet(self) -> bool:
        """No request in flight: closing now loses no answer."""
        return self.phase is not Phase.BUSY

    def received(self, now: float) -> None:
        if self.phase is Phase.WAITING:
            self.phase = Phase.HEAD
            if not self._fresh:
                self.deadline = now + self.limits.header_timeout

    def request_started(self, now: float) -> None:
        if self.phase is not Phase.CLOSING:
            self.phase = Phase.BUSY
            self.deadline = math.inf
            self._fresh = False

    def response_finished(self, now: float) -> None:
        """The answer is out and the connection stays open for the next one."""
        if self.phase is not Phase.CLOSING:
            self.phase = Phase.WAITING
            self.deadline = now + self.limits.idle_timeout
            self._fresh = False

    def closing(self, now: float) -> None:
        if self.phase is not Phase.CLOSING:
            self.phase = Phase.CLOSING
            self.deadline = now + self.limits.linger

    def expired(self, now: float) -> Expiry | None:
        """What to do if the deadline has passed; None while it has not."""
        if now < self.deadline:
            return None
        if self.phase is Phase.CLOSING:
            return Expiry.LINGER
        if self.phase is Phase.HEAD:
            return Expiry.HEAD
        # Nothing asked: browsers open connections ahead of need and expect
        # servers to drop unused ones silently.
        return Expiry.IDLE


_REASONS = {
    400: "Bad Request",
    408: "Request Timeout",
    429: "Too Many Requests",
    503: "Service Unavailable",
}


def raw_error_response(
    status: int, message: str, *, code: str, headers: dict[str, str] | None = None
) -> bytes:
    """A complete HTTP/1.1 error response that closes the connection, for
    answers the listener gives before any request reaches the app."""
    body = json.dumps(error_body(message, status=status, code=code)).encode()
    lines = [
        f"HTTP/1.1 {status} {_REASONS[status]}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
        *(f"{name}: {value}" for name, value in (headers or {}).items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body
