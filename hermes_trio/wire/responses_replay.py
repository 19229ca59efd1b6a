"""The output items a Responses stream had built, from its events alone.

After a crash, a stored response's object is the one written when it started
(no output yet); its stream events are all that tell what it had said.
:func:`replay_output` rebuilds the ``output`` list from those events: an item
that reached ``response.output_item.done`` is taken as it was done, and one
still open is rebuilt from its ``output_item.added`` event and the deltas
after it, with status ``incomplete``. Sans-IO.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, cast

from .responses_types import OutputItem, ResponseStreamEvent

__all__ = ["output_text", "replay_output"]

ADDED: Final = "response.output_item.added"
DONE: Final = "response.output_item.done"


class _Open:
    __slots__ = ("item", "parts")

    def __init__(self, item: OutputItem) -> None:
        self.item = item
        self.parts: list[str] = []

    def render(self) -> OutputItem:
        item = self.item.copy()
        text = "".join(self.parts)
        if item["type"] == "message":
            item["status"] = "incomplete"
            item["content"] = [
                {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            ]
        elif item["type"] == "reasoning":
            item["status"] = "incomplete"
            item["content"] = [{"type": "reasoning_text", "text": text}]
        elif item["type"] == "function_call":
            item["status"] = "incomplete"
            item["arguments"] = text
        elif item["type"] == "mcp_call":
            item["status"] = "incomplete"
        else:
            # The spec gives an mcp_list_tools or mcp_approval_request item
            # no status; one left open is marked all the same, as it always was.
            cast("dict[str, str]", item)["status"] = "incomplete"
        return item


def replay_output(events: Iterable[ResponseStreamEvent]) -> list[OutputItem]:
    """The output items of a stream's events (payloads, in sequence order).

    Events of other kinds are ignored, so a caller may leave out the deltas
    of items it knows are done.
    """
    items: dict[int, _Open | OutputItem] = {}
    for event in events:
        index = event.get("output_index")
        if not isinstance(index, int):
            continue
        if event["type"] == ADDED:
            items[index] = _Open(event["item"].copy())
        elif event["type"] == DONE:
            items[index] = event["item"].copy()
        else:
            current = items.get(index)
            if not isinstance(current, _Open):
                continue
            delta = event.get("delta")
            if isinstance(delta, str) and event["type"].endswith(".delta"):
                current.parts.append(delta)
    return [item.render() if isinstance(item, _Open) else item for _, item in sorted(items.items())]


def output_text(output: Iterable[OutputItem]) -> str:
    """The text of the message items, as ``output_text`` shows it."""
    return "".join(
        str(part.get("text", ""))
        for item in output
        if item["type"] == "message"
        for part in item.get("content") or []
    )
