"""The shared store: one PostgreSQL database (``store.url``), for several
``serve`` instances on several machines.

psycopg 3's async API runs on asyncio only, so under trio every statement
runs in a worker thread (``trio.to_thread.run_sync``) on a connection from
psycopg's own pool, behind a :class:`trio.CapacityLimiter` as large as the
pool: a thread never waits for a connection, and the event loop never waits
for the database. Measured on this machine (``SELECT 1``, local server):
0.44 ms of wall time and 0.37 ms of CPU per statement through a thread,
against 0.15 ms / 0.12 ms for the same call made directly — the floor a
driver on psycopg's non-blocking core with trio's socket waits could
approach. The store makes few statements (events are written in batches,
never one per token; signals are polled only while turns run), so the
thread's cost stays off the per-token path, and a transaction in a thread
always runs to its end, whatever is cancelled meanwhile.

When the database server cannot be reached, the first failed connection
opens a circuit breaker (:mod:`.reachability`): statements are refused at
once with a 503 ``store_unreachable`` instead of each waiting for the
pool's timeout, until a background probe (:meth:`PostgresStore.keep_reachable`,
run by :func:`~.opening.open_store`) connects again.

The schema lives in the connection's ``search_path`` (a ``?options=-c
search_path=…`` in the URL picks a schema). Its version is the one row of
``hermes_schema``; opening migrates an older schema under an advisory lock
(several processes may start at once), and refuses a newer one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import psycopg
import psycopg_pool
import trio
from psycopg import errors as pg_errors

from ..redaction import shown_url
from . import statements as sql
from .base import StoreError, StoreOpenError, log, wall_clock
from .reachability import Reachability
from .runners import Runner, this_runner
from .schema import POSTGRES_MIGRATIONS, SCHEMA_VERSION, migrate_from
from .shared import SQLStore

__all__ = ["PostgresStore"]

T = TypeVar("T")

POOL_SIZE = 8
# How long the probe's connection attempt may take (libpq's least).
PROBE_CONNECT_TIMEOUT = 2
UNREACHABLE = "store_unreachable", "the response store's database cannot be reached"
# The advisory lock that serialises migrations between processes.
_MIGRATION_LOCK = 0x6865726D6573


class _PgDb:
    """A psycopg connection speaking the statements' ``?`` placeholders."""

    # Transactions run side by side: the statements lock rows they share.
    row_locks = True

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, query: str, params: Sequence[Any] = ()) -> Any:
        return self._conn.execute(query.replace("?", "%s"), params)

    def executemany(self, query: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if rows:
            with self._conn.cursor() as cursor:
                cursor.executemany(query.replace("?", "%s"), rows)


def _failure(exc: Exception) -> tuple[str, str]:
    """``(code, message)`` for a psycopg error: what a client is told."""
    if isinstance(exc, pg_errors.DiskFull):
        return "store_full", "the response store is full: its disk has no room left"
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        return "store_read_only", "the response store is read-only"
    if isinstance(
        exc,
        (pg_errors.LockNotAvailable, pg_errors.DeadlockDetected, pg_errors.SerializationFailure),
    ):
        return "store_busy", "the response store is busy"
    if isinstance(exc, psycopg_pool.PoolTimeout | psycopg.OperationalError):
        return UNREACHABLE
    if isinstance(exc, pg_errors.DataCorrupted):
        return "store_corrupt", "the response store is damaged"
    return "store_error", "the response store failed"


def _migrate(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS hermes_schema (version INTEGER NOT NULL)")
        row = conn.execute("SELECT max(version) FROM hermes_schema").fetchone()
        version = row[0] if row and row[0] is not None else 0
        if version > SCHEMA_VERSION:
            raise StoreOpenError(
                f"schema version {version}; this version of hermes-trio knows up to "
                f"{SCHEMA_VERSION}"
            )
        migrate_from(version, POSTGRES_MIGRATIONS, conn.execute, _PgDb(conn))
        if version < SCHEMA_VERSION:
            conn.execute("DELETE FROM hermes_schema")
            conn.execute("INSERT INTO hermes_schema VALUES (%s)", (SCHEMA_VERSION,))


class PostgresStore(SQLStore):
    """:class:`~.base.Store` over a PostgreSQL database (see the module doc)."""

    def __init__(
        self,
        url: str,
        *,
        max_rows: int = 10_000,
        max_age_days: float = 30.0,
        clock: Callable[[], float] = wall_clock,
        runner: Runner | None = None,
        pool_size: int = POOL_SIZE,
    ) -> None:
        super().__init__(
            runner=runner or this_runner(),
            max_rows=max_rows,
            max_age_days=max_age_days,
            clock=clock,
        )
        self.url = url
        self._pool: psycopg_pool.ConnectionPool[Any] | None = None
        self._limiter = trio.CapacityLimiter(pool_size)
        self._pool_size = pool_size
        self._failing: str | None = None
        self.reachability = Reachability()
        # Set when an outage begins: wakes the probe.
        self._outage = trio.Event()

    def _refused(self, exc: Exception) -> StoreError:
        code, message = _failure(exc)
        if self._failing != code:
            self._failing = code
            log.error(
                "%s (%s; %s: %s); requests that need it get 503 until it works",
                message,
                shown_url(self.url),
                type(exc).__name__,
                str(exc).strip(),
            )
        return StoreError(code, f"{message}; try again later")

    async def _use(self, fn: Callable[[sql.Db], T], *, write: bool) -> T:
        pool = self._pool
        if pool is None:
            raise RuntimeError("the response store is closed")
        if not self.reachability.up:
            # Logged when the outage began; the probe says when it ends.
            code, message = UNREACHABLE
            raise StoreError(code, f"{message}; try again later")

        def run() -> T:
            with pool.connection() as conn, conn.transaction():
                return fn(_PgDb(conn))

        try:
            # Never abandoned on cancel: the transaction runs to its end.
            result = await trio.to_thread.run_sync(run, limiter=self._limiter)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            if pool is not self._pool:
                # A pool the probe replaced since says nothing of now.
                code, message = _failure(exc)
                raise StoreError(code, f"{message}; try again later") from exc
            refused = self._refused(exc)
            if refused.code == UNREACHABLE[0] and self.reachability.lost(trio.current_time()):
                self._outage.set()
            raise refused from exc
        if write and self._failing is not None:
            self._failing = None
            log.warning("the response store works again (%s)", shown_url(self.url))
        return result

    async def _write(self, fn: Callable[[sql.Db], T]) -> T:
        return await self._use(fn, write=True)

    async def _read(self, fn: Callable[[sql.Db], T]) -> T:
        return await self._use(fn, write=False)

    async def open(self, *, recover: bool = False) -> None:
        """Connect, create or migrate the schema, apply retention and, with
        ``recover``, end what processes that are gone left running."""
        where = f"store.url {shown_url(self.url)}"

        def connect() -> psycopg_pool.ConnectionPool[Any]:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
                _migrate(conn)
            return self._new_pool(10.0)

        try:
            self._pool = await trio.to_thread.run_sync(connect)
        except StoreOpenError as exc:
            raise StoreOpenError(
                f"{where}: the database was written by a newer version of hermes-trio ({exc})"
            ) from None
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreOpenError(f"{where}: cannot use the database ({detail})") from None
        await self.heartbeat()
        await self.prune()
        if recover:
            await self.recover_interrupted()

    async def keep_reachable(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """While the database cannot be reached, try a fresh connection now
        and then (:class:`~.reachability.Reachability` says when); the first
        that works lets statements through again. Runs for the life of the
        store."""
        task_status.started()
        while True:
            while self.reachability.up:
                self._outage = trio.Event()
                await self._outage.wait()
            when = self.reachability.next_probe
            if when is not None:
                await trio.sleep_until(when)
            works = await self._probe_once()
            now = trio.current_time()
            if not works:
                self.reachability.probe_failed(now)
                continue
            lasted = self.reachability.found(now)
            self._failing = None
            log.warning(
                "the response store works again (%s; unreachable for %.1f s)",
                shown_url(self.url),
                lasted,
            )

    def _new_pool(self, timeout: float) -> psycopg_pool.ConnectionPool[Any]:
        """An open pool with its first connection made (raises
        ``PoolTimeout`` when that takes over ``timeout`` seconds)."""
        pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
            self.url,
            min_size=1,
            max_size=self._pool_size,
            kwargs={"autocommit": True},
            open=False,
            timeout=10.0,
            name="hermes-store",
        )
        try:
            pool.open(wait=True, timeout=timeout)
        except BaseException:
            pool.close()
            raise
        return pool

    async def _probe_once(self) -> bool:
        """Whether the database answers a fresh connection; if it does, the
        store's pool is replaced by a fresh one. The old pool's connections
        died with the outage, and its own reconnection attempts back off for
        minutes: kept, it would fail or stall the first requests after it."""
        # Abandoned if the store closes meanwhile: the attempt ends by
        # itself within its connect timeout.
        if not await trio.to_thread.run_sync(self._answers, abandon_on_cancel=True):
            return False
        # Shielded: a pool once opened is either the store's or closed.
        with trio.CancelScope(shield=True):
            try:
                fresh = await trio.to_thread.run_sync(self._new_pool, float(PROBE_CONNECT_TIMEOUT))
            except psycopg.Error:
                return False
            old, self._pool = self._pool, fresh
            # A store closed meanwhile closes the fresh pool too.
            await trio.to_thread.run_sync((fresh if old is None else old).close)
            if old is None:
                self._pool = None
        return True

    def _answers(self) -> bool:
        try:
            with psycopg.connect(
                self.url, autocommit=True, connect_timeout=PROBE_CONNECT_TIMEOUT
            ) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        self._pool = pool
        try:
            await self.retire()
        except StoreError:
            pass
        finally:
            self._pool = None
            await trio.to_thread.run_sync(pool.close)
