"""Admission: who may start work, and what a turn holds while it runs.

- :mod:`.keys`: API keys and their limits
- :mod:`.turn_slots`: the server's turn slots and what it adds to a turn
- :mod:`.turn_reservation`: what a request reserves for its turn, given
  back exactly once
"""
