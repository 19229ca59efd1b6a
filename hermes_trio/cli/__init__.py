"""The ``hermes-trio`` command; ``main`` is its entry point."""
