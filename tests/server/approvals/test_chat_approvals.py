"""Approvals over Chat Completions, against the real ``hermes-trio serve``:
an opted-in stream (``X-Hermes-Stream-Extensions: approvals``) shows
``hermes.approval.request`` and waits; ``POST /v1/approvals/{id}`` answers
it (approve: the command runs; deny: it never does and the model reads
why); a second answer, another key's, an unknown id are refused (another
key's as if the id were unknown, even once it ended); a client
gone or a newer request on the session cancels the wait; with
``--workers 2`` the answer lands on the other worker and still tells the
real outcome. The command is flagged (``reboot``) but never reaches it:
a marker file says whether it ran."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from support import (
    SHORT_SHUTDOWN,
    ServeProcess,
    child_patches,
    clean_env,
    client_on,
    start_serve,
)

from hermes_trio.llm.http_body import open_body
from hermes_trio.server.approvals.route import Answer, parse_answer
from hermes_trio.server.parsing.errors import APIError
from hermes_trio.store.sqlite import DB_FILENAME
from hermes_trio.testing import (
    ScriptedModelServer,
    TextReply,
    ToolCallReply,
    open_scripted_server,
)

ALICE = {"Authorization": "Bearer alice-key"}
BOB = {"Authorization": "Bearer bob-key"}
OPT_IN = {"X-Hermes-Stream-Extensions": "approvals,tools"}


def flagged(marker: Path) -> str:
    """Runs ``touch``; the safety check sees ``reboot``, which never runs."""
    return f"touch {marker}; exit 0; reboot"


def tool_turn(marker: Path, answer: str = "All done.") -> list[Any]:
    return [
        ToolCallReply(calls=[("terminal", {"command": flagged(marker)})]),
        TextReply(answer),
    ]


def chat(stream: bool = True) -> dict[str, Any]:
    return {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "tidy"}]}


class Events:
    """The SSE events of one streamed reply, as (type, data) pairs."""

    def __init__(self, reply: httpx.Response) -> None:
        self._lines = reply.aiter_lines()
        self.seen: list[tuple[str, Any]] = []
        self.text = ""

    async def next(self) -> tuple[str, Any]:
        kind, data = "message", None
        async for line in self._lines:
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
            elif line == "" and data is not None:
                value = data if data == "[DONE]" else json.loads(data)
                if kind == "message" and isinstance(value, dict):
                    for choice in value.get("choices", []):
                        self.text += choice["delta"].get("content") or ""
                self.seen.append((kind, value))
                return kind, value
        raise EOFError

    async def until(self, kind: str) -> Any:
        with trio.fail_after(10):
            while True:
                got, data = await self.next()
                if got == kind:
                    return data

    async def rest(self) -> None:
        with trio.fail_after(10):
            try:
                while True:
                    await self.next()
            except EOFError:
                pass


@asynccontextmanager
async def serving(
    script: list[Any],
    tmp_path: Path,
    *,
    workers: int = 1,
    extra: str = "",
    patches: dict[str, dict[str, Any]] | None = None,
) -> AsyncIterator[tuple[ServeProcess, ScriptedModelServer]]:
    (tmp_path / "config.yaml").write_text(
        "api_server:\n  keys:\n"
        "    - {name: alice, key: alice-key}\n"
        "    - {name: bob, key: bob-key}\n" + extra
    )
    async with open_scripted_server(script) as model, trio.open_nursery() as nursery:
        env = clean_env(
            HERMES_MODEL_BASE_URL=model.base_url,
            HERMES_DATA_DIR=str(tmp_path / "data"),
            API_SERVER_WORKERS=str(workers),
            **child_patches(patches or {}),
        )
        served = await start_serve(nursery, env, tmp_path)
        yield served, model
        nursery.cancel_scope.cancel()


def tool_results(model: ScriptedModelServer, n: int) -> list[str]:
    sent = model.model_requests[n - 1].json
    return [m["content"] for m in sent["messages"] if m["role"] == "tool"]


def test_an_answer_body_is_checked() -> None:
    assert parse_answer({"approve": True}) == Answer(True, "")
    assert parse_answer({"approve": False, "reason": "no"}) == Answer(False, "no")
    for body, param in [
        ({}, "approve"),
        ({"approve": "yes"}, "approve"),
        ({"approve": True, "reason": 3}, "reason"),
        ({"approve": True, "always": True}, "always"),
    ]:
        with pytest.raises(APIError) as caught:
            parse_answer(body)
        assert caught.value.status == 400 and caught.value.param == param
    with pytest.raises(APIError):
        parse_answer([True])


async def test_approve_deny_refusals_and_a_client_gone(tmp_path: Path) -> None:
    ran, denied, gone, plain = (tmp_path / n for n in ("ran", "denied", "gone", "plain"))
    script = [
        *tool_turn(ran, "Tidied."),
        *tool_turn(denied, "Left as it was."),
        ToolCallReply(calls=[("terminal", {"command": flagged(gone)})]),
        *tool_turn(plain, "Could not."),
    ]
    async with serving(script, tmp_path) as (served, model):
        async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as http:
            # (1) Approved: the command runs and the answer streams on.
            async with http.stream(
                "POST", "/chat/completions", json=chat(), headers={**ALICE, **OPT_IN}
            ) as reply:
                assert reply.status_code == 200
                events = Events(reply)
                asked = await events.until("hermes.approval.request")
                approval_id = asked["id"]
                assert approval_id.startswith("mcpr_")
                assert asked["type"] == "hermes.approval.request"
                assert asked["tool"] == "terminal"
                assert asked["arguments"] == {"command": flagged(ran)}
                assert asked["command"] == flagged(ran)
                assert "rebooting" in asked["reason"]
                assert asked["timeout"] == 300
                assert time.time() + 250 < asked["expires_at"] < time.time() + 301
                assert not ran.exists()
                # Another key may not answer it (to it, no such approval),
                # and an unknown id is a 404.
                other = await http.post(
                    f"/approvals/{approval_id}", json={"approve": True}, headers=BOB
                )
                assert other.status_code == 404, other.text
                assert other.json()["error"]["code"] == "approval_not_found"
                assert approval_id in other.json()["error"]["message"]
                unknown = await http.post(
                    "/approvals/mcpr_nope", json={"approve": True}, headers=ALICE
                )
                assert unknown.status_code == 404
                assert "mcpr_nope" in unknown.json()["error"]["message"]
                assert not ran.exists()
                yes = await http.post(
                    f"/approvals/{approval_id}", json={"approve": True}, headers=ALICE
                )
                assert yes.status_code == 200, yes.text
                assert yes.json() == {
                    "id": approval_id,
                    "object": "hermes.approval",
                    "outcome": "approved",
                    "by": "alice",
                    "reason": "",
                }
                resolved = await events.until("hermes.approval.resolved")
                assert resolved["id"] == approval_id
                assert (resolved["outcome"], resolved["by"]) == ("approved", "alice")
                await events.rest()
            assert ran.exists()
            assert events.text == "Tidied."
            assert events.seen[-1] == ("message", "[DONE]")
            # A second answer: 400 naming the id and how it ended.
            again = await http.post(
                f"/approvals/{approval_id}", json={"approve": False}, headers=ALICE
            )
            assert again.status_code == 400
            error = again.json()["error"]
            assert error["code"] == "approval_not_pending"
            assert approval_id in error["message"] and "approved by alice" in error["message"]

            # (2) Denied: it never runs; the model reads the refusal.
            async with http.stream(
                "POST", "/chat/completions", json=chat(), headers={**ALICE, **OPT_IN}
            ) as reply:
                events = Events(reply)
                asked = await events.until("hermes.approval.request")
                no = await http.post(
                    f"/approvals/{asked['id']}",
                    json={"approve": False, "reason": "not today"},
                    headers=ALICE,
                )
                assert no.status_code == 200
                assert no.json()["outcome"] == "denied"
                resolved = await events.until("hermes.approval.resolved")
                assert resolved["outcome"] == "denied"
                await events.rest()
            assert not denied.exists()
            assert events.text == "Left as it was."
            (result,) = tool_results(model, 4)
            assert "denied" in result and "not today" in result

            # (3) The client goes away while the turn waits: nothing stays
            # pending, the command never runs.
            async with http.stream(
                "POST", "/chat/completions", json=chat(), headers={**ALICE, **OPT_IN}
            ) as reply:
                # Raw pieces: the body is closed on the way out, not left
                # half-read to the garbage collector.
                seen = b""
                async with open_body(reply, decode=False) as pieces:
                    async for piece in pieces:
                        seen += piece
                        if b"event: hermes.approval.request" in seen and seen.endswith(b"\n\n"):
                            break
                frame = seen.split(b"event: hermes.approval.request\n")[1]
                asked = json.loads(frame.split(b"data: ", 1)[1].split(b"\n", 1)[0])
            health = served.base_url.removesuffix("/v1") + "/health"
            with trio.fail_after(10):
                while (await http.get(health)).json()["turns_running"]:  # noqa: ASYNC110
                    await trio.sleep(0.02)  # another process: nothing to wait on but a poll
            late = await http.post(
                f"/approvals/{asked['id']}", json={"approve": True}, headers=ALICE
            )
            assert late.status_code == 400
            assert "cancelled" in late.json()["error"]["message"]
            assert not gone.exists()

            # (4) Not streamed: the opt-in does not apply; refused as before.
            done = await http.post(
                "/chat/completions", json=chat(stream=False), headers={**ALICE, **OPT_IN}
            )
            assert done.status_code == 200
            assert done.json()["choices"][0]["message"]["content"] == "Could not."
            (result,) = tool_results(model, 7)
            assert "no approval channel" in result
            assert not plain.exists()


async def test_a_newer_request_on_the_session_cancels_the_wait(tmp_path: Path) -> None:
    marker = tmp_path / "never"
    script = [
        ToolCallReply(calls=[("terminal", {"command": flagged(marker)})]),
        TextReply("The newer answer."),
    ]
    session = {"X-Session-ID": "s-approvals"}
    async with serving(script, tmp_path) as (served, _):
        async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as http:
            async with http.stream(
                "POST", "/chat/completions", json=chat(), headers={**ALICE, **OPT_IN, **session}
            ) as reply:
                events = Events(reply)
                asked = await events.until("hermes.approval.request")
                newer = await http.post(
                    "/chat/completions", json=chat(stream=False), headers={**ALICE, **session}
                )
                assert newer.status_code == 200
                try:
                    resolved = await events.until("hermes.approval.resolved")
                except EOFError:
                    raise AssertionError(events.seen) from None
                assert (resolved["id"], resolved["outcome"]) == (asked["id"], "cancelled")
                await events.rest()
            assert events.seen[-1][1]["error"]["code"] == "interrupted"
            assert not marker.exists()


async def test_an_expired_question_and_a_shutdown_while_waiting(tmp_path: Path) -> None:
    late, stopped = tmp_path / "late", tmp_path / "stopped"
    script = [
        *tool_turn(late, "Not approved in time."),
        ToolCallReply(calls=[("terminal", {"command": flagged(stopped)})]),
    ]
    # Longer than the shutdown's grace (shortened to 0.5 s), after which
    # turns are cancelled.
    extra = "approvals:\n  per_platform: {api_server: 1.5}\n"
    async with serving(script, tmp_path, extra=extra, patches=SHORT_SHUTDOWN) as (served, model):
        async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as http:
            async with http.stream(
                "POST", "/chat/completions", json=chat(), headers={**ALICE, **OPT_IN}
            ) as reply:
                events = Events(reply)
                asked = await events.until("hermes.approval.request")
                assert asked["timeout"] == 1.5
                resolved = await events.until("hermes.approval.resolved")
                assert resolved["outcome"] == "expired"
                await events.rest()
            assert events.text == "Not approved in time."
            assert "not approved in time" in tool_results(model, 2)[0]
            after = await http.post(
                f"/approvals/{asked['id']}", json={"approve": True}, headers=ALICE
            )
            assert after.status_code == 400
            message = after.json()["error"]["message"]
            assert asked["id"] in message and "expired" in message
            assert not late.exists()

            # The server shuts down while a turn waits: the stream hears
            # the question was cancelled before it ends.
            async with http.stream(
                "POST", "/chat/completions", json=chat(), headers={**ALICE, **OPT_IN}
            ) as reply:
                events = Events(reply)
                asked = await events.until("hermes.approval.request")
                served.process.terminate()
                resolved = await events.until("hermes.approval.resolved")
                assert (resolved["id"], resolved["outcome"]) == (asked["id"], "cancelled")
                await events.rest()
            assert not stopped.exists()


async def test_the_answer_crosses_workers(tmp_path: Path) -> None:
    ran, denied = tmp_path / "ran", tmp_path / "denied"
    script = [*tool_turn(ran, "Tidied."), *tool_turn(denied, "Left.")]
    async with serving(script, tmp_path, workers=2) as (served, model):
        for marker, approve, outcome in ((ran, True, "approved"), (denied, False, "denied")):
            async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as http:
                async with http.stream(
                    "POST", "/chat/completions", json=chat(), headers={**ALICE, **OPT_IN}
                ) as reply:
                    worker = reply.headers["X-Hermes-Worker"]
                    events = Events(reply)
                    asked = await events.until("hermes.approval.request")
                    async with client_on(
                        served.base_url, "1" if worker == "0" else "0", ALICE
                    ) as there:
                        answered = await there.post(
                            f"/approvals/{asked['id']}", json={"approve": approve}
                        )
                        assert answered.headers["X-Hermes-Worker"] != worker
                        assert answered.status_code == 200, answered.text
                        assert answered.json()["outcome"] == outcome
                        assert answered.json()["by"] == "alice"
                        # A second answer, a key not its own: refused there too.
                        again = await there.post(
                            f"/approvals/{asked['id']}", json={"approve": approve}
                        )
                        assert again.status_code == 400
                        assert asked["id"] in again.json()["error"]["message"]
                        bob = await there.post(
                            f"/approvals/{asked['id']}", json={"approve": True}, headers=BOB
                        )
                        assert bob.status_code == 404
                        unknown = await there.post("/approvals/mcpr_nope", json={"approve": True})
                        assert unknown.status_code == 404
                    resolved = await events.until("hermes.approval.resolved")
                    assert resolved["outcome"] == outcome
                    await events.rest()
            assert marker.exists() is approve
    assert "was not run" in tool_results(model, 4)[0]


def same_answer(reply: httpx.Response, approval_id: str) -> tuple[int, Any]:
    """A reply's status and whole JSON body, its approval id written as
    ``<id>``: what tells two answers apart apart from the id asked about."""
    return reply.status_code, json.loads(reply.text.replace(approval_id, "<id>"))


async def never_issued(http: httpx.AsyncClient, headers: dict[str, str]) -> tuple[int, Any]:
    made_up = "mcpr_" + "0" * 48
    reply = await http.post(f"/approvals/{made_up}", json={"approve": True}, headers=headers)
    assert reply.status_code == 404, reply.text
    return same_answer(reply, made_up)


async def test_another_key_learns_nothing_of_an_approval_not_its_own(tmp_path: Path) -> None:
    """Bob may not answer Alice's approval: whether it waits, was answered
    or expired, his answer gets the very 404 an id never issued gets; only
    Alice hears how it ended."""
    answered, expired = tmp_path / "answered", tmp_path / "expired"
    script = [*tool_turn(answered, "Tidied."), *tool_turn(expired, "Too late.")]
    extra = "approvals:\n  per_platform: {api_server: 4}\n"
    async with serving(script, tmp_path, extra=extra) as (served, _):
        async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as http:
            nothing = await never_issued(http, BOB)
            assert nothing[1]["error"]["code"] == "approval_not_found"

            async def bob_on(approval_id: str) -> None:
                reply = await http.post(
                    f"/approvals/{approval_id}",
                    json={"approve": True, "reason": "me"},
                    headers=BOB,
                )
                assert same_answer(reply, approval_id) == nothing

            async with http.stream(
                "POST", "/chat/completions", json=chat(), headers={**ALICE, **OPT_IN}
            ) as reply:
                events = Events(reply)
                asked = await events.until("hermes.approval.request")
                await bob_on(asked["id"])  # pending
                yes = await http.post(
                    f"/approvals/{asked['id']}", json={"approve": True}, headers=ALICE
                )
                assert yes.status_code == 200, yes.text
                await events.rest()
            await bob_on(asked["id"])  # approved by alice
            alice = await http.post(
                f"/approvals/{asked['id']}", json={"approve": True}, headers=ALICE
            )
            assert alice.status_code == 400
            assert "approved by alice" in alice.json()["error"]["message"]

            async with http.stream(
                "POST", "/chat/completions", json=chat(), headers={**ALICE, **OPT_IN}
            ) as reply:
                events = Events(reply)
                asked = await events.until("hermes.approval.request")
                resolved = await events.until("hermes.approval.resolved")
                assert resolved["outcome"] == "expired"
                await events.rest()
            await bob_on(asked["id"])  # expired
            alice = await http.post(
                f"/approvals/{asked['id']}", json={"approve": True}, headers=ALICE
            )
            assert alice.status_code == 400
            assert "expired" in alice.json()["error"]["message"]
            assert answered.exists() and not expired.exists()


def signals_written(data_dir: Path) -> int:
    """How many signals the store has ever had (SQLite's AUTOINCREMENT
    counter: a signal taken and deleted since still counts)."""
    conn = sqlite3.connect(data_dir / DB_FILENAME)
    try:
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'signals'").fetchone()
    finally:
        conn.close()
    return int(row[0]) if row else 0


async def test_an_unknown_id_is_answered_without_asking_the_other_workers(
    tmp_path: Path,
) -> None:
    """Under ``--workers 2`` an id the store never heard of is a 404 at
    once: no signal to every worker, no wait for their replies. An id the
    store knows still reaches the worker holding it; another key there gets
    the same 404 as for an id never issued."""
    marker = tmp_path / "ran"
    async with serving(tool_turn(marker), tmp_path, workers=2) as (served, _):
        data = tmp_path / "data"
        for worker in ("0", "1"):
            async with client_on(served.base_url, worker, ALICE) as there:
                before = signals_written(data)
                unknown = await there.post("/approvals/mcpr_nope", json={"approve": True})
                assert unknown.headers["X-Hermes-Worker"] == worker
                assert unknown.status_code == 404, unknown.text
                assert unknown.json()["error"]["code"] == "approval_not_found"
                assert signals_written(data) == before
        async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as http:
            async with http.stream(
                "POST", "/chat/completions", json=chat(), headers={**ALICE, **OPT_IN}
            ) as reply:
                worker = reply.headers["X-Hermes-Worker"]
                events = Events(reply)
                asked = await events.until("hermes.approval.request")
                other = "1" if worker == "0" else "0"
                async with client_on(served.base_url, other, BOB) as there:
                    nothing = await never_issued(there, BOB)
                    bob = await there.post(f"/approvals/{asked['id']}", json={"approve": True})
                    assert same_answer(bob, asked["id"]) == nothing
                async with client_on(served.base_url, other, ALICE) as there:
                    yes = await there.post(f"/approvals/{asked['id']}", json={"approve": True})
                    assert yes.status_code == 200, yes.text
                    assert (yes.json()["outcome"], yes.json()["by"]) == ("approved", "alice")
                await events.rest()
            assert marker.exists()
