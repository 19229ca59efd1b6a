"""How many client connections one serving process can hold: pure
arithmetic over its limit on open files (``RLIMIT_NOFILE``), and how many
of them one client address may take.

Past the open-files limit nothing fails where it should: ``accept`` waits,
but a connection already accepted fails when its stream opens its
connection to the model server (``EMFILE``), and the client sees an error
mid-answer instead of a clean 503 up front. So the number of connections
is sized to what the limit holds, with room for everything else the
process keeps open.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "FILES_PER_CONNECTION",
    "FILES_PER_TURN",
    "FILES_RESERVED",
    "ConnectionRoom",
    "connection_room",
    "per_client_limit",
]

FILES_PER_CONNECTION = 2
"""A client's socket, and the model server's connection behind its stream."""
FILES_PER_TURN = 4
"""What a running turn may hold besides: a tool's process and its pipes."""
FILES_RESERVED = 192
"""The process's own: the interpreter and its libraries, the store, the
listening and control sockets, trio's wake-up sockets and the like (64);
idle kept-alive connections to the model server (at most 64); connections
being refused (at most 64 linger at once)."""


@dataclass(frozen=True)
class ConnectionRoom:
    """What ``open_files`` descriptors hold, against what was asked for."""

    wanted: int
    """``max_connections`` as configured."""
    fits: int
    """Connections the limit holds (at least 1)."""
    needed: int
    """Open files ``wanted`` connections would need."""

    @property
    def max_connections(self) -> int:
        return min(self.wanted, self.fits)

    @property
    def reduced(self) -> bool:
        return self.fits < self.wanted


def connection_room(open_files: int, *, wanted: int, turns: int | None) -> ConnectionRoom:
    """Room for client connections under a limit of ``open_files``, with up
    to ``turns`` turns running besides (``max_concurrent``); ``None``: a
    turn per connection (``max_concurrent: auto``, whose ceiling is the
    connections served)."""
    if turns is None:
        per_connection = FILES_PER_CONNECTION + FILES_PER_TURN
        fits = max(1, (open_files - FILES_RESERVED) // per_connection)
        return ConnectionRoom(wanted, fits, FILES_RESERVED + per_connection * wanted)
    fixed = FILES_RESERVED + FILES_PER_TURN * turns
    fits = max(1, (open_files - fixed) // FILES_PER_CONNECTION)
    return ConnectionRoom(wanted, fits, fixed + FILES_PER_CONNECTION * wanted)


def per_client_limit(max_connections: int, configured: int | None) -> int:
    """Connections one client address may hold: as configured, else half of
    ``max_connections`` (at least 1), so that no one client can take every
    slot."""
    if configured is not None:
        return configured
    return max(1, max_connections // 2)
