"""Which context window a model has, asked of its server once.

The model client asks, in this order, until one answer states a window
(the readers are in ``wire/model_window.py``):

1. ``GET <base_url>/models``: the model's card (vLLM's ``max_model_len``,
   OpenRouter's ``context_length``, …);
2. ``GET <root>/props``: llama.cpp;
3. ``POST <root>/api/show`` with ``{"model": name}``: Ollama;
4. ``GET <root>/api/v0/models/<name>``: LM Studio, whose OpenAI-style card
   says nothing of it.

``<root>`` is the base URL without its ``/v1`` (``endpoints.server_root``).
A 404, an answer that is not JSON or one without the field just means "not
this kind of server"; the asking has a short deadline in all
(``PROBE_TIMEOUT``). The answer — or the server's silence — is kept per
(base URL, model) for the client's life and logged once; when nobody says,
the caller's default is used, with a warning once that names
``model.context_window``. A server that could not be reached at all is
asked again next time (it may be starting).
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import httpx
import trio

from ..redaction import shown_url
from ..wire.model_window import (
    ContextWindow,
    card_for,
    window_from_card,
    window_from_ollama_show,
    window_from_props,
)
from .endpoints import endpoint, server_root

__all__ = ["PROBE_TIMEOUT", "AskJSON", "WindowFinder"]

log = logging.getLogger("hermes_trio.llm")

#: How long the asking may take in all, in seconds: a server of another
#: kind answers each question with a 404 at once, and one that answers
#: nothing is not waited for again.
PROBE_TIMEOUT = 5.0

#: One question to the model server: (method, URL, JSON body or None) →
#: the decoded answer of a 200, or None for any other answer. Raises
#: ``httpx.HTTPError`` when the exchange itself failed.
AskJSON: TypeAlias = Callable[[str, str, "dict[str, Any] | None"], Awaitable[object]]

_Reader: TypeAlias = Callable[[object], "ContextWindow | None"]


class _Unreachable(Exception):
    """The server did not take the connection: asking on is pointless."""


def _questions(base_url: str, model: str) -> list[tuple[str, str, dict[str, Any] | None, _Reader]]:
    root = server_root(base_url)
    lm_studio = endpoint(root, "/api/v0/models/" + urllib.parse.quote(model, safe=""))
    return [
        (
            "GET",
            endpoint(base_url, "/models"),
            None,
            lambda a: window_from_card(card_for(a, model)),
        ),
        ("GET", endpoint(root, "/props"), None, window_from_props),
        ("POST", endpoint(root, "/api/show"), {"model": model}, window_from_ollama_show),
        ("GET", lm_studio, None, lambda a: window_from_card(a, "LM Studio /api/v0/models")),
    ]


async def _ask_server(ask: AskJSON, base_url: str, model: str) -> ContextWindow | str:
    """The window the server states, or why there is none."""
    with trio.move_on_after(PROBE_TIMEOUT):
        for method, url, body, read in _questions(base_url, model):
            try:
                answer = await ask(method, url, body)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                raise _Unreachable(str(exc)) from None
            except httpx.HTTPError:
                continue
            found = None if answer is None else read(answer)
            if found is not None:
                return found
        return "does not say"
    return f"did not answer within {PROBE_TIMEOUT:g} s"


class WindowFinder:
    """The windows one model client found, and the asking."""

    def __init__(self) -> None:
        # A window, or why the server answered none (each caller's default then).
        self._known: dict[tuple[str, str], ContextWindow | str] = {}
        self._locks: dict[tuple[str, str], trio.Lock] = {}
        self._warned: set[tuple[str, str]] = set()

    async def find(self, ask: AskJSON, base_url: str, model: str, default: int) -> ContextWindow:
        """The window of ``model`` at ``base_url``; ``default`` when the
        server does not say."""
        key = (base_url, model)
        if key not in self._known:
            # Turns that start together ask once; the others wait for its answer.
            async with self._locks.setdefault(key, trio.Lock()):
                if key not in self._known:
                    try:
                        self._known[key] = await self._found(ask, base_url, model)
                    except _Unreachable as exc:
                        # Not kept: a server that is starting is asked next time.
                        self._warn(key, default, f"could not be reached ({exc})")
                        return ContextWindow(default, "default")
        found = self._known[key]
        if isinstance(found, str):
            self._warn(key, default, found)
            return ContextWindow(default, "default")
        return found

    async def _found(self, ask: AskJSON, base_url: str, model: str) -> ContextWindow | str:
        found = await _ask_server(ask, base_url, model)
        if isinstance(found, ContextWindow):
            log.info(
                "context window of model %r: %d tokens (%s)", model, found.tokens, found.source
            )
        return found

    def _warn(self, key: tuple[str, str], default: int, why: str) -> None:
        if key in self._warned:
            return
        self._warned.add(key)
        log.warning(
            "context window of model %r: the model server at %s %s; assuming %d tokens "
            "(compaction.default_window). Set model.context_window to the model's real window",
            key[1],
            shown_url(key[0]),
            why,
            default,
        )
