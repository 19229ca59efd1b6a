"""Discord: the adapter (``adapter.py``) over its pure pieces: the gateway
protocol (``gateway.py``), which messages are answered (``messages.py``),
the REST calls (``rest.py``) and their rate limits (``ratelimit.py``)."""

from .adapter import DiscordAdapter

__all__ = ["DiscordAdapter"]
