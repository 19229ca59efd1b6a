"""``hermes-trio serve``: the API server until SIGINT or SIGTERM.

The first signal stops accepting and lets open streams end for a few
seconds; a second one stops waiting for anyone.

At start the soft limit on open files is raised to the hard one (logged
once), and ``api_server.max_connections`` is lowered to what that limit
holds (:mod:`hermes_trio.listener.capacity`, logged once): past it a
connection already accepted would fail mid-answer (``EMFILE``) where a new
one should get a 503.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import resource

import trio

from ..config import Config
from ..listener.capacity import connection_room
from ..server.run import open_api_server, startup_problem
from .demo import agent_for
from .serve_shared import (
    STOP_GRACE,
    check_model_server,
    reload_keys_on_sighup,
    say_listening,
    serve_failures,
    shell,
)
from .workers import run_workers

__all__ = ["fit_open_files", "run_serve"]

log = logging.getLogger("hermes_trio.server")


def run_serve(config: Config, args: argparse.Namespace) -> int:
    # A worker inherits its supervisor's raised limit; the supervisor said it.
    config = fit_open_files(config, announce=getattr(args, "worker_index", None) is None)
    if config.api_server.workers > 1 or getattr(args, "worker_index", None) is not None:
        return run_workers(config, args)
    return shell.run(
        _main, config, problem=startup_problem(config), failures=serve_failures(config)
    )


def raise_open_files_limit(*, announce: bool) -> int:
    """The soft limit on open files, raised to the hard one; returns the
    soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 2**31 - 1
    if hard != resource.RLIM_INFINITY and soft >= hard:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        # macOS refuses an unlimited soft limit for files: stay as we are.
        if announce:
            log.warning(
                "open-files limit stays %d: it cannot be raised to %s (%s)", soft, hard, exc
            )
        return soft
    if announce:
        log.info("open-files limit raised from %d to %d (the hard limit)", soft, hard)
    return 2**31 - 1 if hard == resource.RLIM_INFINITY else hard


def fit_open_files(config: Config, *, announce: bool) -> Config:
    """``config`` with ``api_server.max_connections`` lowered to what the
    (raised) open-files limit holds, per process."""
    api = config.api_server
    open_files = raise_open_files_limit(announce=announce)
    # With ``auto``, up to a turn per connection.
    turns = None if api.max_concurrent == "auto" else api.max_concurrent
    room = connection_room(open_files, wanted=api.max_connections, turns=turns)
    if not room.reduced:
        return config
    if announce:
        log.warning(
            "api_server.max_connections (%d) needs %d open files, more than this process's "
            "limit of %d: at most %d connections are served (beyond: 503); raise the hard "
            "limit (ulimit -Hn) or lower api_server.max_connections or max_concurrent",
            api.max_connections,
            room.needed,
            open_files,
            room.max_connections,
        )
    fitted = dataclasses.replace(api, max_connections=room.max_connections)
    return dataclasses.replace(config, api_server=fitted)


async def _main(config: Config) -> int:
    async def serve(stop: trio.Event) -> None:
        async with (
            agent_for(config) as agent,
            open_api_server(config, agent=agent, shutdown=stop) as server,
        ):
            async with trio.open_nursery() as nursery:
                # Before the server says it listens: a SIGHUP that comes
                # before the handler would end the process.
                await nursery.start(reload_keys_on_sighup, config, server.state.keys)
                say_listening(
                    config, server.base_url, server.port, keyed=server.state.keys.required
                )
                nursery.start_soon(check_model_server, server.state.agent)
                await stop.wait()
                nursery.cancel_scope.cancel()

    return await shell.until_stop_signal(serve, grace=STOP_GRACE)
