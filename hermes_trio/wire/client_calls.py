"""Which tool calls of one model step reach the client, as they are written.

A step's tool calls are of two kinds: calls to the agent's own tools, which
the agent runs and no client may be asked to run, and calls to tools the
client supplied, which end the turn and are the client's to run. The
client's calls are streamed to it as the model writes them:
:class:`ClientCallStream` turns the step's tool-call fragments into
:class:`~hermes_trio.events.ToolCallDelta` events for client calls only, and
at the step's end announces whole any client call it could not stream (a
non-streamed answer, or a server that sent the name late).

It is also where a step's call ids become unique: a model may give two
calls the same id, and a client tells calls apart by id (the Responses SDK
answers each ``call_id`` once). A repeated id gets a suffix (``dup_2``)
before anyone sees it, and the conversation keeps the ids as shown.

Sans-IO: fragments in, events out.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from ..events import ToolCallDelta
from .chat_chunks import ToolCall, ToolCallArgs, ToolCallStart

__all__ = ["ClientCallStream"]


class ClientCallStream:
    """One model step's client tool calls as ``ToolCallDelta`` events."""

    def __init__(self, client_names: Collection[str]) -> None:
        self._names = client_names
        # Fragment slot -> index among the client calls, for announced calls.
        self._index: dict[int, int] = {}
        # Call ids as the client was shown them, by index.
        self._ids: list[str] = []
        self._slots: list[int] = []

    @property
    def started(self) -> bool:
        """Whether a client call has been announced in this step."""
        return bool(self._slots)

    def feed(self, fragments: Sequence[ToolCallStart | ToolCallArgs]) -> list[ToolCallDelta]:
        """The deltas that a chunk's tool-call fragments give the client."""
        out: list[ToolCallDelta] = []
        for fragment in fragments:
            if isinstance(fragment, ToolCallStart):
                # A call whose name is not known yet stays back; it is
                # announced whole at the end if it turns out to be the client's.
                if fragment.name in self._names:
                    out.append(self._announce(fragment.slot, fragment.id, fragment.name, ""))
                continue
            index = self._index.get(fragment.slot)
            if index is None or not fragment.text:
                continue
            last = out[-1] if out else None
            if last is not None and last.index == index:
                # Pieces of one call that arrived together go out as one.
                out[-1] = replace(last, arguments=last.arguments + fragment.text)
            else:
                out.append(ToolCallDelta(index, fragment.text))
        return out

    def finish(
        self, calls: Sequence[ToolCall]
    ) -> tuple[list[ToolCallDelta], list[ToolCall], list[ToolCall]]:
        """At the step's end, given all its calls (in slot order): deltas for
        the client calls not announced yet, each whole; all the calls, the
        client's under the ids the client was shown; and the client's calls
        alone, in the order announced."""
        out: list[ToolCallDelta] = []
        for slot, call in enumerate(calls):
            if slot not in self._index and call.name in self._names:
                out.append(self._announce(slot, call.id, call.name, call.arguments))
        fixed = list(calls)
        for index, slot in enumerate(self._slots):
            # An id that arrived after the call was shown does not replace the
            # one the client has: its answer will name that one.
            if fixed[slot].id != self._ids[index]:
                fixed[slot] = replace(fixed[slot], id=self._ids[index])
        # The agent's own calls must not share an id with any other call
        # either: their results are matched to them by id.
        taken = set(self._ids)
        for slot, call in enumerate(fixed):
            if slot not in self._index:
                unique = _unique_id(call.id or f"call_{slot}", taken)
                taken.add(unique)
                if unique != call.id:
                    fixed[slot] = replace(call, id=unique)
        return out, fixed, [fixed[slot] for slot in self._slots]

    def _announce(self, slot: int, call_id: str, name: str, arguments: str) -> ToolCallDelta:
        index = len(self._slots)
        call_id = _unique_id(call_id or f"call_{slot}", set(self._ids))
        self._index[slot] = index
        self._slots.append(slot)
        self._ids.append(call_id)
        return ToolCallDelta(index, arguments, call_id, name)


def _unique_id(call_id: str, taken: Collection[str]) -> str:
    """``call_id``, or ``call_id_2`` (``_3``, …) when that is taken."""
    if call_id not in taken:
        return call_id
    n = 2
    while f"{call_id}_{n}" in taken:
        n += 1
    return f"{call_id}_{n}"
