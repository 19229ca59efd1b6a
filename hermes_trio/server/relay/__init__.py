"""Plain model routes (``api_server.upstream_models: true``): the model
server's own models, and chat requests passed straight through to them:
:mod:`.route`."""
