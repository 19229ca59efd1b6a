"""One response decided up front: status, headers, and a body as a fixed
block or as frames with the gap to wait before each, then how it ends.

The socket server and the in-process double both carry out the same plan,
so a script produces the same bytes at the same times on either.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal

from ..script import (
    Drop,
    ErrorFrame,
    ErrorReply,
    JSONInsteadOfStream,
    RawReply,
    RefuseStream,
    Stall,
    Step,
    TextReply,
    ToolCallReply,
)
from .chat_render import ChatRenderer
from .encoding import CREATED, dumps, error_body
from .responses_render import ResponsesRenderer
from .turns import Ids, Turn, make_turn

__all__ = [
    "API_BY_PATH",
    "INVALID_JSON",
    "Plan",
    "error_plan",
    "plan_answer",
    "reason",
    "too_long_plan",
]

# The endpoints that consume script steps.
API_BY_PATH = {"/v1/chat/completions": "chat", "/v1/responses": "responses"}


class _InvalidJSON:
    pass


#: The payload of a request whose body is not JSON.
INVALID_JSON: Any = _InvalidJSON()


@dataclass
class Plan:
    """Everything one response will do on the wire, decided up front."""

    status: int = 200
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    #: False: close before sending a single response byte.
    send_head: bool = True
    #: A fixed-length body (Content-Length set in headers).
    body: bytes | None = None
    #: Send only this many bytes of `body`, then end abruptly.
    truncate: int | None = None
    #: Streamed body: (seconds to wait before it, raw SSE bytes).
    frames: list[tuple[float, bytes]] = field(default_factory=list)
    has_waits: bool = False
    #: Silence after the last frame, before `end`.
    tail_wait: float = 0.0
    end: Literal["eom", "close", "reset"] = "eom"


def reason(status: int) -> bytes:
    """The reason phrase for ``status`` (empty for an unknown one)."""
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


def json_plan(status: int, body: bytes, extra: Sequence[tuple[bytes, bytes]] = ()) -> Plan:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra,
    ]
    return Plan(status=status, headers=headers, body=body)


def error_plan(
    status: int,
    message: str,
    *,
    type_: str | None = None,
    code: str | None = None,
    param: Any = None,
    headers: Iterable[tuple[str, str]] = (),
) -> Plan:
    extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    return json_plan(status, error_body(status, message, type_, code, param), extra)


def stream_plan(frames: list[tuple[float, bytes]]) -> Plan:
    return Plan(
        status=200,
        headers=[(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
        frames=frames,
        has_waits=any(gap > 0 for gap, _ in frames),
    )


def raw_plan(step: RawReply) -> Plan:
    pieces = step.pieces()
    headers = [(b"content-type", step.content_type.encode("latin-1"))]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in step.headers.items()]
    plan = Plan(
        status=step.status,
        headers=headers,
        frames=[(step.delay if i else 0.0, piece) for i, piece in enumerate(pieces)],
        has_waits=step.delay > 0 or step.hold > 0,
    )
    if step.hold:
        plan.tail_wait = step.hold
        plan.end = "close"
    return plan


def too_long_plan(path: str, window: int, count: int) -> Plan:
    """The refusal of a prompt of ``count`` tokens by a model that reads
    ``window``, as OpenAI and vLLM word it."""
    return error_plan(
        400,
        f"This model's maximum context length is {window} tokens. However, your messages "
        f"resulted in {count} tokens. Please reduce the length of the messages.",
        type_="invalid_request_error",
        code="context_length_exceeded",
        param="messages" if API_BY_PATH.get(path) == "chat" else "input",
    )


def models_plan(method: str, path: str, model: str, context_window: int | None = None) -> Plan:
    """``GET /v1/models`` and ``GET /v1/models/{id}``; the card says the
    ``context_window`` as vLLM's does (``max_model_len``)."""
    if method != "GET":
        return error_plan(405, f"method {method} not allowed", headers=[("Allow", "GET")])
    entry: dict[str, Any] = {
        "id": model,
        "object": "model",
        "created": CREATED,
        "owned_by": "hermes-trio",
    }
    if context_window is not None:
        entry["max_model_len"] = context_window
    if path == "/v1/models":
        return json_plan(200, dumps({"object": "list", "data": [entry]}))
    if path == f"/v1/models/{model}":
        return json_plan(200, dumps(entry))
    return error_plan(404, f"The model '{path[11:]}' does not exist", code="model_not_found")


def plan_answer(
    method: str,
    path: str,
    payload: Any,
    body: bytes,
    step: Step | None,
    *,
    model: str,
    response_number: int,
    turn_cache: dict[int, tuple[Step, Turn]] | None = None,
    context_window: int | None = None,
    prompt_count: int | None = None,
) -> Plan:
    """The response to one request. ``response_number`` numbers the ids of a
    model answer; ``turn_cache`` keeps rendered turns of reused steps;
    ``prompt_count`` is the usage's prompt tokens (None: an estimate from
    the body's size)."""
    if path == "/v1/models" or path.startswith("/v1/models/"):
        return models_plan(method, path, model, context_window)
    api = API_BY_PATH.get(path)
    if api is None:
        return error_plan(404, f"Unknown request URL: {method} {path}", code="unknown_url")
    if method != "POST":
        return error_plan(405, f"method {method} not allowed", headers=[("Allow", "POST")])
    if payload is INVALID_JSON or not isinstance(payload, dict):
        return error_plan(400, "request body must be a JSON object")
    if step is None:
        return error_plan(500, "script exhausted", code="script_exhausted")

    streaming = payload.get("stream") is True
    ids = Ids(response_number)
    asked = payload.get("model")
    name = asked if isinstance(asked, str) and asked else model
    # Without a window to judge by, plausible, cheap and deterministic:
    # ~4 bytes of JSON per token.
    prompt_tokens = max(1, len(body) // 4) if prompt_count is None else prompt_count
    renderer: ChatRenderer | ResponsesRenderer
    if api == "chat":
        opts = payload.get("stream_options")
        include_usage = isinstance(opts, dict) and opts.get("include_usage") is True
        renderer = ChatRenderer(ids, name, include_usage, prompt_tokens)
    else:
        renderer = ResponsesRenderer(ids, name, payload, prompt_tokens)

    if isinstance(step, ErrorReply):
        return error_plan(
            step.status,
            step.message,
            type_=step.type,
            code=step.code,
            headers=step.headers.items(),
        )
    if isinstance(step, RefuseStream):
        if streaming:
            return error_plan(
                400, "streaming is not supported", param="stream", code="unsupported_value"
            )
        return json_plan(200, renderer.completion(make_turn(step.reply, ids)))
    if isinstance(step, JSONInsteadOfStream):
        return json_plan(200, renderer.completion(make_turn(step.reply, ids)))
    if isinstance(step, RawReply):
        return raw_plan(step)
    if isinstance(step, TextReply | ToolCallReply):
        turn = make_turn(step, ids, turn_cache)
        if not streaming:
            return json_plan(200, renderer.completion(turn))
        hold = step.hold if isinstance(step, TextReply) else 0.0
        plan = stream_plan(renderer.stream(turn, "complete", done=not hold))
        if hold:
            plan.has_waits = True
            plan.tail_wait = hold
            plan.end = "close"
        return plan
    if isinstance(step, ErrorFrame):
        if not streaming:
            return error_plan(500, step.message)
        return stream_plan(renderer.stream(make_turn(step, ids), "error", step.message))
    if isinstance(step, Stall):
        if not streaming:
            # A non-streaming server that "thinks" forever sends nothing.
            return Plan(send_head=False, has_waits=True, tail_wait=step.seconds, end="close")
        plan = stream_plan(renderer.stream(make_turn(step, ids), "cut"))
        plan.has_waits = True
        plan.tail_wait = step.seconds
        plan.end = "close"
        return plan
    if isinstance(step, Drop):
        end: Literal["close", "reset"] = "reset" if step.reset else "close"
        if not step.text:
            return Plan(send_head=False, end=end)
        if not streaming:
            full = renderer.completion(make_turn(TextReply(step.text), ids))
            plan = json_plan(200, full)
            plan.truncate = len(full) // 2
        else:
            plan = stream_plan(renderer.stream(make_turn(step, ids), "cut"))
        plan.end = end
        return plan
    raise TypeError(f"not a script step: {step!r}")
