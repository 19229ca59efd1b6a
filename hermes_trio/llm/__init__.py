"""Model client for OpenAI-compatible servers (Chat Completions and Responses)."""

from .client import ModelClient, ModelRequest, ModelResponse, OnDelta, Target, make_http_client
from .errors import ModelError

__all__ = [
    "ModelClient",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "OnDelta",
    "Target",
    "make_http_client",
]
