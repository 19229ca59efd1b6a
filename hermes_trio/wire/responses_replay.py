"""The output items a Responses stream had built, from its events alone.

After a crash, a stored response's object is the one written when it started
(no output yet); its stream events are all that tell what it had said.
:func:`replay_output` rebuilds the ``output`` list from those events: an item
that reached ``response.output_item.done`` is taken as it was done, and one
still open is rebuilt from its ``output_item.added`` event and the deltas
after it, with status ``incomplete``. Sans-IO.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["output_text", "replay_output"]

ADDED = "response.output_item.added"
DONE = "response.output_item.done"


class _Open:
    __slots__ = ("item", "parts")

    def __init__(self, item: dict[str, Any]) -> None:
        self.item = item
        self.parts: list[str] = []

    def render(self) -> dict[str, Any]:
        item = dict(self.item)
        item["status"] = "incomplete"
        text = "".join(self.parts)
        kind = item.get("type")
        if kind == "message":
            item["content"] = [
                {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            ]
        elif kind == "reasoning":
            item["content"] = [{"type": "reasoning_text", "text": text}]
        elif kind == "function_call":
            item["arguments"] = text
        return item


def replay_output(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The output items of a stream's events (payloads, in sequence order).

    Events of other kinds are ignored, so a caller may leave out the deltas
    of items it knows are done.
    """
    items: dict[int, _Open | dict[str, Any]] = {}
    for event in events:
        kind = event.get("type")
        index = event.get("output_index")
        if not isinstance(index, int):
            continue
        if kind == ADDED:
            items[index] = _Open(dict(event.get("item") or {}))
        elif kind == DONE:
            items[index] = dict(event.get("item") or {})
        else:
            current = items.get(index)
            if not isinstance(current, _Open):
                continue
            delta = event.get("delta")
            if isinstance(delta, str) and str(kind).endswith(".delta"):
                current.parts.append(delta)
    return [item.render() if isinstance(item, _Open) else item for _, item in sorted(items.items())]


def output_text(output: Iterable[Mapping[str, Any]]) -> str:
    """The text of the message items, as ``output_text`` shows it."""
    return "".join(
        str(part.get("text", ""))
        for item in output
        if item.get("type") == "message"
        for part in item.get("content") or []
    )
