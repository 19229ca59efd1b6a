"""Finding a model server by itself: with none configured, ``serve``,
``chat`` and ``gateway`` ask the usual local servers on loopback, in order,
and use the first that lists its models.

The probe list is :data:`LOCAL_SERVERS`, or ``HERMES_LOCAL_SERVERS``
(``name=port`` or ``port``, comma-separated) — for a server on another
port, and for tests.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from ..llm import ModelError, list_models

__all__ = ["LOCAL_SERVERS", "Found", "discover", "local_servers"]

LOCAL_SERVERS: tuple[tuple[str, int], ...] = (
    ("Ollama", 11434),
    ("LM Studio", 1234),
    ("llama.cpp server", 8080),
    ("vLLM", 8000),
)
# Loopback answers at once or refuses at once; a server that hangs is not
# one to use.
PROBE_TIMEOUT = 0.5


@dataclass(frozen=True)
class Found:
    name: str
    base_url: str
    model: str | None


def local_servers(environ: dict[str, str] | None = None) -> list[tuple[str, int]]:
    """The servers to probe, in order; a bad ``HERMES_LOCAL_SERVERS`` entry
    raises ``ValueError`` naming it."""
    spec = (environ if environ is not None else dict(os.environ)).get("HERMES_LOCAL_SERVERS")
    if spec is None:
        return list(LOCAL_SERVERS)
    known = {port: name for name, port in LOCAL_SERVERS}
    servers: list[tuple[str, int]] = []
    for entry in (part.strip() for part in spec.split(",")):
        if not entry:
            continue
        name, _, port = entry.rpartition("=")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(
                f"HERMES_LOCAL_SERVERS: expected name=port or port entries, got {entry!r}"
            )
        servers.append((name or known.get(int(port), "a model server"), int(port)))
    return servers


def discover(servers: Sequence[tuple[str, int]]) -> Found | None:
    """The first of ``servers`` whose ``GET /v1/models`` lists models."""
    for name, port in servers:
        base_url = f"http://127.0.0.1:{port}/v1"
        try:
            listed = list_models(base_url, None, timeout=PROBE_TIMEOUT)
        except ModelError:
            continue
        first = listed[0].get("id") if listed else None
        return Found(name, base_url, first if isinstance(first, str) else None)
    return None
