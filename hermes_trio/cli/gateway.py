"""``hermes-trio gateway``: the gateway until SIGINT or SIGTERM.

A signal cancels everything at once: running editors finish their shielded
cleanup within their own deadline, and nothing else waits.
"""

from __future__ import annotations

import argparse

import httpx
import trio

from ..config import Config
from ..consumers.messenger import PlatformError
from ..gateway import Gateway, build_adapters, open_gateway, startup_problem
from ..platforms.base import PlatformAdapter
from ..redaction import shown_url
from ..store import StoreOpenError
from .process import EXIT_FAILED, EXIT_USAGE, Failure, Shell

__all__ = ["run_gateway"]

shell = Shell("gateway")


def run_gateway(config: Config, args: argparse.Namespace | None = None) -> int:
    """``hermes-trio gateway``; returns the exit code."""
    # Like a busy port: the environment, not the configuration's form.
    failures: list[Failure] = [Failure((StoreOpenError,))]
    if config.api_server.enabled:
        api = config.api_server
        failures += [
            Failure(
                (OSError,),
                lambda exc: f"cannot listen on {api.host}:{api.port}: {exc.strerror or exc}",
            ),
        ]
    return shell.run(_main, config, problem=startup_problem(config), failures=failures)


async def _main(config: Config) -> int:
    async with httpx.AsyncClient() as client:
        try:
            adapters = build_adapters(config, client)
        except PlatformError as exc:
            shell.say(str(exc), err=True)
            return EXIT_USAGE
        return await shell.until_stop_signal(lambda stop: _run(config, adapters), grace=0)


async def _run(config: Config, adapters: list[PlatformAdapter]) -> int:
    # Imported here: the rest of the web stack is only needed with the API.
    from ..server.run import open_shared_store

    # The chats' conversations (and the API server's state) outlive a restart.
    async with (
        open_shared_store(config) as store,
        open_gateway(config, adapters=adapters, store=store) as gateway,
    ):
        await store.store.prune_conversations(
            "chat:",
            max_age=config.store.max_age_days * 86400.0,
            max_count=config.store.max_rows,
        )
        shell.say(_ready_line(gateway))
        if gateway.api_server is not None:
            await trio.sleep_forever()
        # With nothing left that could receive a message, staying up would
        # only hide the failure from a service manager.
        await gateway.wait_until(gateway.all_adapters_failed)
        shell.say("every platform adapter failed (see above); stopping", err=True)
    return EXIT_FAILED


def _ready_line(gateway: Gateway) -> str:
    parts: list[str] = []
    for name, adapter in gateway.adapters.items():
        status = gateway.adapter_status[name]
        if status.state == "failed":
            # Its own error line says why; it is not part of what runs.
            continue
        detail: str = "connected" if status.state == "running" else status.state
        bot = getattr(adapter, "bot_user", None)
        if isinstance(bot, dict) and bot.get("username"):
            detail = f"@{bot['username']}, {detail}"
        url = getattr(adapter, "webhook_url", None)
        if url:
            detail = f"{detail}, webhook {url}"
        parts.append(f"{name} ({detail})")
    if gateway.api_server is not None:
        parts.append(f"api server ({gateway.api_server.base_url})")
    config = gateway.config
    model_server = shown_url(config.model.base_url or "")
    return (
        f"running {', '.join(parts) or 'nothing'}; model server {model_server}; "
        f"a new message during a turn: {config.gateway.on_new_message}"
    )
