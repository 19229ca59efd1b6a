"""A model for chats longer than its window, shared by the long-chat tests
of every surface (gateway, ``serve`` with ``X-Session-ID``, the terminal).

The scripted model server refuses any prompt past ``WINDOW`` tokens (as
vLLM and OpenAI do) and says its window on its model card. Summary requests
(the agent's own, recognised by their instructions) get a short summary;
every other request is answered ``answer N`` (N taken from the question
``question N``) with enough words that a conversation passes the window
every dozen turns or so.
"""

from __future__ import annotations

import re

from hermes_trio.testing import RecordedRequest, TextReply, prompt_tokens
from hermes_trio.wire.context import SUMMARY_MARK

WINDOW = 4096
WORDS = " ".join(f"word{i}" for i in range(110))
_QUESTION = re.compile(r"question (\d+)")


def question(n: int) -> str:
    return f"question {n}: please go on with the story " + " ".join(["more"] * 40)


def answer(n: int) -> str:
    return f"answer {n} {WORDS}"


def is_summary_request(request: RecordedRequest) -> bool:
    messages = request.json.get("messages") or []
    return bool(messages) and str(messages[0].get("content", "")).startswith("You write the memory")


def reply(request: RecordedRequest) -> TextReply:
    if is_summary_request(request):
        return TextReply("notes: the user asks for more of the story, turn after turn")
    messages = request.json["messages"]
    asked = _QUESTION.search(str(messages[-1].get("content", "")))
    return TextReply(answer(int(asked.group(1)) if asked else -1))


def turns_asked(requests: list[RecordedRequest]) -> list[RecordedRequest]:
    """The model requests that answer a question (not summaries)."""
    return [
        r for r in requests if r.path.endswith("/chat/completions") and not is_summary_request(r)
    ]


def check_the_model_saw(requests: list[RecordedRequest], turns: int) -> int:
    """Every question reached the model within its window, with the
    conversation compacted along the way; returns how many summaries."""
    summaries = [r for r in requests if is_summary_request(r)]
    asked = turns_asked(requests)
    for request in asked:
        assert prompt_tokens(request.json) <= WINDOW
    seen = {
        int(m.group(1))
        for r in asked
        if (m := _QUESTION.search(str(r.json["messages"][-1].get("content", ""))))
    }
    assert seen == set(range(turns))
    assert summaries, "a chat this long must have been compacted"
    assert any(
        str(m.get("content", "")).startswith(SUMMARY_MARK)
        for r in asked
        for m in r.json["messages"]
    )
    return len(summaries)
