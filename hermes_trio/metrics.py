"""The server's figures for Prometheus (``GET /metrics``), with
``prometheus-client``.

Every figure is counted where it happens, once per request, turn or
upstream attempt — never per token. Under ``serve --workers`` each worker
writes its figures to files in ``PROMETHEUS_MULTIPROC_DIR`` (set by the
supervisor before the workers start) and one scrape of any worker adds up
every worker's: :func:`exposition`.
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as _multiprocess

from .endings import CancelCause, FinishReason

__all__ = [
    "ACTIVE_TURNS",
    "ADMISSION_LIMIT",
    "ADMISSION_REFUSED",
    "CONTENT_TYPE",
    "CONTEXT_COMPACTIONS",
    "OPEN_STREAMS",
    "RATE_LIMITED",
    "REQUESTS",
    "TIME_TO_FIRST_TOKEN",
    "TOKENS_OUT",
    "TURNS",
    "TURN_DURATION",
    "UPSTREAM_ERRORS",
    "UPSTREAM_FALLBACKS",
    "UPSTREAM_REQUESTS",
    "UPSTREAM_RETRIES",
    "exposition",
    "process_gone",
    "turn_outcome",
]

CONTENT_TYPE = CONTENT_TYPE_LATEST

REQUESTS = Counter(
    "hermes_requests", "HTTP requests answered, by route and status", ["route", "status"]
)
TURNS = Counter("hermes_turns", "Agent turns ended, by outcome", ["outcome"])
TIME_TO_FIRST_TOKEN = Histogram(
    "hermes_time_to_first_token_seconds",
    "From a turn's start to the first text or reasoning it emitted",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120),
)
TURN_DURATION = Histogram(
    "hermes_turn_duration_seconds",
    "From a turn's start to its end",
    buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 1800),
)
TOKENS_OUT = Counter(
    "hermes_tokens_out", "Completion tokens the model server reported for ended turns"
)
UPSTREAM_REQUESTS = Counter(
    "hermes_upstream_requests", "Requests to the model server, by mode", ["mode"]
)
UPSTREAM_RETRIES = Counter("hermes_upstream_retries", "Model requests tried again")
UPSTREAM_FALLBACKS = Counter("hermes_upstream_fallbacks", "Turns handed to a fallback model")
CONTEXT_COMPACTIONS = Counter(
    "hermes_context_compactions",
    "Conversations made smaller to fit the model's context window, by how (summary, truncation)",
    ["how"],
)
UPSTREAM_ERRORS = Counter(
    "hermes_upstream_errors", "Model requests that failed, by error code", ["code"]
)
ACTIVE_TURNS = Gauge(
    "hermes_active_turns", "Turns running now", multiprocess_mode="livesum"
)
OPEN_STREAMS = Gauge(
    "hermes_open_streams", "Streamed responses being sent now", multiprocess_mode="livesum"
)
ADMISSION_LIMIT = Gauge(
    "hermes_admission_limit",
    "Turns a process admits at once now (api_server.max_concurrent, or where auto has it)",
    multiprocess_mode="livesum",
)
ADMISSION_REFUSED = Counter(
    "hermes_admission_refused",
    "Turns refused at once, by reason: limit (429, at the limit) or lag (503, the server "
    "is behind)",
    ["reason"],
)
RATE_LIMITED = Counter("hermes_rate_limited", "Requests refused with 429, by reason", ["reason"])


def turn_outcome(
    finish_reason: FinishReason, error_code: str | None, cause: CancelCause | None
) -> str:
    """A turn's ending as one label value: ``finished``, ``interrupted``,
    ``client_gone`` or ``error:<code>`` (``cause``: why it was cancelled,
    if it was)."""
    if finish_reason == "error":
        return f"error:{error_code or 'unknown'}"
    if finish_reason == "interrupted" or cause is not None:
        return "client_gone" if cause is CancelCause.CLIENT_GONE else "interrupted"
    return "finished"


def process_gone(pid: int) -> None:
    """A worker ended: its live gauges no longer count (its counters do)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        _multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]


def exposition() -> bytes:
    """The text a scrape returns: this process's figures, or every
    worker's when they share ``PROMETHEUS_MULTIPROC_DIR``."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        _multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
    return generate_latest()
