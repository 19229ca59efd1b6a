"""A 4xx answer to a streaming request is the request's fault until a
non-streamed retry of the same request succeeds; only then does the client
stop streaming to that model server, and only for a while."""

from __future__ import annotations

import json

from support import api_stack, http_for

from hermes_trio.llm.stream_support import StreamSupport
from hermes_trio.testing import ErrorReply, RefuseStream, TextReply

TOO_LONG = (
    "This model's maximum context length is 4096 tokens. However, your messages "
    "resulted in 9000 tokens. Please reduce the length of the messages."
)
CHAT = {"model": "hermes-agent", "messages": [{"role": "user", "content": "hi"}]}


def too_long() -> ErrorReply:
    return ErrorReply(400, TOO_LONG, code="context_length_exceeded", type="invalid_request_error")


async def test_a_400_reaches_the_client_and_the_next_request_still_streams() -> None:
    script = [
        # The streamed request: a prompt too long is the request's fault,
        # so no non-streamed retry sends it again.
        too_long(),
        TextReply("still streaming"),
        too_long(),  # a non-streaming client: one request, one 400
    ]
    async with api_stack(script, model={"max_retries": 0}) as (api, model):
        async with http_for(api) as http:
            refused = await http.post("/chat/completions", json={**CHAT, "stream": True})
            fine = await http.post("/chat/completions", json={**CHAT, "stream": True})
            plain = await http.post("/chat/completions", json=CHAT)
        seen = [r.stream for r in model.model_requests]
    assert refused.status_code == 400, refused.text
    assert refused.headers["content-type"].startswith("application/json")
    error = refused.json()["error"]
    assert error["message"] == TOO_LONG
    assert error["code"] == "context_length_exceeded"
    assert error["type"] == "invalid_request_error"
    assert fine.status_code == 200
    chunks = [json.loads(line[6:]) for line in fine.text.splitlines() if line[:7] == "data: {"]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == (
        "still streaming"
    )
    assert plain.status_code == 400 and plain.json()["error"]["message"] == TOO_LONG
    assert seen == [True, True, False]


async def test_a_400_reaches_a_responses_client_as_400() -> None:
    async with api_stack([too_long(), too_long()], model={"max_retries": 0}) as (api, _):
        async with http_for(api) as http:
            answer = await http.post("/responses", json={"model": "hermes-agent", "input": "hi"})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "context_length_exceeded"


async def test_a_429_after_the_retries_is_a_429_and_a_401_stays_a_502() -> None:
    script = [ErrorReply(429, "slow down"), ErrorReply(401, "bad key")]
    async with api_stack(script, model={"max_retries": 0}) as (api, _):
        async with http_for(api) as http:
            limited = await http.post("/chat/completions", json=CHAT)
            unauthorised = await http.post("/chat/completions", json=CHAT)
    assert limited.status_code == 429 and "slow down" in limited.json()["error"]["message"]
    # The server's own key is wrong: a client with a valid key must not be
    # told it is not authorised.
    assert unauthorised.status_code == 502
    assert unauthorised.json()["error"]["code"] == "model_error"


async def test_a_model_that_cannot_stream_leaves_other_models_of_its_server_streaming() -> None:
    # An o1-style model refuses streams; another model on the same server streams.
    script = [RefuseStream(TextReply("plain")), TextReply("streamed"), TextReply("again")]
    api = {"allow_model_override": True}
    async with api_stack(script, api=api) as (server, model):
        async with http_for(server) as http:
            for name in ("o1-no-stream", "gpt-streams", "o1-no-stream"):
                body = {**CHAT, "model": name, "stream": True}
                answer = await http.post("/chat/completions", json=body)
                assert answer.status_code == 200, answer.text
        seen = [(r.json["model"], r.stream) for r in model.model_requests]
    assert seen == [
        ("o1-no-stream", True),
        ("o1-no-stream", False),
        ("gpt-streams", True),
        ("o1-no-stream", False),
    ]


# -- the decision itself --------------------------------------------------------


def test_streaming_is_allowed_until_a_refusal_is_confirmed() -> None:
    support = StreamSupport()
    a = ("http://a/v1", "m")
    assert support.allows(a, now=0.0)
    support.refused(a, now=10.0)
    assert not support.allows(a, now=10.0)
    assert support.allows(("http://b/v1", "m"), now=10.0)  # per model server
    assert support.allows(("http://a/v1", "other"), now=10.0)  # and per model
    assert not support.allows(a, now=10.0 + StreamSupport.TTL - 0.001)
    assert support.allows(a, now=10.0 + StreamSupport.TTL)
    # Expired means forgotten: a new refusal starts a new period.
    support.refused(a, now=1000.0)
    assert not support.allows(a, now=1000.0 + StreamSupport.TTL - 1)
