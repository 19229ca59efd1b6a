"""What a scripted model saw: the requests it received and the connections
(for the in-process double: the exchanges) they came on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..script import Step

__all__ = ["ConnectionRecord", "RecordedRequest"]


@dataclass
class RecordedRequest:
    """One HTTP request as the scripted model received it."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    connection_id: int
    received_at: float
    body: bytes = b""
    #: The script step that answered it (None for non-model endpoints, and
    #: while a reply function is still deciding).
    step: Step | None = None

    @property
    def stream(self) -> bool:
        return isinstance(self.json, dict) and self.json.get("stream") is True


@dataclass
class ConnectionRecord:
    """One accepted TCP connection (the double: one request and its response)."""

    id: int
    opened_at: float
    closed_at: float | None = None
    #: "client" when we saw EOF/reset from the peer, "server" when we closed it
    #: ourselves (Drop, Stall ending, Connection: close, server shutdown).
    closed_by: Literal["client", "server"] | None = None

    @property
    def closed(self) -> bool:
        return self.closed_at is not None
