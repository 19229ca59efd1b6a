"""The ``/v1/chat/completions`` endpoint: :mod:`.route` (the handler,
registered by ``register_chat_routes``, and the turn each request runs),
:mod:`.stream` (the SSE response body of a streamed request) and
:mod:`.request` (the request body, validated).

Nothing here imports the Responses endpoint or the app factory; what both
endpoints share lives in :mod:`hermes_trio.server` itself.
"""
