"""The small HTTP server a webhook adapter (WhatsApp, Home Assistant) runs
for its platform to push messages to.

The adapter adds its routes to ``webhook_app`` and serves it with
``serve_webhook`` (or ``check_then_serve``, which first checks its
credentials). It runs on the same listener as ``hermes-trio serve``
(:mod:`hermes_trio.listener`): a connection ends when HTTP says it ends,
slow and idle clients are dropped, and at most ``max_connections`` are open
at once. hypercorn stays quiet (no access log: query strings can hold
verify tokens) and reports its errors to the adapter's own logger.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Protocol

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.utils import wrap_app
from quart_trio import QuartTrio

from ..consumers.messenger import PlatformError
from ..listener import ConnectionLimits, listening_socket, serve_hypercorn
from .base import CredentialsRejected

__all__ = ["WEBHOOK_MAX_CONNECTIONS", "check_then_serve", "serve_webhook", "webhook_app"]

WEBHOOK_MAX_CONNECTIONS = 64
"""Connections a webhook server keeps open at once: a platform pushes a
few at a time; beyond this, a connection gets 503."""


class _WebhookAdapter(Protocol):
    name: str
    webhook_url: str | None


class _CheckedWebhookAdapter(_WebhookAdapter, Protocol):
    async def check(self) -> object:
        """One platform call that proves the credentials work."""
        ...


def webhook_app(import_name: str, max_body: int) -> QuartTrio:
    """An app that refuses request bodies over ``max_body`` bytes."""
    app = QuartTrio(import_name)
    app.config["MAX_CONTENT_LENGTH"] = max_body
    return app


async def serve_webhook(
    adapter: _WebhookAdapter,
    app: QuartTrio,
    *,
    host: str,
    port: int,
    path: str,
    log: logging.Logger,
    limits: ConnectionLimits | None = None,
    max_connections: int = WEBHOOK_MAX_CONNECTIONS,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on ``host:port`` until cancelled. Once bound (``port=0``
    picks a free one), sets ``adapter.webhook_url`` to the URL of ``path``
    and reports started. ``limits`` and ``max_connections`` bound what
    clients may hold open (defaults as for the API server)."""
    config = _hypercorn_config(log.getChild("http"))
    with listening_socket(host, port) as sock:
        bound = sock.getsockname()[1]
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
        async with trio.open_nursery() as nursery:
            await nursery.start(
                partial(
                    serve_hypercorn,
                    wrap_app(app, config.wsgi_max_body_size, "asgi"),
                    config,
                    listener,
                    # Never set: the adapter's task is cancelled to stop it.
                    trio.Event(),
                    limits=limits,
                    max_connections=max_connections,
                )
            )
            where = f"[{host}]" if ":" in host else host
            adapter.webhook_url = f"http://{where}:{bound}{path}"
            log.info("%s: webhook listening on %s", adapter.name, adapter.webhook_url)
            task_status.started()


async def check_then_serve(
    adapter: _CheckedWebhookAdapter,
    build_app: Callable[[], QuartTrio],
    *,
    host: str,
    port: int,
    path: str,
    log: logging.Logger,
    on_unreachable: Callable[[PlatformError], object],
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """``adapter.check()``, then ``serve_webhook`` with the app ``build_app``
    makes. Rejected credentials raise at once (restarting cannot help); any
    other ``PlatformError`` goes to ``on_unreachable`` and the webhook is
    served anyway: the platform may come up later, and pushes to us."""
    try:
        await adapter.check()
    except CredentialsRejected:
        raise
    except PlatformError as exc:
        on_unreachable(exc)
    await serve_webhook(
        adapter, build_app(), host=host, port=port, path=path, log=log, task_status=task_status
    )


def _hypercorn_config(errorlog: logging.Logger) -> HypercornConfig:
    config = HypercornConfig()
    config.accesslog = None
    config.errorlog = errorlog
    config.graceful_timeout = 1.0
    config.include_server_header = False
    return config
