"""Approval over the Responses API, in OpenAI's shape, in process (the
real API server on loopback, the official SDK): a flagged call ends the
response with one ``mcp_approval_request`` item and has not run; an
``mcp_approval_response`` with ``previous_response_id`` settles it. Here:
the refusals that need a clock or no second process (expired, unknown, not
in the conversation continued, answered twice in one request) and a
conversation that goes on without answering; ``store: false`` refuses
as before; an answer after the server restarted on the same store
counts. The real ``serve --workers 2`` round trips are in
``test_responses_approvals_serve.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest
from support import api_stack, client_for, http_for

from hermes_trio.server.responses import routes
from hermes_trio.testing import TextReply, ToolCallReply
from tests.openai_spec import assert_valid


def flagged(marker: Path) -> str:
    """Runs ``touch``; the safety check sees ``reboot``, which never runs."""
    return f"touch {marker}; exit 0; reboot"


def answer(approval_id: str, approve: bool, reason: str | None = None) -> list[dict[str, Any]]:
    item: dict[str, Any] = {
        "type": "mcp_approval_response",
        "approval_request_id": approval_id,
        "approve": approve,
    }
    if reason is not None:
        item["reason"] = reason
    return [item]


async def refused(client: openai.AsyncOpenAI, code: str, **kwargs: Any) -> str:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="m", **kwargs)
    body: Any = caught.value.body
    assert body["param"] == "approval_request_id", body
    assert body["code"] == code, body
    return str(body["message"])


async def test_refused_answers_and_a_conversation_that_goes_on_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    markers = [tmp_path / f"m{n}" for n in range(3)]
    script = [
        ToolCallReply(calls=[("terminal", {"command": flagged(markers[0])})]),
        ToolCallReply(calls=[("terminal", {"command": flagged(markers[1])})]),
        TextReply("Understood, I left it."),
        ToolCallReply(calls=[("terminal", {"command": flagged(markers[2])})]),
        TextReply("I may not."),
    ]
    async with api_stack(script) as (api, model), client_for(api) as client:
        first = await client.responses.create(model="m", input="tidy up")
        assert first.status == "completed"
        (asked,) = first.output
        assert asked.type == "mcp_approval_request"
        assert not markers[0].exists()
        async with http_for(api) as http:
            raw = (await http.get(f"/responses/{first.id}")).json()
        assert_valid(raw, "Response")
        assert_valid(raw["output"][0], "MCPApprovalRequest")

        # Unknown, and one answered twice in the same request.
        message = await refused(
            client,
            "approval_request_not_found",
            previous_response_id=first.id,
            input=answer("mcpr_nope", True),
        )
        assert "mcpr_nope" in message
        message = await refused(
            client,
            "approval_request_answered",
            previous_response_id=first.id,
            input=answer(asked.id, True) + answer(asked.id, False),
        )
        assert asked.id in message
        # Without the response that asked: it cannot be settled.
        message = await refused(
            client, "approval_request_not_pending", input=answer(asked.id, True)
        )
        assert first.id in message

        # Past its expiry (approvals.timeout, 300 s by default).
        later = routes.wall_clock() + 301
        monkeypatch.setattr(routes, "wall_clock", lambda: later)
        message = await refused(
            client,
            "approval_request_expired",
            previous_response_id=first.id,
            input=answer(asked.id, True),
        )
        assert asked.id in message and "expired" in message
        monkeypatch.undo()
        assert not markers[0].exists()

        # The client goes on without answering: the call is refused as
        # unanswered, and the model reads that as its result.
        second = await client.responses.create(
            model="m", previous_response_id=first.id, input="never mind"
        )
        (again,) = second.output
        assert again.type == "mcp_approval_request" and again.id != asked.id
        tool = [m for m in model.model_requests[1].json["messages"] if m["role"] == "tool"]
        assert "did not give it" in tool[0]["content"]
        # Then no answer at all, a plain message: the other held call too.
        third = await client.responses.create(
            model="m", previous_response_id=second.id, input="leave it"
        )
        assert third.output_text == "Understood, I left it."

        # With store: false there is nowhere to keep the question: refused.
        unstored = await client.responses.create(model="m", input="tidy", store=False)
        assert unstored.output_text == "I may not."
        tool = [m for m in model.model_requests[4].json["messages"] if m["role"] == "tool"]
        assert "no approval channel" in tool[0]["content"]
        assert not any(m.exists() for m in markers)


def test_approval_items_in_the_input_are_checked_and_kept() -> None:
    from hermes_trio.server.parsing.errors import APIError
    from hermes_trio.server.responses.input import approval_answers, parse_input

    given = [
        {"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "hermes",
         "name": "terminal", "arguments": "{}"},
        {"type": "mcp_call", "id": "mcp_1", "server_label": "hermes", "name": "terminal",
         "arguments": "{}", "output": "ok", "status": "completed"},
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": False,
         "reason": "no"},
    ]  # fmt: skip
    messages, items, _ = parse_input(given)
    assert messages == []
    assert items[:2] == given[:2]
    (response,) = approval_answers(items)
    assert response["id"].startswith("mcpa_")
    assert (response["approval_request_id"], response["approve"], response["reason"]) == (
        "mcpr_1",
        False,
        "no",
    )
    assert_valid(response, "MCPApprovalResponseResource")
    for bad_item, param in [
        ({"approve": True}, "input[0].approval_request_id"),
        ({"approval_request_id": "mcpr_1", "approve": "yes"}, "input[0].approve"),
        ({"approval_request_id": "mcpr_1", "approve": True, "reason": 3}, "input[0].reason"),
    ]:
        with pytest.raises(APIError) as caught:
            parse_input([{"type": "mcp_approval_response", **bad_item}])
        assert caught.value.status == 400 and caught.value.param == param
    with pytest.raises(APIError) as caught:
        parse_input([{"type": "mcp_approval_request", "id": "mcpr_1"}])
    assert caught.value.param == "input[0].server_label"
    with pytest.raises(APIError) as caught:
        parse_input(given[:2])
    assert caught.value.param == "input"


async def test_the_answer_counts_after_a_restart(tmp_path: Path) -> None:
    from support import make_config

    from hermes_trio.config import ApiServerConfig
    from hermes_trio.server.run import open_api_server
    from hermes_trio.testing import open_scripted_server

    marker = tmp_path / "after-restart"
    script = [
        ToolCallReply(calls=[("terminal", {"command": flagged(marker)})]),
        TextReply("Done, after the restart."),
    ]
    async with open_scripted_server(script) as model:
        config = make_config(model.base_url, api_server=ApiServerConfig())
        async with open_api_server(config, port=0) as api, client_for(api) as client:
            first = await client.responses.create(model="m", input="tidy up")
        (asked,) = first.output
        assert not marker.exists()
        # A new server on the same store: the question is still there.
        async with open_api_server(config, port=0) as api, client_for(api) as client:
            second = await client.responses.create(
                model="m", previous_response_id=first.id, input=answer(asked.id, True)
            )
    assert marker.exists()
    assert second.output_text == "Done, after the restart."
    assert [item.type for item in second.output] == ["mcp_call", "message"]
