"""A model's context window as model servers state it, read from their
answers (sans-IO: the model client asks, these read).

Each reader takes one decoded JSON answer and returns the window it
states, or None when the answer does not say (another kind of server, an
older version, a field that is not a positive whole number):

- an OpenAI-style model card (``GET /v1/models``): vLLM and SGLang's
  ``max_model_len``, OpenRouter's ``context_length``, LM Studio's
  ``loaded_context_length`` (what the loaded instance serves) or
  ``max_context_length`` (what the model could);
- llama.cpp's ``GET /props``: ``default_generation_settings.n_ctx`` (one
  slot's window, what one request gets with ``--parallel``), or ``n_ctx``;
- Ollama's ``POST /api/show``: ``num_ctx`` among the model's
  ``parameters`` (the window Ollama runs it with), else
  ``model_info["<architecture>.context_length"]`` (the model's own limit;
  Ollama serves less unless ``num_ctx`` or ``OLLAMA_CONTEXT_LENGTH`` say
  more).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "ContextWindow",
    "card_for",
    "window_from_card",
    "window_from_ollama_show",
    "window_from_props",
]

# The card fields in the order they are believed: a field that says what
# is served before one that says what the model could.
_CARD_FIELDS = ("max_model_len", "loaded_context_length", "context_length", "max_context_length")


@dataclass(frozen=True, slots=True)
class ContextWindow:
    """How many tokens a model reads at most (prompt and answer together),
    and where that number came from: ``"config"`` (``model.context_window``),
    what the model server said (``"the model card (max_model_len)"``,
    ``"llama.cpp /props"``, ``"Ollama /api/show (num_ctx)"``, …), or
    ``"default"`` (``compaction.default_window``: nobody said)."""

    tokens: int
    source: str


def _tokens(value: object) -> int | None:
    # bool is an int to Python, not a number of tokens to anyone.
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def card_for(listing: object, model: str) -> Mapping[str, object] | None:
    """The card of ``model`` in a ``GET /models`` answer (``{"data": [...]}``),
    or the only card when the server lists one model (llama.cpp answers to
    any name and lists its file's)."""
    data = listing.get("data") if isinstance(listing, Mapping) else None
    if not isinstance(data, list):
        return None
    cards = [card for card in data if isinstance(card, Mapping)]
    for card in cards:
        if card.get("id") == model:
            return card
    return cards[0] if len(cards) == 1 else None


def window_from_card(card: object, where: str = "the model card") -> ContextWindow | None:
    """The window a model card states, its source naming the field."""
    if not isinstance(card, Mapping):
        return None
    for name in _CARD_FIELDS:
        tokens = _tokens(card.get(name))
        if tokens is not None:
            return ContextWindow(tokens, f"{where} ({name})")
    return None


def window_from_props(props: object) -> ContextWindow | None:
    """The window in llama.cpp's ``GET /props`` answer."""
    if not isinstance(props, Mapping):
        return None
    settings = props.get("default_generation_settings")
    tokens = _tokens(settings.get("n_ctx")) if isinstance(settings, Mapping) else None
    if tokens is None:
        tokens = _tokens(props.get("n_ctx"))
    return None if tokens is None else ContextWindow(tokens, "llama.cpp /props")


def window_from_ollama_show(show: object) -> ContextWindow | None:
    """The window in Ollama's ``POST /api/show`` answer."""
    if not isinstance(show, Mapping):
        return None
    parameters = show.get("parameters")
    if isinstance(parameters, str):
        # One "name value" per line, padded with spaces: "num_ctx    8192".
        for line in parameters.splitlines():
            words = line.split()
            if (
                len(words) == 2
                and words[0] == "num_ctx"
                and words[1].isascii()
                and words[1].isdigit()
            ):
                tokens = _tokens(int(words[1]))
                if tokens is not None:
                    return ContextWindow(tokens, "Ollama /api/show (num_ctx)")
    info = show.get("model_info")
    if not isinstance(info, Mapping):
        return None
    arch = info.get("general.architecture")
    keys = [f"{arch}.context_length"] if isinstance(arch, str) else []
    # Without the architecture, the one key that names a context length.
    keys += sorted(k for k in info if isinstance(k, str) and k.endswith(".context_length"))
    for key in keys:
        tokens = _tokens(info.get(key))
        if tokens is not None:
            return ContextWindow(tokens, "Ollama /api/show (context_length)")
    return None
