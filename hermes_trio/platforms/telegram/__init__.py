"""Telegram: the adapter (``adapter.py``, the Bot API by long polling) and
the MarkdownV2 converter (``format.py``)."""

from .adapter import TelegramAdapter

__all__ = ["TelegramAdapter"]
