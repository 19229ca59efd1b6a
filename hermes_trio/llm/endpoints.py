"""A model server's endpoint URLs from its base URL.

A base URL may carry a query that every request must keep (Azure OpenAI's
``?api-version=2024-06-01``, a gateway's ``?api_key=…``): the endpoint's path
goes after the base URL's path, before its query —
``https://h/openai/v1?api-version=1`` and ``/chat/completions`` make
``https://h/openai/v1/chat/completions?api-version=1``, never
``…?api-version=1/chat/completions``.
"""

from __future__ import annotations

import urllib.parse

__all__ = ["credentials", "endpoint", "server_root"]


def endpoint(base_url: str, path: str) -> str:
    """``path`` (``/models``, ``/chat/completions``) under ``base_url``,
    with the base URL's query kept and its fragment dropped."""
    parts = urllib.parse.urlsplit(base_url)
    return urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + path, fragment=""))


def server_root(base_url: str) -> str:
    """The server's own root under an OpenAI-style base URL: ``/v1`` (the
    last path segment, when it is that) taken off, the query kept.

    llama.cpp's ``/props`` and Ollama's ``/api/show`` live there:
    ``http://h:11434/v1`` makes ``http://h:11434``.
    """
    parts = urllib.parse.urlsplit(base_url)
    path = parts.path.rstrip("/")
    if path.rsplit("/", 1)[-1] == "v1":
        path = path[: -len("v1")].rstrip("/")
    return urllib.parse.urlunsplit(parts._replace(path=path, fragment=""))


def credentials(api_key: str | None) -> dict[str, str]:
    """The headers that carry the model server's key: built here only, so
    every request to a model server (the agent's, the plain relay's,
    ``doctor``'s, ``init``'s) sends it the same way."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}
