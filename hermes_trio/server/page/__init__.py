"""The built-in chat page: ``GET /`` and the files it loads, all shipped in
this package (no build step, nothing from a CDN).

- :mod:`.route`: the routes (registered by ``register_page_routes``) and
  the headers every page file is served with
- ``index.html``, ``chat.js`` (the conversation: streaming, Stop, the API
  key, ``X-Session-ID``), ``markdown.js`` (Markdown to DOM nodes, never to
  HTML text), ``chat.css``, ``icon.svg``

The page talks to the server only through the public API
(``/v1/models``, ``/v1/chat/completions``), like any other client.
"""
