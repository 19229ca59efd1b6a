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

__all__ = ["endpoint"]


def endpoint(base_url: str, path: str) -> str:
    """``path`` (``/models``, ``/chat/completions``) under ``base_url``,
    with the base URL's query kept and its fragment dropped."""
    parts = urllib.parse.urlsplit(base_url)
    return urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + path, fragment=""))
