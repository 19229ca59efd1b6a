"""``/v1/responses``: the Responses API over the agent, with a durable store
and resumable streams.

- ``POST /v1/responses`` runs one agent turn, streamed (``stream: true``) or
  not. ``previous_response_id`` continues the stored conversation, tool calls
  and tool results included; ``store: false`` keeps nothing. ``item_reference``
  input items name items of this owner's stored responses. The agent's own
  tool calls are not output items (only calls of the client's tools are);
  ``X-Hermes-Stream-Extensions: tools`` shows them as ``hermes.tool.*``
  stream events.
  A call the safety check flags ends a stored response with an
  ``mcp_approval_request`` item; the next request's
  ``mcp_approval_response`` items settle it (:mod:`.held`).
- ``GET /v1/responses/{id}`` returns the response object, or with
  ``stream=true`` replays its events after ``starting_after`` and then
  follows the turn while it runs.
- ``POST /v1/responses/compact`` summarises a conversation into one
  sealed ``compaction`` item (:mod:`.compact`); ``context_management``
  compacts inside a turn, and ``truncation`` says what a turn does with a
  conversation too long for the window (:func:`.request.context_policy`).
- ``DELETE /v1/responses/{id}``, ``GET /v1/responses/{id}/input_items`` and
  ``POST /v1/responses/{id}/cancel`` (background responses).

Requests are validated in :mod:`.request`; running responses live in
:mod:`.live`. A response that is not running is answered from the store.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from quart import Response, request
from quart_trio import QuartTrio

from ...endings import CancelCause
from ...store import HeldApproval, StoredResponse, wall_clock
from ...turn import HeldCalls
from ...wire.messages import Message
from ...wire.responses_out import new_response_id
from ...wire.responses_types import McpApprovalResponse, OutputItem
from ..edge.bodies import (
    JsonBody,
    json_response,
    read_json,
    request_owner,
    sse_response,
    stream_extensions,
    validate_body,
)
from ..parsing.errors import APIError, error_status
from ..parsing.validation import bad
from ..state import ServerState
from .compact import compact_conversation, parse_compact_request
from .held import answered_twice, check_answer, held_ids, open_calls, settle
from .input import (
    approval_answers,
    check_tool_outputs,
    item_references,
    open_sealed,
    resolve_references,
)
from .live import STOP_WAIT, LiveResponses
from .remote import StoredFollowBody, stop_elsewhere
from .request import (
    ResponsesRequest,
    parse_items_query,
    parse_responses_request,
    parse_retrieve_query,
)
from .request_tools import listed_labels

__all__ = ["register_responses_routes"]


# Earlier responses looked at for MCP listings (a longer chain lists again).
MAX_CHAIN = 100


def _not_found(response_id: str) -> APIError:
    return APIError(
        404,
        f"Response with id '{response_id}' not found.",
        param="response_id",
        code="response_not_found",
    )


def _not_background() -> APIError:
    return bad("Only responses created with 'background': true can be cancelled.", "response_id")


class _Responses:
    def __init__(self, state: ServerState) -> None:
        self.live = LiveResponses(state)
        self.store = state.store
        self.keepalive = state.settings.keepalive_interval
        self.settings = state.settings
        self.agent = state.agent

    async def create(self, body: JsonBody, parse: Callable[[Any], ResponsesRequest]) -> Response:
        owner = request_owner()
        extensions = stream_extensions()
        value = body.value
        if isinstance(value, dict):
            value = await self._resolve_references(value, owner)
        req = await validate_body(parse, value, body.size)
        if req.sealed:
            open_sealed(await self.live.sealer(), req.sealed, req.messages, req.input_items)
        answers = _answers(req)
        checked: dict[str, HeldApproval] = {}
        for approval_id in answers:
            # Before the conversation: another key's answer names the
            # approval, not the response it cannot see.
            checked[approval_id] = check_answer(
                approval_id,
                await self.store.held_approval(approval_id),
                owner=owner,
                now=wall_clock(),
            )
        conversation, inherited, previous = await self._conversation(req, owner)
        held, approved = await self._held(
            req, owner, answers, checked, conversation, inherited, previous
        )
        response_id = new_response_id()
        for approval_id in answers:
            if not await self.store.take_approval(approval_id, response_id):
                raise answered_twice(approval_id)
        live = await self.live.start(
            req,
            owner,
            conversation,
            inherited=inherited,
            tool_events="tools" in extensions,
            held=held,
            approved=approved,
            response_id=response_id,
            mcp_listed=await self._mcp_listed(req, owner),
        )
        builder = live.builder
        if req.stream:
            return sse_response(self.live.follow(live, owns_turn=not req.background))
        if req.background:
            return json_response(builder.snapshot())
        try:
            await live.turn.done.wait()
        finally:
            live.turn.cancel(CancelCause.CLIENT_GONE)
        if builder.status == "failed":
            message = builder.error["message"] if builder.error is not None else None
            raise APIError(
                live.store_error.status
                if live.store_error
                else error_status(builder.error_code, builder.model_status),
                str(message or "the model server failed"),
                code=builder.error_code,
            )
        return json_response(builder.snapshot())

    async def compact(self, body: Any) -> Response:
        owner = request_owner()
        req = parse_compact_request(body)
        sealer = await self.live.sealer()
        if req.sealed:
            open_sealed(sealer, req.sealed, req.messages, [])
        conversation: list[Message] = []
        if req.previous_response_id is not None:
            conversation = list((await self._previous(req.previous_response_id, owner)).messages)
        conversation += req.messages
        if req.instructions:
            conversation.insert(0, {"role": "system", "content": req.instructions})
        model = req.model if (self.settings.allow_model_override and req.model) else None
        return json_response(await compact_conversation(self.agent, sealer, conversation, model))

    async def _mcp_listed(self, req: ResponsesRequest, owner: str) -> frozenset[str]:
        """The MCP servers whose tools this conversation has listed already:
        an ``mcp_list_tools`` item in an earlier response of the chain."""
        outputs: list[list[OutputItem]] = []
        parent = req.previous_response_id if req.mcp else None
        for _ in range(MAX_CHAIN):
            if parent is None:
                break
            stored = await self.store.get(parent, owner)
            if stored is None:
                break
            outputs.append(list(stored.response.get("output") or []))
            parent = stored.parent
        return frozenset(listed_labels(outputs))

    async def _resolve_references(self, body: dict[str, Any], owner: str) -> dict[str, Any]:
        """The body with its ``item_reference`` inputs replaced by the items
        they name, looked up among ``owner``'s stored responses."""
        ids = item_references(body.get("input"))
        if not ids:
            return body
        stored = await self.store.find_items(owner, ids)
        return {**body, "input": resolve_references(body["input"], stored)}

    async def _held(
        self,
        req: ResponsesRequest,
        owner: str,
        answers: dict[str, McpApprovalResponse],
        checked: dict[str, HeldApproval],
        conversation: list[Message],
        inherited: int,
        previous: StoredResponse | None,
    ) -> tuple[HeldCalls | None, dict[str, str]]:
        """The previous response's held calls, settled by this request's
        answers (400 for an answer that cannot count), and the approved
        ones' approval ids by call id. ``checked``: the answered approvals,
        as read (and checked) already."""
        waiting = held_ids(previous.response.get("output") or []) if previous is not None else []
        found: dict[str, HeldApproval] = {}
        for approval_id in waiting:
            record = checked.get(approval_id) or await self.store.held_approval(approval_id)
            if record is not None:
                found[approval_id] = record
        for approval_id in answers:
            check_answer(
                approval_id,
                checked[approval_id],
                owner=owner,
                now=wall_clock(),
                asked_by=req.previous_response_id,
                waiting=waiting,
            )
        held = settle(
            inherited, list(found.values()), answers, open_calls(conversation[:inherited])
        )
        approved = {
            found[approval_id].call_id: approval_id
            for approval_id, answer in answers.items()
            if answer["approve"]
        }
        return held, approved

    async def _conversation(
        self, req: ResponsesRequest, owner: str
    ) -> tuple[list[Message], int, StoredResponse | None]:
        """What the new response's turn continues from: the previous
        response's conversation, then this request's input; how many
        messages of it are the previous response's; and that response."""
        conversation: list[Message] = []
        previous: StoredResponse | None = None
        if req.previous_response_id is not None:
            previous = await self._previous(req.previous_response_id, owner)
            live = self.live.find(req.previous_response_id, owner)
            if live is not None and live.store_error is not None:
                # The row still says in_progress: the store refused its end.
                raise bad(
                    f"Previous response with id '{req.previous_response_id}' failed: it "
                    f"could not be stored ({live.store_error.code}), so it cannot be "
                    "continued; send its input again without previous_response_id",
                    "previous_response_id",
                    code="previous_response_failed",
                )
            if previous.status == "in_progress":
                raise bad(
                    f"Previous response with id '{req.previous_response_id}' is still in "
                    "progress; wait for it to finish or cancel it",
                    "previous_response_id",
                    code="previous_response_in_progress",
                )
            conversation = list(previous.messages)
        inherited = len(conversation)
        conversation += req.messages
        # The held calls get their results when the turn settles them.
        check_tool_outputs(conversation)
        return conversation, inherited, previous

    async def _previous(self, response_id: str, owner: str) -> StoredResponse:
        previous = await self.store.get(response_id, owner)
        if previous is None:
            raise bad(
                f"Previous response with id '{response_id}' not found.",
                "previous_response_id",
                code="previous_response_not_found",
            )
        return previous

    async def retrieve(self, response_id: str) -> Response:
        owner = request_owner()
        query = parse_retrieve_query(request.args)
        live = self.live.find(response_id, owner)
        if live is not None:
            if query.stream:
                return sse_response(self.live.follow(live, after=query.after))
            if live.store_error is not None:
                # Its end exists only here (the store refused it).
                return json_response(live.builder.snapshot())
            # Running here: the store says as much as its stream has shown.
        row = await self.store.get(response_id, owner)
        if row is None:
            raise _not_found(response_id)
        if not query.stream:
            return json_response(row.response)
        # Replayed a page at a time; one still running (in another process)
        # is followed as it stores more.
        return sse_response(
            StoredFollowBody(
                self.store,
                response_id,
                owner,
                query.after,
                self.keepalive,
                follow=row.status == "in_progress",
            )
        )

    async def delete(self, response_id: str) -> Response:
        owner = request_owner()
        live = self.live.find(response_id, owner)
        if live is not None:
            await self.live.stop(live, "the response was deleted")
        else:
            row = await self.store.get(response_id, owner)
            if row is not None and row.status == "in_progress":
                await stop_elsewhere(self.store, row, "stop_response", wait=STOP_WAIT)
        if not await self.store.delete(response_id, owner):
            raise _not_found(response_id)
        return json_response({"id": response_id, "object": "response.deleted", "deleted": True})

    async def cancel(self, response_id: str) -> Response:
        owner = request_owner()
        live = self.live.find(response_id, owner)
        if live is not None:
            if not live.background:
                raise _not_background()
            await self.live.cancel(live)
            return json_response(live.builder.snapshot())
        row = await self.store.get(response_id, owner)
        if row is None:
            raise _not_found(response_id)
        if not row.background:
            raise _not_background()
        if row.status == "in_progress":
            # Running in another process.
            row = await stop_elsewhere(self.store, row, "cancel_response", wait=STOP_WAIT)
        # Already over: cancelling again returns the final response.
        return json_response(row.response)

    async def input_items(self, response_id: str) -> Response:
        owner = request_owner()
        query = parse_items_query(request.args)
        row = await self.store.get(response_id, owner)
        if row is None:
            raise _not_found(response_id)
        items = list(row.input_items)
        if query.order == "desc":
            items.reverse()
        if query.after is not None:
            ids = [item.get("id") for item in items]
            if query.after not in ids:
                raise bad(f"no input item with id '{query.after}' in this response", "after")
            items = items[ids.index(query.after) + 1 :]
        page = items[: query.limit]
        return json_response(
            {
                "object": "list",
                "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": len(items) > query.limit,
            }
        )


def _answers(req: ResponsesRequest) -> dict[str, McpApprovalResponse]:
    """The request's ``mcp_approval_response`` items by approval id; 400
    for one approval answered twice here."""
    answers: dict[str, McpApprovalResponse] = {}
    for item in approval_answers(req.input_items):
        approval_id = item["approval_request_id"]
        if approval_id in answers:
            raise answered_twice(approval_id)
        answers[approval_id] = item
    return answers


def register_responses_routes(app: QuartTrio, state: ServerState) -> None:
    """Add the ``/v1/responses`` endpoints to ``app``."""
    responses = _Responses(state)
    parse = partial(
        parse_responses_request,
        extra=state.settings.extra_params,
        mcp_allowed_urls=state.settings.mcp_allowed_urls,
    )

    @app.post("/v1/responses")
    async def create_response() -> Response:
        # References are resolved against the store before the body is
        # checked, so the stored items they stand for are checked too.
        return await responses.create(await read_json(), parse)

    @app.post("/v1/responses/compact")
    async def compact_response() -> Response:
        return await responses.compact((await read_json()).value)

    @app.get("/v1/responses/<response_id>")
    async def retrieve_response(response_id: str) -> Response:
        return await responses.retrieve(response_id)

    @app.delete("/v1/responses/<response_id>")
    async def delete_response(response_id: str) -> Response:
        return await responses.delete(response_id)

    @app.post("/v1/responses/<response_id>/cancel")
    async def cancel_response(response_id: str) -> Response:
        return await responses.cancel(response_id)

    @app.get("/v1/responses/<response_id>/input_items")
    async def list_input_items(response_id: str) -> Response:
        return await responses.input_items(response_id)
