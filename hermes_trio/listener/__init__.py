"""Serving ASGI apps over HTTP/1.1 on trio: the listener that owns each
connection's lifetime (close, idle and slow-client deadlines, a bound on
open connections, a shutdown that always ends), shared by ``hermes-trio
serve`` and the platforms' webhook servers. It knows nothing of either."""

from .errors import error_body
from .lifetime import ConnectionLimits
from .listener import listening_socket, serve_hypercorn

__all__ = ["ConnectionLimits", "error_body", "listening_socket", "serve_hypercorn"]
