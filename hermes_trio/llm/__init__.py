"""Model client for OpenAI-compatible servers (Chat Completions and Responses)."""

from ..wire.model_window import ContextWindow
from .client import (
    ModelClient,
    ModelRequest,
    ModelResponse,
    OnDelta,
    Relayed,
    Target,
    list_models,
    make_http_client,
)
from .errors import NO_MODEL_SERVER, ModelError

__all__ = [
    "NO_MODEL_SERVER",
    "ContextWindow",
    "ModelClient",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "OnDelta",
    "Relayed",
    "Target",
    "list_models",
    "make_http_client",
]
