"""Telegram: the adapter (``adapter.py``, the Bot API by long polling),
the MarkdownV2 converter (``format.py``) and the Bot API's objects and
method parameters as TypedDicts (``api_types.py``, shared with the testing
kit's fake Bot API)."""

from .adapter import TelegramAdapter

__all__ = ["TelegramAdapter"]
