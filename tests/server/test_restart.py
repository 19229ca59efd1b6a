"""Nothing forgotten across restarts: the real ``hermes-trio serve`` stopped
(SIGTERM) or killed (SIGKILL) and started again on the same store."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import httpx
import trio
from support import clean_env, start_serve

from hermes_trio.testing import TextReply, open_scripted_server
from hermes_trio.wire.sse import SSEDecoder, SSEEvent
from tests.server.responses.test_responses_crash import _hold_write_lock
from tests.server.responses.test_responses_helpers import parse_sse, payloads

KEY = "restart-key"
HEADERS = {"Authorization": f"Bearer {KEY}"}
SLOW = [f"w{i} " for i in range(400)]


def _env(model_url: str, data_dir: Path) -> dict[str, str]:
    return clean_env(
        HERMES_MODEL_BASE_URL=model_url, HERMES_DATA_DIR=str(data_dir), API_SERVER_KEY=KEY
    )


def _user_texts(request: Any) -> list[str]:
    return [m["content"] for m in request.json["messages"] if m["role"] != "system"]


async def _ask(http: httpx.AsyncClient, text: str, session: str = "s1") -> httpx.Response:
    reply = await http.post(
        "/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": text}]},
        headers={"X-Session-ID": session},
    )
    assert reply.status_code == 200, reply.text
    return reply


async def test_a_session_continues_after_a_restart(tmp_path: Path) -> None:
    script = [TextReply("first answer"), TextReply("second answer")]
    async with open_scripted_server(script) as model:
        env = _env(model.base_url, tmp_path / "data")
        for question in ("first question", "second question"):
            async with trio.open_nursery() as nursery:
                served = await start_serve(nursery, env, tmp_path)
                async with httpx.AsyncClient(base_url=served.base_url, headers=HEADERS) as http:
                    with trio.fail_after(15):
                        await _ask(http, question)
                served.process.send_signal(signal.SIGTERM)
                with trio.fail_after(10):
                    assert await served.process.wait() == 0
    assert _user_texts(model.model_requests[1]) == [
        "first question",
        "first answer",
        "second question",
    ]


async def test_sigkill_mid_turn_leaves_whole_turns_and_an_incomplete_response(
    tmp_path: Path,
) -> None:
    """Killed while a session turn and a stored response stream: after a
    restart the response reads ``incomplete`` (from any stream position),
    the session's history ends at its last finished turn, nothing twice."""
    script = [
        TextReply("finished answer"),
        TextReply(tokens=SLOW, delay=0.02),
        TextReply(tokens=SLOW, delay=0.02),
        TextReply("after the restart"),
    ]
    async with open_scripted_server(script) as model:
        env = _env(model.base_url, tmp_path / "data")
        seen: list[dict[str, Any]] = []
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path)
            async with httpx.AsyncClient(base_url=served.base_url, headers=HEADERS) as http:
                with trio.fail_after(15):
                    await _ask(http, "kept question")
                    streaming = trio.Event()

                    async def session_turn() -> None:
                        try:
                            async with http.stream(
                                "POST",
                                "/chat/completions",
                                json={
                                    "model": "m",
                                    "stream": True,
                                    "messages": [{"role": "user", "content": "lost question"}],
                                },
                                headers={"X-Session-ID": "s1"},
                            ) as reply:
                                async for _ in reply.aiter_bytes():
                                    pass
                        except httpx.HTTPError:
                            pass

                    async def stored_response() -> None:
                        decoder = SSEDecoder()
                        try:
                            async with http.stream(
                                "POST",
                                "/responses",
                                json={"model": "m", "input": "go", "stream": True},
                            ) as reply:
                                async for piece in reply.aiter_bytes():
                                    seen.extend(
                                        json.loads(e.data)
                                        for e in decoder.feed(piece)
                                        if isinstance(e, SSEEvent)
                                    )
                                    deltas = [e for e in seen if e["type"].endswith("text.delta")]
                                    if len(deltas) >= 20:
                                        streaming.set()
                        except httpx.HTTPError:
                            pass

                    async with trio.open_nursery() as clients:
                        clients.start_soon(session_turn)
                        clients.start_soon(stored_response)
                        await streaming.wait()
                        await trio.sleep(0.2)
                        served.process.send_signal(signal.SIGKILL)
            await served.process.wait()
            nursery.cancel_scope.cancel()
        rid = seen[0]["response"]["id"]
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path)
            async with httpx.AsyncClient(base_url=served.base_url, headers=HEADERS) as http:
                with trio.fail_after(15):
                    stored = (await http.get(f"/responses/{rid}")).json()
                    replay = payloads(
                        parse_sse((await http.get(f"/responses/{rid}?stream=true")).content)
                    )
                    last_seen = seen[-1]["sequence_number"]
                    resumed = payloads(
                        parse_sse(
                            (
                                await http.get(
                                    f"/responses/{rid}?stream=true&starting_after={last_seen}"
                                )
                            ).content
                        )
                    )
                    await _ask(http, "new question")
            nursery.cancel_scope.cancel()
    assert stored["status"] == "incomplete"
    # Durable, then visible: what the client read before the kill is the
    # start of what was stored (which may hold a few deltas it had not read).
    streamed = "".join(e["delta"] for e in seen if e["type"] == "response.output_text.delta")
    assert streamed and stored["output_text"].startswith(streamed)
    assert replay[-1]["type"] == "response.incomplete"
    # Resumed right after the last event the client saw (the store may hold
    # a few more it had not read yet), ending with the recovery's ending.
    assert resumed == replay[len(seen) :]
    assert resumed[0]["sequence_number"] == last_seen + 1
    # The session: the finished turn once, the killed one not at all.
    assert _user_texts(model.model_requests[-1]) == [
        "kept question",
        "finished answer",
        "new question",
    ]


async def test_after_sigkill_the_client_holds_a_prefix_of_the_store_and_resumes(
    tmp_path: Path,
) -> None:
    """Durable, then visible: the store falls behind (another program holds
    its write lock) while a stored response streams; SIGKILL, restart. What
    the client read is exactly the start of the stored stream, and resuming
    from its last sequence number continues without a gap or a repeat."""
    data_dir = tmp_path / "data"
    async with open_scripted_server([TextReply(tokens=SLOW, delay=0.02)]) as model:
        env = _env(model.base_url, data_dir)
        seen: list[dict[str, Any]] = []
        blocker: Any = None
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path)
            body = {"model": "m", "input": "go", "stream": True}
            async with httpx.AsyncClient(base_url=served.base_url, headers=HEADERS) as http:
                with trio.fail_after(20):
                    decoder = SSEDecoder()
                    async with http.stream("POST", "/responses", json=body) as reply:
                        pieces = reply.aiter_bytes()
                        # Read on while the store is stuck: until 15 more
                        # deltas came, or for a second if none may come.
                        with trio.move_on_after(1.0) as stuck:
                            async for piece in pieces:
                                seen += [
                                    json.loads(e.data)
                                    for e in decoder.feed(piece)
                                    if isinstance(e, SSEEvent)
                                ]
                                deltas = sum(e["type"].endswith("text.delta") for e in seen)
                                if deltas >= 5 and blocker is None:
                                    blocker = await trio.to_thread.run_sync(
                                        _hold_write_lock, data_dir / "responses.sqlite3"
                                    )
                                    stuck.deadline = trio.current_time() + 1.0
                                if deltas >= 20:
                                    break
                        served.process.send_signal(signal.SIGKILL)
                    assert await served.process.wait() == -signal.SIGKILL
            nursery.cancel_scope.cancel()
        assert blocker is not None
        await trio.to_thread.run_sync(blocker.close)
        rid = seen[0]["response"]["id"]
        last_seen = seen[-1]["sequence_number"]
        async with trio.open_nursery() as nursery:
            served = await start_serve(nursery, env, tmp_path)
            async with httpx.AsyncClient(base_url=served.base_url, headers=HEADERS) as http:
                with trio.fail_after(15):
                    replay = payloads(
                        parse_sse((await http.get(f"/responses/{rid}?stream=true")).content)
                    )
                    resumed = payloads(
                        parse_sse(
                            (
                                await http.get(
                                    f"/responses/{rid}?stream=true&starting_after={last_seen}"
                                )
                            ).content
                        )
                    )
                    stored = (await http.get(f"/responses/{rid}")).json()
            nursery.cancel_scope.cancel()
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    assert replay[: len(seen)] == seen
    assert [e["sequence_number"] for e in replay] == list(range(len(replay)))
    assert resumed == replay[len(seen) :]
    assert resumed[0]["sequence_number"] == last_seen + 1
    assert resumed[-1]["type"] == "response.incomplete"
    streamed = "".join(e["delta"] for e in seen if e["type"] == "response.output_text.delta")
    assert stored["status"] == "incomplete"
    assert stored["output_text"].startswith(streamed)
