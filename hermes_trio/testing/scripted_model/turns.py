"""What the assistant says in one answer, independent of the wire API: the
turn a script step stands for, its deterministic ids and its usage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast

from ...wire.responses_types import ResponseUsage
from ..script import Drop, ErrorFrame, Stall, Step, TextReply, ToolCallReply, split_tokens
from .encoding import dumps_str

__all__ = ["Call", "Ending", "Ids", "Turn", "chat_usage", "make_turn", "responses_usage"]

#: How a rendered stream ends: normally, with an error frame, or cut off.
Ending = Literal["complete", "error", "cut"]


@dataclass
class Call:
    call_id: str
    item_id: str
    name: str
    arguments: str
    fragments: list[str]


@dataclass
class Turn:
    """What the assistant says, independent of the wire API."""

    reasoning: list[str]
    text: list[str]
    calls: list[Call]
    finish_reason: str = "stop"
    usage: dict[str, Any] | None = None
    """The script's own usage, served as given (either API's shape)."""
    delay: float = 0.0
    first_token_delay: float = 0.0
    #: Silence after the last element, before the stream's end.
    finish_delay: float = 0.0
    #: Encoded Chat deltas, cached across responses of the same step.
    chat_deltas: list[bytes] | None = None

    def elements(self) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = [("reasoning", t) for t in self.reasoning]
        out += [("text", t) for t in self.text]
        for index, call in enumerate(self.calls):
            out.append(("call", index))
            out += [("args", index, frag) for frag in call.fragments]
        return out


class Ids:
    """Deterministic ids for one response, so tests can assert on them."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.chat = f"chatcmpl-scripted{n}"
        self.response = f"resp_scripted{n}"
        self.message = f"msg_scripted{n}"
        self.reasoning = f"rs_scripted{n}"

    def call(self, i: int) -> str:
        return f"call_scripted{self.n}_{i}"

    def fc_item(self, i: int) -> str:
        return f"fc_scripted{self.n}_{i}"


def make_turn(step: Step, ids: Ids, cache: dict[int, tuple[Step, Turn]] | None = None) -> Turn:
    """The turn ``step`` stands for. With a ``cache``, a ``TextReply`` served
    again is tokenized (and JSON-encoded) once."""
    if cache is not None and isinstance(step, TextReply):
        hit = cache.get(id(step))
        if hit is not None and hit[0] is step:
            return hit[1]
        if len(cache) >= 256:
            cache.clear()
        turn = make_turn(step, ids)
        cache[id(step)] = (step, turn)
        return turn
    if isinstance(step, TextReply):
        return Turn(
            reasoning=split_tokens(step.reasoning),
            text=step.token_list(),
            calls=[],
            finish_reason=step.finish_reason,
            usage=step.usage,
            delay=step.delay,
            first_token_delay=step.first_token_delay,
        )
    if isinstance(step, ToolCallReply):
        calls = []
        for i, (name, args) in enumerate(step.calls):
            raw = args if isinstance(args, str) else dumps_str(args)
            size = step.fragment_size
            frags = [raw[j : j + size] for j in range(0, len(raw), size)]
            calls.append(Call(ids.call(i), ids.fc_item(i), name, raw, frags))
        return Turn(
            reasoning=[],
            text=split_tokens(step.text),
            calls=calls,
            finish_reason="tool_calls",
            delay=step.delay,
            finish_delay=step.finish_delay,
        )
    if isinstance(step, ErrorFrame | Stall | Drop):
        return Turn(reasoning=[], text=split_tokens(step.text), calls=[])
    raise TypeError(f"no turn for {step!r}")


def chat_usage(turn: Turn, prompt_tokens: int) -> dict[str, Any]:
    u = turn.usage
    if u is not None and "input_tokens" in u:
        # A Responses-style override given for a Chat request: translate.
        return {
            "prompt_tokens": u.get("input_tokens", 0),
            "completion_tokens": u.get("output_tokens", 0),
            "total_tokens": u.get(
                "total_tokens", u.get("input_tokens", 0) + u.get("output_tokens", 0)
            ),
        }
    if u is not None:
        return dict(u)
    completion = len(turn.reasoning) + len(turn.text)
    completion += sum(1 + len(c.fragments) for c in turn.calls)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": len(turn.reasoning)},
    }


def responses_usage(turn: Turn, prompt_tokens: int) -> ResponseUsage:
    u = turn.usage
    if u is not None and "input_tokens" in u:
        # The script's own, in the Responses shape (its input_tokens says so).
        return cast("ResponseUsage", dict(u))
    chat = chat_usage(turn, prompt_tokens)
    inp = chat.get("prompt_tokens", 0)
    outp = chat.get("completion_tokens", 0)
    return {
        "input_tokens": inp,
        "input_tokens_details": {
            "cached_tokens": (chat.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        },
        "output_tokens": outp,
        "output_tokens_details": {
            "reasoning_tokens": (chat.get("completion_tokens_details") or {}).get(
                "reasoning_tokens", 0
            )
        },
        "total_tokens": chat.get("total_tokens", inp + outp),
    }
