"""Server-side conversations for ``X-Session-ID``: :mod:`.sessions`."""
