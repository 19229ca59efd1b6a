"""Admission: who may start work, and what a turn holds while it runs.

- :mod:`.keys`: API keys and their limits
- :mod:`.turn_slots`: the server's turn slots and what it adds to a turn
- :mod:`.turn_place`: a turn's place (its slot, the key's place, a
  session's claim), from its request's admission to its work's end, given
  back exactly once
"""
