"""The edge: what every request passes before a route, and the bodies in
and out of one.

- :mod:`.gate`: which requests reach a route at all (pure)
- :mod:`.middleware`: the ASGI layer in front of the app that applies it
- :mod:`.request_log`: the access log line and the request id
- :mod:`.bodies`: the JSON request body and the SSE response bodies
"""
