"""The trio side of :mod:`.intake`: new connections held unread while the
door has no room, served as room frees, refused at the budget's pace.

A held connection is refused without hypercorn: one read of what its
client sent, the door's judgement of the head (h11 only), the refusal's
bytes written straight to the socket and the socket closed; no task, no
protocol object, no app. Whatever the door would not refuse so (a
request that is no turn request, one still uploading, one that found
room) is handed to the listener's usual path with the bytes already read.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable

import trio

from .door import Door, DoorRefusal, read_knock
from .intake import Intake, IntakePolicy
from .lifetime import raw_error_response

__all__ = ["Holding"]

POLL = 0.01
"""Seconds between looks at the room while connections are held: a freed
slot is taken within this."""
REFUSALS_PER_SECOND = 32.0
"""The pace of refusals once the burst is spent (:class:`~.intake.IntakePolicy`):
about 1% of a core, where clients that come back at once would take all
of it."""
REFUSAL_BURST = 512.0
"""Refusals answered at once: a burst of a few hundred is told at once."""
_READ = 2**16
_CHUNK = 32
"""Held connections read in one go before the loop lets others run."""

Held = tuple[trio.SocketStream, str]
HandOver = Callable[[trio.SocketStream, str, bytes], None]
"""Serve a connection: its stream, its client's address, what was read of it."""


class Holding:
    """New connections of a listener whose door may have no room."""

    def __init__(
        self,
        door: Door,
        hand_over: HandOver,
        let_go: Callable[[str], None],
        headers: Callable[[], Iterable[tuple[bytes, bytes]]] = tuple,
        policy: IntakePolicy | None = None,
    ) -> None:
        self.door = door
        self._hand_over = hand_over
        self._let_go = let_go
        """A held connection of that address is gone (refused or closed)."""
        self._headers = headers
        """The headers of every answer (a date's among them): the same
        as the door's refusals through hypercorn carry."""
        policy = policy or IntakePolicy(REFUSALS_PER_SECOND, REFUSAL_BURST)
        self.intake: Intake[Held] = Intake(policy, trio.current_time())
        self.pending = 0
        """Connections handed over whose first request the door has not
        judged yet: each may take a place."""
        self._held = trio.Event()

    def free(self) -> int:
        return self.door.room() - self.pending

    def arrive(self, stream: trio.SocketStream, address: str) -> bool:
        """A new connection: True if it is to be served now (the caller
        serves it, counted in :attr:`pending` until :meth:`judged`); False:
        held here."""
        if self.intake.arrive((stream, address), trio.current_time(), self.free()):
            self.pending += 1
            return True
        self._held.set()
        return False

    def judged(self) -> None:
        """A connection served by :meth:`arrive` or handed over had its
        first request judged by the door, or ended without one."""
        self.pending -= 1

    async def run(self) -> None:
        """Serve and refuse the held for ever; at the end, close them."""
        try:
            while True:
                if not len(self.intake):
                    await self._held.wait()
                    self._held = trio.Event()
                now = trio.current_time()
                for stream, address in self.intake.serve(now, self.free()):
                    self._hand(stream, address, b"")
                refused = self.intake.refuse(now, self.free())
                for start in range(0, len(refused), _CHUNK):
                    for stream, address in refused[start : start + _CHUNK]:
                        self._examine(stream, address)
                    await trio.lowlevel.checkpoint()
                await trio.sleep(POLL)
        finally:
            for stream, address in self.intake.drain():
                stream.socket.close()
                self._let_go(address)

    def _hand(self, stream: trio.SocketStream, address: str, data: bytes) -> None:
        self.pending += 1
        self._hand_over(stream, address, data)

    def _examine(self, stream: trio.SocketStream, address: str) -> None:
        """Read what a held client sent; refuse it on the spot if the door
        says so, else hand it over."""
        sock = stream.socket
        try:
            data = os.read(sock.fileno(), _READ)
        except BlockingIOError:
            self._hand(stream, address, b"")  # nothing sent yet: not a retry's
            return
        except OSError:
            data = b""
        knock = read_knock(data) if data else None
        # Judged as if every place left were taken: it is refused because
        # it waited too long to be served, or there is no room.
        ahead = max(self.pending, self.door.room())
        refusal = self.door.turn_away(knock, ahead) if knock is not None else None
        if data and refusal is None:
            self._hand(stream, address, data)
            return
        if refusal is not None:
            try:
                # The whole request was read (the door judges only those):
                # closing now sends the answer and a FIN, no reset.
                os.write(sock.fileno(), _answer(refusal, tuple(self._headers())))
            except OSError:
                pass
        sock.close()
        self._let_go(address)


@functools.lru_cache(maxsize=64)
def _answer(refusal: DoorRefusal, extra: tuple[tuple[bytes, bytes], ...]) -> bytes:
    """The refusal's bytes: the same few answers over and over in a storm."""
    headers = {name.lower(): value for name, value in refusal.headers}
    headers.update((name.decode("latin-1"), value.decode("latin-1")) for name, value in extra)
    return raw_error_response(refusal.status, refusal.message, code=refusal.code, headers=headers)
