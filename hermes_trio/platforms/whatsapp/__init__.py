"""WhatsApp: the adapter (``adapter.py``, Meta's Cloud API, with the
webhook Meta calls) and the Cloud API's objects as TypedDicts
(``api_types.py``, shared with the testing kit's fake Cloud API)."""

from .adapter import WhatsAppAdapter

__all__ = ["WhatsAppAdapter"]
