"""Approval over the Responses API against the real ``hermes-trio serve
--workers 2``, with the official ``openai`` SDK, each answer landing on the
other worker than the question: a flagged command (streamed and not) ends
the response with one ``mcp_approval_request`` item and has not run;
``approve: false`` never runs it and the model reads the refusal as the
call's result; ``approve: true`` runs it (an ``mcp_call`` item shows it); a
second answer, and another key's, are 400s naming ``approval_request_id``.
The command is flagged (``reboot``) but never reaches it: a marker file
says whether it ran. One process start for all of it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import openai
import pytest
from support import client_on

from hermes_trio.testing import TextReply, ToolCallReply
from tests.openai_spec import assert_valid
from tests.server.approvals.test_chat_approvals import flagged, serving


@asynccontextmanager
async def sdk_on(base_url: str, worker: str, key: str = "alice-key") -> AsyncIterator[Any]:
    """An SDK client whose one kept-alive connection was accepted by
    ``worker``: every request it sends is answered there."""
    async with client_on(base_url, worker, {"Authorization": f"Bearer {key}"}) as http:
        async with openai.AsyncOpenAI(
            base_url=base_url, api_key=key, http_client=http, max_retries=0
        ) as client:
            yield client


def answer(approval_id: str, approve: bool, reason: str | None = None) -> list[dict[str, Any]]:
    return [
        {
            "type": "mcp_approval_response",
            "approval_request_id": approval_id,
            "approve": approve,
            **({"reason": reason} if reason is not None else {}),
        }
    ]


async def refused(client: openai.AsyncOpenAI, **kwargs: Any) -> dict[str, Any]:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="m", **kwargs)
    body: Any = caught.value.body
    assert body["param"] == "approval_request_id", body
    return dict(body)


async def test_approve_deny_and_refusals_across_two_workers(tmp_path: Path) -> None:
    ran, denied = tmp_path / "ran", tmp_path / "denied"
    script = [
        ToolCallReply(calls=[("terminal", {"command": flagged(denied)})]),
        TextReply("Left it as it was."),
        ToolCallReply(calls=[("terminal", {"command": flagged(ran)})]),
        TextReply("Tidied."),
    ]
    async with (
        serving(script, tmp_path, workers=2) as (served, model),
        sdk_on(served.base_url, "0") as zero,
        sdk_on(served.base_url, "1") as one,
        sdk_on(served.base_url, "1", key="bob-key") as bob,
    ):
        # (1) Not streamed, worker 0: one approval request; nothing ran.
        first = await zero.responses.create(model="m", input="tidy up")
        assert first.status == "completed"
        (asked,) = first.output
        assert asked.type == "mcp_approval_request"
        assert asked.id.startswith("mcpr_")
        assert (asked.server_label, asked.name) == ("hermes", "terminal")
        assert asked.arguments == f'{{"command":"{flagged(denied)}"}}'
        assert_valid(first.to_dict(), "Response")
        assert not denied.exists()

        # Another key, on the other worker: as if it did not exist.
        body = await refused(bob, previous_response_id=first.id, input=answer(asked.id, True))
        assert body["code"] == "approval_request_not_found" and asked.id in body["message"]

        # (2) Denied, on worker 1: never runs; the model reads the refusal.
        second = await one.responses.create(
            model="m", previous_response_id=first.id, input=answer(asked.id, False, "not today")
        )
        assert second.output_text == "Left it as it was."
        assert not denied.exists()
        tool = [m for m in model.model_requests[1].json["messages"] if m["role"] == "tool"]
        assert len(tool) == 1
        assert "denied" in tool[0]["content"] and "not today" in tool[0]["content"]
        assert [item.type for item in second.output] == ["message"]

        # (3) A second answer, back on worker 0: 400.
        body = await refused(zero, previous_response_id=first.id, input=answer(asked.id, True))
        assert body["code"] == "approval_request_answered"
        assert asked.id in body["message"] and second.id in body["message"]
        assert not denied.exists()

        # (4) Streamed, worker 1: the item is added and done like any.
        stream = await one.responses.create(model="m", input="tidy again", stream=True)
        events = [event async for event in stream]
        for event in events:
            assert_valid(event.to_dict(), "ResponseStreamEvent")
        kinds = [event.type for event in events]
        assert kinds == [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.output_item.done",
            "response.completed",
        ]
        done = events[-1].response  # type: ignore[union-attr]
        (held,) = done.output
        assert held.type == "mcp_approval_request"
        assert events[2].item.id == held.id  # type: ignore[union-attr]
        assert not ran.exists()

        # (5) Approved, on worker 0: it runs, and the turn goes on.
        third = await zero.responses.create(
            model="m", previous_response_id=done.id, input=answer(held.id, True)
        )
        assert ran.exists()
        call, message = third.output
        assert call.type == "mcp_call"
        assert (call.approval_request_id, call.status, call.name) == (
            held.id,
            "completed",
            "terminal",
        )
        assert message.type == "message" and third.output_text == "Tidied."
        assert_valid(third.to_dict(), "Response")
        # Its input items list the answer.
        items = await zero.responses.input_items.list(third.id)
        (listed,) = items.data
        assert listed.type == "mcp_approval_response"
        assert (listed.approval_request_id, listed.approve) == (held.id, True)
        assert_valid(listed.to_dict(), "MCPApprovalResponseResource")
