"""``POST /v1/approvals/{id}``, a client's answer to a streamed chat
turn's question: :mod:`.route`."""
