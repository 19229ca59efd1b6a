"""Which new connections the listener reads now, which wait, and how many
of the waiting it may refuse: pure, on the caller's clock.

A refusal costs little at the door, but clients that ask again at once,
Retry-After or not, make the number of refusals whatever the core allows:
each answer brings the next request. However cheap a refusal is, they
then take the core from the streams already admitted. So while there is
no room, a new connection is accepted and *held* unread (a socket and a
place in a queue, nothing more): held, it costs nothing, and its client
waits for its answer instead of asking again.

- Room frees (a turn ends, the limit grows): the held are read and served,
  oldest first while the oldest has waited under ``fifo_wait``, newest
  first beyond it (adaptive LIFO): under a lasting storm the request let
  in is a fresh one, so the streams admitted start at once instead of
  after a wait in the queue, and the oldest are the ones refused.
- One held longer than ``serve_within`` is not served any more, only
  refused: a stream that starts after its client waited that long is
  already late, and the place goes to one that can start in time.
- The held are refused oldest first within a budget of ``refusals_per_second``
  (a token bucket holding ``burst``): a burst is refused at once, a storm
  at a pace that leaves the core to the streams, however often its
  clients come back.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Intake", "IntakePolicy"]

T = TypeVar("T")


@dataclass(frozen=True)
class IntakePolicy:
    refusals_per_second: float = 32.0
    """Held connections read (to refuse them, or serve one that is not a
    turn request) each second once the burst is spent."""
    burst: float = 512.0
    """Held connections read at once before the pace applies: a burst of
    a few hundred is answered at once, as before."""
    fifo_wait: float = 0.5
    """Seconds the oldest held may have waited for it still to go first."""
    serve_within: float = 1.0
    """Seconds after which a held connection is only refused."""

    def __post_init__(self) -> None:
        if self.refusals_per_second <= 0 or self.burst < 1:
            raise ValueError(
                "expected refusals_per_second > 0 and burst >= 1, got "
                f"{self.refusals_per_second} and {self.burst}"
            )
        if not 0 <= self.fifo_wait <= self.serve_within:
            raise ValueError(
                "expected 0 <= fifo_wait <= serve_within, got "
                f"{self.fifo_wait} and {self.serve_within}"
            )


class Intake(Generic[T]):
    """The held connections (any ``T``) and the refusal budget. ``free``,
    wherever it is asked for: the turn requests the server would let in
    now, less those on their way that have not been judged yet."""

    def __init__(self, policy: IntakePolicy, now: float) -> None:
        self.policy = policy
        self._held: deque[tuple[float, T]] = deque()
        self._tokens = policy.burst
        self._filled_at = now

    def __len__(self) -> int:
        return len(self._held)

    def arrive(self, item: T, now: float, free: int) -> bool:
        """A new connection: True to read it now; False, it is held (there
        is no room, or others wait before it)."""
        if not self._held and free > 0:
            return True
        self._held.append((now, item))
        return False

    def serve(self, now: float, free: int) -> list[T]:
        """The held to read now, one a free place: the oldest while it has
        waited under ``fifo_wait``, else the newest, of those held under
        ``serve_within``."""
        taken: list[T] = []
        while self._held and len(taken) < free:
            if now - self._held[0][0] <= self.policy.fifo_wait:
                taken.append(self._held.popleft()[1])
            elif now - self._held[-1][0] <= self.policy.serve_within:
                taken.append(self._held.pop()[1])
            else:
                break  # every one held has waited too long: refused as the budget allows
        return taken

    def refuse(self, now: float, free: int) -> list[T]:
        """The held to read now and refuse (unless a read one is not a
        turn request: then it is served), oldest first, as the budget
        allows; while there is room (:meth:`serve` took what it could),
        only those held too long to be served, and up to one a free place
        beyond the budget: its client, told at once, asks again and finds
        the place (refusals bounded by the places that free, not by how
        often clients ask)."""
        self._fill(now)
        if free > 0:
            stale = 0
            while stale < len(self._held) and now - self._held[stale][0] > self.policy.serve_within:
                stale += 1
            count = min(stale, free + int(self._tokens))
            self._tokens -= max(0, count - free)
            return [self._held.popleft()[1] for _ in range(count)]
        count = min(len(self._held), int(self._tokens))
        self._tokens -= count
        return [self._held.popleft()[1] for _ in range(count)]

    def wait(self, now: float) -> float:
        """Seconds until the budget allows the next refusal (0: now)."""
        self._fill(now)
        return max(0.0, (1 - self._tokens) / self.policy.refusals_per_second)

    def drain(self) -> list[T]:
        """Every held one, at shutdown."""
        items = [item for _, item in self._held]
        self._held.clear()
        return items

    def _fill(self, now: float) -> None:
        elapsed = max(0.0, now - self._filled_at)
        self._filled_at = now
        self._tokens = min(
            self.policy.burst, self._tokens + elapsed * self.policy.refusals_per_second
        )
