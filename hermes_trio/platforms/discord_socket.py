"""Opening a Gateway websocket with trio-websocket, owning its TCP stream.

``trio_websocket.open_websocket_url`` leaves the socket to the garbage
collector when the server refuses the handshake (a 5xx during a Discord
outage) or drops the TCP connection without a close frame (its ``aclose``
returns early once a close reason is known). A bot reconnects through
exactly those cases, so here the stream is opened and closed by us, and
trio-websocket only speaks the protocol over it.
"""

from __future__ import annotations

import ssl
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio
import trio_websocket

__all__ = ["open_websocket"]


@asynccontextmanager
async def open_websocket(
    url: str, *, max_message_size: int, connect_timeout: float, close_timeout: float
) -> AsyncIterator[trio_websocket.WebSocketConnection]:
    """A client websocket to ``url`` (``ws:`` or ``wss:``). Raises
    ``trio_websocket.HandshakeError`` (or ``OSError``) when it cannot open;
    an error of the ``async with`` body comes out as itself."""
    parts = urllib.parse.urlsplit(url)
    secure = parts.scheme == "wss"
    host = parts.hostname or ""
    port = parts.port or (443 if secure else 80)
    resource = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host_header = host if port in (80, 443) else f"{host}:{port}"
    stream: trio.SocketStream | trio.SSLStream[trio.SocketStream]
    try:
        with trio.fail_after(connect_timeout):
            if secure:
                stream = await trio.open_ssl_over_tcp_stream(
                    host, port, ssl_context=ssl.create_default_context(), https_compatible=True
                )
            else:
                stream = await trio.open_tcp_stream(host, port)
    except trio.TooSlowError:
        raise trio_websocket.ConnectionTimeout from None
    body_error: BaseException | None = None
    async with stream:
        try:
            async with trio.open_nursery() as nursery:
                try:
                    with trio.fail_after(connect_timeout):
                        socket = await trio_websocket.wrap_client_stream(
                            nursery,
                            stream,
                            host_header,
                            resource,
                            max_message_size=max_message_size,
                        )
                except trio.TooSlowError:
                    raise trio_websocket.ConnectionTimeout from None
                try:
                    yield socket
                except BaseException as exc:
                    body_error = exc
                    raise
                finally:
                    # Cancelled, the reader task is cancelled too and would
                    # never see the server's answer to a close frame: the
                    # stream's own close is all there is to do then.
                    if not isinstance(body_error, trio.Cancelled):
                        with trio.move_on_after(close_timeout, shield=True):
                            await socket.aclose()
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            raise _one_error(group, body_error) from None


def _one_error(group: BaseExceptionGroup, body_error: BaseException | None) -> BaseException:
    """The error that matters in the reader's and the body's group: the
    body's own, else the one that is not a cancellation."""
    if body_error is not None and body_error in group.exceptions:
        return body_error
    real = [exc for exc in group.exceptions if not isinstance(exc, trio.Cancelled)]
    if len(real) == 1:
        return real[0]
    return group
