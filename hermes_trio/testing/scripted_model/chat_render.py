"""Chat Completions answers as bytes: streamed chunks (with the gap to wait
before each) and whole completions. Pure: no I/O, no clock."""

from __future__ import annotations

from typing import Any

from .encoding import CREATED, dumps, dumps_str, error_body
from .turns import Ending, Ids, Turn, chat_usage

__all__ = ["ChatRenderer"]


class ChatRenderer:
    """Chat Completions chunks, templated: per token only the delta is encoded."""

    def __init__(self, ids: Ids, model: str, include_usage: bool, prompt_tokens: int) -> None:
        self.ids = ids
        self.model = model
        self.include_usage = include_usage
        self.prompt_tokens = prompt_tokens
        head = (
            f'{{"id":{dumps_str(ids.chat)},"object":"chat.completion.chunk",'
            f'"created":{CREATED},"model":{dumps_str(model)},"system_fingerprint":null,'
            f'"choices":[{{"index":0,"delta":'
        )
        self._prefix = b"data: " + head.encode()
        self._usage_null = b',"usage":null' if include_usage else b""
        self._suffix = b',"logprobs":null,"finish_reason":null}]' + self._usage_null + b"}\n\n"

    def _chunk(self, delta: bytes) -> bytes:
        return b"".join((self._prefix, delta, self._suffix))

    @staticmethod
    def _delta(turn: Turn, el: tuple[Any, ...]) -> bytes:
        kind = el[0]
        if kind == "text":
            return b'{"content":' + dumps(el[1]) + b"}"
        if kind == "reasoning":
            return b'{"reasoning_content":' + dumps(el[1]) + b"}"
        if kind == "args":
            frag = {"index": el[1], "function": {"arguments": el[2]}}
            return b'{"tool_calls":[' + dumps(frag) + b"]}"
        call = turn.calls[el[1]]
        first = {
            "index": el[1],
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        return b'{"tool_calls":[' + dumps(first) + b"]}"

    def _deltas(self, turn: Turn) -> list[bytes]:
        if turn.chat_deltas is not None:
            return turn.chat_deltas
        deltas = [self._delta(turn, el) for el in turn.elements()]
        if not turn.calls:
            # No per-response ids inside: safe to reuse for the next
            # response from the same (cached) turn.
            turn.chat_deltas = deltas
        return deltas

    def stream(
        self, turn: Turn, ending: Ending, error: str = "", *, done: bool = True
    ) -> list[tuple[float, bytes]]:
        deltas = self._deltas(turn)
        frames: list[tuple[float, bytes]] = []
        if ending == "cut" and not deltas:
            return frames  # headers only: nothing was "generated" yet
        content = b'""' if turn.text or not turn.calls else b"null"
        role = self._chunk(b'{"role":"assistant","content":' + content + b',"refusal":null}')
        # The role chunk goes out with the first token, not with the headers,
        # so first_token_delay really is silence on the wire.
        frames.append((turn.first_token_delay, role))
        prefix, suffix, delay = self._prefix, self._suffix, turn.delay
        frames += [(0.0 if i == 0 else delay, prefix + d + suffix) for i, d in enumerate(deltas)]
        if ending == "error":
            frames.append((0.0, b"data: " + error_body(500, error) + b"\n\n"))
        elif ending == "complete":
            frames.append((turn.finish_delay, self._finish(turn, done)))
        return frames

    def _finish(self, turn: Turn, done: bool = True) -> bytes:
        reason = dumps(turn.finish_reason)
        last = b"".join(
            (
                self._prefix,
                b'{},"logprobs":null,"finish_reason":',
                reason,
                b"}]",
                self._usage_null,
                b"}\n\n",
            )
        )
        parts = [last]
        if self.include_usage:
            usage_chunk = {
                "id": self.ids.chat,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": self.model,
                "system_fingerprint": None,
                "choices": [],
                "usage": chat_usage(turn, self.prompt_tokens),
            }
            parts.append(b"data: " + dumps(usage_chunk) + b"\n\n")
        if done:
            parts.append(b"data: [DONE]\n\n")
        return b"".join(parts)

    def completion(self, turn: Turn) -> bytes:
        text = "".join(turn.text)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": text if (text or not turn.calls) else None,
            "refusal": None,
        }
        if turn.reasoning:
            message["reasoning_content"] = "".join(turn.reasoning)
        if turn.calls:
            message["tool_calls"] = [
                {
                    "id": c.call_id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in turn.calls
            ]
        return dumps(
            {
                "id": self.ids.chat,
                "object": "chat.completion",
                "created": CREATED,
                "model": self.model,
                "system_fingerprint": None,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": turn.finish_reason,
                    }
                ],
                "usage": chat_usage(turn, self.prompt_tokens),
            }
        )
