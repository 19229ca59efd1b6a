"""The ``/v1/responses`` endpoints (the Responses API): :mod:`.routes` (the
handlers, registered by ``register_responses_routes``), :mod:`.live` (the
responses running now and their resumable streams), :mod:`.request` and
:mod:`.input` (the request bodies and queries, validated).

Nothing here imports the chat endpoint or the app factory; what both
endpoints share lives in :mod:`hermes_trio.server` itself.
"""
