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
this kind of server"; each question has a short deadline of its own. The
answer is kept per (base URL, model) for the client's life and logged once;
when nobody says, the caller's default is used, with a warning once that
names ``model.context_window``. A server that could not be reached at all
is asked again next time (it may be starting).
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

#: Each question's deadline, in seconds: a server of another kind answers
#: a 404 at once, and a window is not worth a long wait.
PROBE_TIMEOUT = 5.0

#: One question to the model server: (method, URL, JSON body or None) →
#: the decoded answer of a 200, or None for any other answer. Raises
#: ``httpx.HTTPError`` when the exchange itself failed.
AskJSON: TypeAlias = Callable[[str, str, "dict[str, Any] | None"], Awaitable[object]]

_Reader: TypeAlias = Callable[[object], "ContextWindow | None"]


class _Unreachable(Exception):
    """The server did not take the connection: asking on is pointless."""


async def _ask(ask: AskJSON, method: str, url: str, body: dict[str, Any] | None) -> object:
    with trio.move_on_after(PROBE_TIMEOUT):
        try:
            return await ask(method, url, body)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise _Unreachable(str(exc)) from None
        except httpx.HTTPError:
            return None
    return None


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


class WindowFinder:
    """The windows one model client found, and the asking."""

    def __init__(self) -> None:
        # None: the server answered and said nothing (each caller's default).
        self._known: dict[tuple[str, str], ContextWindow | None] = {}
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
                        where = shown_url(base_url)
                        self._warn(key, default, f"{where} could not be reached ({exc})")
                        return ContextWindow(default, "default")
        found = self._known[key]
        if found is None:
            self._warn(key, default, f"{shown_url(base_url)} does not say")
            return ContextWindow(default, "default")
        return found

    async def _found(self, ask: AskJSON, base_url: str, model: str) -> ContextWindow | None:
        found = await self._ask_server(ask, base_url, model)
        if found is not None:
            log.info(
                "context window of model %r: %d tokens (%s)", model, found.tokens, found.source
            )
        return found

    async def _ask_server(self, ask: AskJSON, base_url: str, model: str) -> ContextWindow | None:
        for method, url, body, read in _questions(base_url, model):
            answer = await _ask(ask, method, url, body)
            if answer is not None:
                found = read(answer)
                if found is not None:
                    return found
        return None

    def _warn(self, key: tuple[str, str], default: int, why: str) -> None:
        if key in self._warned:
            return
        self._warned.add(key)
        log.warning(
            "context window of model %r: the model server at %s; assuming %d tokens "
            "(compaction.default_window). Set model.context_window to the model's real window",
            key[1],
            why,
            default,
        )
