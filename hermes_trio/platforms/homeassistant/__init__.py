"""Home Assistant: the adapter (``adapter.py``, HA's REST API plus a small
inbound webhook) and the objects it sends and reads as TypedDicts
(``api_types.py``, shared with the testing kit's fake Home Assistant)."""

from .adapter import HomeAssistantAdapter

__all__ = ["HomeAssistantAdapter"]
