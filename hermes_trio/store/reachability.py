"""Whether the store's database server can be reached: the decisions of
the PostgreSQL store's circuit breaker, pure (the caller gives the time).

While the server is down, a request that needs the store would wait for
the connection pool's whole timeout (10 s, per statement) and hold its turn
slot meanwhile. So the first failed connection marks the database
*unreachable*: from then on every statement is refused at once (a 503
``store_unreachable``) without touching the pool, and one background probe
tries a fresh connection, :data:`PROBE_FIRST` seconds after the failure,
then at doubling intervals up to :data:`PROBE_MOST`. The first probe that
connects marks it reachable again, and statements go through as before.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROBE_FIRST", "PROBE_MOST", "Reachability"]

PROBE_FIRST = 0.25
PROBE_MOST = 5.0


@dataclass
class Reachability:
    first: float = PROBE_FIRST
    most: float = PROBE_MOST
    down_since: float | None = None
    """When the outage began; None while the database is reachable."""
    next_probe: float | None = None
    """When the probe tries again; None while the database is reachable."""
    _interval: float = 0.0

    @property
    def up(self) -> bool:
        """Whether statements may go to the database."""
        return self.down_since is None

    def lost(self, now: float) -> bool:
        """A connection failed at ``now``. True when that begins an outage
        (the probe must start); False during one."""
        if self.down_since is not None:
            return False
        self.down_since = now
        self._interval = self.first
        self.next_probe = now + self.first
        return True

    def probe_failed(self, now: float) -> None:
        """The probe at ``now`` could not connect: the next one waits twice
        as long, at most :attr:`most`."""
        if self.down_since is None:
            return
        self._interval = min(self._interval * 2, self.most)
        self.next_probe = now + self._interval

    def found(self, now: float) -> float:
        """The probe at ``now`` connected: statements go through again.
        Returns how long the outage lasted (0 if there was none)."""
        began, self.down_since, self.next_probe = self.down_since, None, None
        return 0.0 if began is None else now - began
