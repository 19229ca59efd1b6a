"""Shared by the Responses API tests (no tests here): reading their SSE streams."""

from __future__ import annotations

import json
from typing import Any

from hermes_trio.wire.sse import SSEDecoder, SSEEvent


def parse_sse(raw: bytes) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [e for e in decoder.feed(raw) if isinstance(e, SSEEvent)]
    decoder.close()
    return events


def payloads(events: list[SSEEvent]) -> list[dict[str, Any]]:
    return [json.loads(e.data) for e in events]


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
