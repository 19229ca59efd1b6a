"""What one ``hermes-trio serve`` process and its ``--workers`` share.

The stop grace, the shell that says the start-up lines and maps failures to
exit codes, the lines themselves, the SIGHUP reload of the API keys and the
model-server probe: :mod:`.serve` runs one process with them and
:mod:`.workers` a supervisor and its workers.
"""

from __future__ import annotations

import ipaddress
import logging
import signal

import trio

from ..agent import Agent
from ..config import Config, ConfigError, load_config
from ..llm import ModelError
from ..redaction import shown_url
from ..server.admission.keys import KeyRing, keys_of
from ..server.run import keyless_problem
from ..store import StoreOpenError
from .demo import DEMO_BANNER, is_demo
from .process import EXIT_USAGE, Failure, Shell

__all__ = [
    "STOP_GRACE",
    "check_model_server",
    "page_url",
    "reload_keys_on_sighup",
    "say_listening",
    "serve_failures",
    "shell",
]

log = logging.getLogger("hermes_trio.server")

# Whatever is still open this long after the first signal is cut off.
STOP_GRACE = 5.0

shell = Shell("serve")


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
    no restart; a bad file, or no key left on a host beyond loopback, is one
    logged line and the keys stay as they were.
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
            # The host it listens on, as started: no reload may leave it keyless.
            problem = keyless_problem(config.api_server, keyed=bool(keys))
            if problem is not None:
                log.error("API keys not reloaded, the old ones stay: %s", problem)
                continue
            ring.replace(keys)
            log.info("API keys reloaded: %d key(s)", len(keys))


async def check_model_server(agent: Agent) -> None:
    """Warn once at start when the model server does not answer."""
    try:
        with trio.fail_after(agent.config.model.timeouts.connect + 5):
            await agent.client.probe()
    except trio.TooSlowError:
        log.warning(
            "the model server at %s is not reachable (no answer in time); chat requests "
            "will get 502 until it is",
            shown_url(agent.config.model.base_url or ""),
        )
    except ModelError as exc:
        log.warning(
            "the model server is not reachable (%s); chat requests will get 502 until it is",
            exc.message,
        )


def _model_label(config: Config) -> str:
    name = config.model.name
    return f"'{name}'" if name else "the first one it lists"
