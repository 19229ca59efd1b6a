"""When ``serve --workers`` starts a worker again, and when it gives up.

Pure decisions, no clock and no processes: the supervisor in
:mod:`hermes_trio.cli.workers` tells the plan what happened (a worker
serves, a worker ended after so many seconds) and sleeps on trio's clock.

- A worker that served and then died is started again after a short wait
  that doubles while it keeps dying (``initial`` … ``maximum``) and starts
  over once a run lasted ``healthy_run`` seconds.
- A worker that ends before it serves failed at start-up. While the server
  is being launched (not all workers have served yet) that ends the
  supervisor at once: the supervisor has just checked the configuration and
  the store itself, so what stops a worker now stops the next one too, and
  the user gets its one line as fast as from a single process. Later (a
  replacement that cannot start), ``start_attempts`` failures in a row of
  one worker end it.
"""

from __future__ import annotations

from ..retry import Backoff

__all__ = ["HEALTHY_RUN", "RESTART_INITIAL", "RESTART_MAX", "START_ATTEMPTS", "RestartPlan"]

RESTART_INITIAL = 0.25
RESTART_MAX = 8.0
# A worker that served this many seconds before it died was healthy: its
# next restart waits the shortest time again.
HEALTHY_RUN = 30.0
START_ATTEMPTS = 3


class RestartPlan:
    """The restart decisions for ``count`` workers, numbered from 0."""

    def __init__(
        self,
        count: int,
        *,
        initial: float = RESTART_INITIAL,
        maximum: float = RESTART_MAX,
        healthy_run: float = HEALTHY_RUN,
        start_attempts: int = START_ATTEMPTS,
    ) -> None:
        self.count = count
        self.healthy_run = healthy_run
        self.start_attempts = start_attempts
        self.launched = False
        """Every worker has served at least once: the server is up."""
        self._served: set[int] = set()
        self._backoff = [Backoff(initial, maximum) for _ in range(count)]
        self._failed_starts = [0] * count

    def served(self, index: int) -> bool:
        """Worker ``index`` serves now. True the first time this makes every
        worker serve: the moment to say the server is up."""
        self._failed_starts[index] = 0
        if self.launched:
            return False
        self._served.add(index)
        self.launched = len(self._served) == self.count
        return self.launched

    def ended(self, index: int, *, ran: float, served: bool) -> float | None:
        """Worker ``index`` ended after ``ran`` seconds, having served or
        not: seconds to wait before starting it again, or None to give up."""
        if not served:
            if not self.launched:
                return None
            self._failed_starts[index] += 1
            if self._failed_starts[index] >= self.start_attempts:
                return None
        elif ran >= self.healthy_run:
            self._backoff[index].reset()
        return self._backoff[index].next()
