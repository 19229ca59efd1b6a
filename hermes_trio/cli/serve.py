"""``hermes-trio serve``: the API server until SIGINT or SIGTERM.

The first signal stops accepting and lets open streams end for a few
seconds; a second one stops waiting for anyone.

At start the soft limit on open files is raised to the hard one (logged
once), and ``api_server.max_connections`` is lowered to what that limit
holds (:mod:`hermes_trio.serving.capacity`, logged once): past it a
connection already accepted would fail mid-answer (``EMFILE``) where a new
one should get a 503.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import logging
import resource
import signal

import httpx
import trio

from ..agent import Agent
from ..config import Config, ConfigError, load_config
from ..redaction import shown_url
from ..server.keys import KeyRing, keys_of
from ..server.run import open_api_server, startup_problem
from ..server.store import StoreOpenError
from ..serving.capacity import connection_room
from .demo import DEMO_BANNER, agent_for, is_demo
from .shell import EXIT_USAGE, Failure, Shell

__all__ = [
    "STOP_GRACE",
    "check_model_server",
    "fit_open_files",
    "page_url",
    "reload_keys_on_sighup",
    "run_serve",
    "say_listening",
    "serve_failures",
]

log = logging.getLogger("hermes_trio.server")

# Whatever is still open this long after the first signal is cut off.
STOP_GRACE = 5.0

shell = Shell("serve")


def run_serve(config: Config, args: argparse.Namespace) -> int:
    # A worker inherits its supervisor's raised limit; the supervisor said it.
    config = fit_open_files(config, announce=getattr(args, "worker_index", None) is None)
    if config.api_server.workers > 1 or getattr(args, "worker_index", None) is not None:
        # Imported here: it imports this module.
        from .workers import run_workers

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


def serve_failures(config: Config) -> list[Failure]:
    api = config.api_server
    return [
        # Like a busy port: the environment, not the configuration's form.
        Failure((StoreOpenError,)),
        # A keys file is read as the server starts.
        Failure((ConfigError,), code=EXIT_USAGE),
        Failure(
            (OSError,),
            lambda exc: f"cannot listen on {api.host}:{api.port}: {exc.strerror or exc}",
        ),
    ]


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


def say_listening(config: Config, base_url: str, port: int, *, keyed: bool | None = None) -> None:
    """The lines that say the server is up: where, which model server, and
    (last, what to open) the chat page. ``keyed``: whether the server asks
    for a key (``api_server.key`` or named keys); read from the settings
    when not given."""
    api = config.api_server
    if keyed is None:
        try:
            keyed = bool(keys_of(api))
        except ConfigError:
            # The start was refused for it already; never claim "no key".
            keyed = True
    auth = "an API key is required" if keyed else "no API key required"
    shell.say(f"listening on {base_url} (model '{api.model_name}', {auth})")
    shell.say(
        f"model server {shown_url(config.model.base_url or '')} "
        f"(model {_model_label(config)}, {config.model.api_mode})"
    )
    if is_demo(config):
        shell.say(DEMO_BANNER)
    shell.say(f"chat page: {page_url(api.host, port)}")


def page_url(host: str, port: int) -> str:
    """Where a browser on this machine opens the chat page: a server on
    every address (0.0.0.0, ::) is reached at loopback, which browsers
    refuse to call unspecified."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        address = None
    if address is not None and address.is_unspecified:
        host = "127.0.0.1" if address.version == 4 else "::1"
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{port}/"


async def reload_keys_on_sighup(
    config: Config, ring: KeyRing, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """SIGHUP: the API keys again from the config file and the keys file,
    no restart; a bad file is one logged line and the keys stay as they were.
    Started (``nursery.start``) once the signal is caught."""
    with trio.open_signal_receiver(signal.SIGHUP) as hangups:
        task_status.started()
        async for _ in hangups:
            try:
                fresh = load_config(config.source) if config.source else config
                keys = keys_of(fresh.api_server)
            except ConfigError as exc:
                log.error("API keys not reloaded, the old ones stay: %s", exc)
                continue
            ring.replace(keys)
            log.info("API keys reloaded: %d key(s)", len(keys))


async def check_model_server(agent: Agent) -> None:
    """Warn once at start when the model server does not answer."""
    try:
        with trio.fail_after(agent.config.model.timeouts.connect + 5):
            await agent.client.probe()
    except (httpx.HTTPError, trio.TooSlowError) as exc:
        log.warning(
            "the model server at %s is not reachable (%s: %s); chat requests will get "
            "502 until it is",
            shown_url(agent.config.model.base_url or ""),
            type(exc).__name__,
            exc,
        )


def _model_label(config: Config) -> str:
    name = config.model.name
    return f"'{name}'" if name else "the first one it lists"
