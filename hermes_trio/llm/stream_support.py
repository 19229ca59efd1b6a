"""Whether to ask a model for a streamed answer.

A 4xx answer to a streaming request usually says the request was bad (too
long for the context, a field a strict server refuses), not that the server
cannot stream. Only a non-streamed retry of the same request that succeeds
shows that streaming itself was refused; only that confirmation turns
streaming off, for one model on one server (an o1-style model that cannot
stream says nothing about the server's other models), and only for
:attr:`TTL` seconds: a server that was upgraded, or a refusal that was a
fluke, gets streaming requests again afterwards.
"""

from __future__ import annotations

__all__ = ["StreamKey", "StreamSupport"]

#: (base URL, model name)
StreamKey = tuple[str, str]


class StreamSupport:
    """Per model and server: the time until which it is asked without ``stream``."""

    TTL = 600.0

    __slots__ = ("_until",)

    def __init__(self) -> None:
        self._until: dict[StreamKey, float] = {}

    def allows(self, key: StreamKey, *, now: float) -> bool:
        until = self._until.get(key)
        if until is None:
            return True
        if now >= until:
            del self._until[key]
            return True
        return False

    def refused(self, key: StreamKey, *, now: float) -> None:
        """A streamed request was refused and the same one without streaming
        succeeded (or the server answered a stream request with plain JSON)."""
        self._until[key] = now + self.TTL
