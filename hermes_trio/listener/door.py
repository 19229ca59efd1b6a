"""The door: what the listener asks about a request as soon as its head is
parsed, before hypercorn starts the app for it.

In a burst of many requests at once, most of the server's cost of a
refusal is building the request for the app (an ASGI task, the app's
request and its response) only to say no. At the door a refusal costs a
few writes: the listener answers it with the JSON error itself and closes
the connection. The app's own check still applies to every request the
door lets through or does not judge.

What the door lets in it may hand a :class:`Ticket` for (a place counted
against the room from that moment); the listener gives it back when the
request's answer is over or its connection ends, whichever is first, and
the app may give it back earlier (``leave`` counts once).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import h11

__all__ = ["Door", "DoorRefusal", "Knock", "Ticket", "read_knock"]


@dataclass(frozen=True, slots=True)
class Knock:
    """A request at the door: its head, and whether its whole body came
    with it (already read, so it holds nothing while it uploads)."""

    method: bytes
    path: bytes
    """The request target without its query string."""
    headers: Sequence[tuple[bytes, bytes]]
    """As h11 parsed them: names in lower case."""
    body_here: bool


def read_knock(data: bytes) -> Knock | None:
    """The request at the start of ``data`` (a connection's first read),
    if its head is all there and valid; None otherwise (the listener's
    HTTP machinery then reads it as any other)."""
    connection = h11.Connection(h11.SERVER)
    try:
        connection.receive_data(data)
        event = connection.next_event()
    except h11.RemoteProtocolError:
        return None
    if not isinstance(event, h11.Request):
        return None
    length = 0
    for name, value in event.headers:
        if name == b"content-length":
            length = int(value)  # h11 has checked it is a number
        elif name == b"transfer-encoding":
            length = -1  # chunked: its end is not known here
    target = event.target
    query = target.find(b"?")
    return Knock(
        event.method,
        target if query < 0 else target[:query],
        event.headers,
        length == 0 or (length > 0 and len(connection.trailing_data[0]) >= length),
    )


@dataclass(frozen=True, slots=True)
class DoorRefusal:
    """The answer to a request refused at the door (the connection closes
    after it)."""

    status: int
    message: str
    code: str
    headers: tuple[tuple[str, str], ...] = ()


class Ticket(Protocol):
    """A place a request let in at the door holds until it is over."""

    def leave(self) -> None:
        """Give the place back; only the first call counts."""
        ...


class Door(Protocol):
    def knock(self, request: Knock) -> DoorRefusal | Ticket | None:
        """Refuse ``request``, let it in holding a ticket, or leave it to
        the app (None)."""
        ...

    def room(self) -> int:
        """How many more turn requests would be let in now (0 or less:
        none): while there is none, new connections wait unread
        (:mod:`.intake`)."""
        ...

    def turn_away(self, request: Knock, ahead: int = 0) -> DoorRefusal | None:
        """The refusal :meth:`knock` would give ``request`` now, were
        ``ahead`` more turn requests already let in; None if it would let
        it in or leave it to the app (it takes no place)."""
        ...
