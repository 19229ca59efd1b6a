"""X-Session-ID sessions stay bounded: each history in bytes (oldest whole
turns go first) and their number (least recently used goes first)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import trio
from hypothesis import given
from hypothesis import strategies as st
from support import api_stack

from hermes_trio.server.conversations.sessions import message_size, turns_to_drop
from hermes_trio.testing import TextReply, ToolCallReply

# -- the trimming decision (pure) -------------------------------------------


def _turn(draw: Any, index: int) -> list[dict[str, Any]]:
    text = "u" * draw(st.integers(0, 300))
    turn: list[dict[str, Any]] = [{"role": "user", "content": text}]
    for step in range(draw(st.integers(0, 2))):
        call_id = f"c{index}_{step}"
        turn.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    }
                ],
            }
        )
        turn.append(
            {"role": "tool", "tool_call_id": call_id, "content": "r" * draw(st.integers(0, 300))}
        )
    turn.append({"role": "assistant", "content": "a" * draw(st.integers(0, 300))})
    return turn


@st.composite
def histories(draw: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for index in range(draw(st.integers(1, 6))):
        messages += _turn(draw, index)
    return messages


@given(histories(), st.integers(1, 3000))
def test_only_whole_oldest_turns_are_dropped(messages, max_bytes) -> None:
    drop = turns_to_drop(messages, max_bytes)
    kept = messages[drop:]
    assert kept, "the newest turn always stays"
    assert drop == 0 or kept[0]["role"] == "user"
    calls = {c["id"] for m in kept for c in m.get("tool_calls") or []}
    assert {m["tool_call_id"] for m in kept if m["role"] == "tool"} <= calls
    size = sum(message_size(m) for m in kept)
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    assert size <= max_bytes or drop == last_user
    # No more than needed: keeping the previous turn as well would not fit.
    if drop:
        previous = max(i for i in range(drop) if i == 0 or messages[i]["role"] == "user")
        assert sum(message_size(m) for m in messages[previous:]) > max_bytes


def test_a_history_within_the_limit_is_kept_whole() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert turns_to_drop(messages, 1024) == 0


def test_text_with_a_lone_surrogate_from_a_model_still_has_a_size() -> None:
    assert message_size({"role": "assistant", "content": "\ud800"}) > 0


# -- on the real server ------------------------------------------------------

URL = "/chat/completions"


def _client(api: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=api.base_url, timeout=10)


def _history(api: Any) -> list[dict[str, Any]]:
    sessions = api.state.sessions
    return [m for s in sessions._sessions.values() for m in s.messages]


async def test_a_long_session_keeps_only_its_newest_turns() -> None:
    turns = 30
    script = [TextReply(f"answer {i} " + "a" * 400) for i in range(turns)]
    api_config = {"session_max_bytes": 4096}
    async with api_stack(script, api=api_config) as (api, model), _client(api) as http:
        with trio.fail_after(30):
            for i in range(turns):
                reply = await http.post(
                    URL,
                    json={"messages": [{"role": "user", "content": f"question {i} " + "q" * 400}]},
                    headers={"X-Session-ID": "long"},
                )
                assert reply.status_code == 200, reply.text
    stored = _history(api)
    assert sum(message_size(m) for m in stored) <= 4096 + 1024
    assert stored[0]["role"] == "user" and stored[-1]["content"].startswith(f"answer {turns - 1}")
    # What the model saw was bounded the same way, and ended with the question.
    sent = model.model_requests[-1].json["messages"]
    assert len(json.dumps(sent)) < 4096 + 2048
    assert sent[-1]["content"].startswith(f"question {turns - 1}")
    assert not any(m["content"].startswith("question 0 ") for m in sent if m["role"] == "user")


async def test_a_client_tool_call_stays_with_its_result_when_history_is_trimmed() -> None:
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    script = [
        TextReply("first answer " + "a" * 1500),
        ToolCallReply([("lookup", {"q": "x"})]),
        TextReply("done"),
    ]
    headers = {"X-Session-ID": "tools"}
    async with (
        api_stack(script, api={"session_max_bytes": 2048}) as (api, model),
        _client(api) as http,
    ):
        with trio.fail_after(10):
            await http.post(
                URL,
                headers=headers,
                json={"messages": [{"role": "user", "content": "big " + "q" * 1500}]},
            )
            called = (
                await http.post(
                    URL,
                    headers=headers,
                    json={"messages": [{"role": "user", "content": "look it up"}], "tools": [tool]},
                )
            ).json()
            call = called["choices"][0]["message"]["tool_calls"][0]
            final = await http.post(
                URL,
                headers=headers,
                json={
                    "tools": [tool],
                    "messages": [
                        {"role": "user", "content": "look it up"},
                        {"role": "assistant", "content": None, "tool_calls": [call]},
                        {"role": "tool", "tool_call_id": call["id"], "content": "r" * 1500},
                    ],
                },
            )
    assert final.status_code == 200, final.text
    sent = [m for m in model.model_requests[-1].json["messages"] if m["role"] != "system"]
    # The first turn went; the call and its result stayed together.
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[0]["content"] == "look it up"
    assert sent[1]["tool_calls"][0]["id"] == sent[2]["tool_call_id"] == call["id"]


async def test_least_recently_used_sessions_go_beyond_the_limit() -> None:
    script = [TextReply(f"reply {i}") for i in range(6)]
    async with api_stack(script, api={"max_sessions": 3}) as (api, model), _client(api) as http:
        with trio.fail_after(10):
            for name in ("s1", "s2", "s3", "s4", "s1"):
                reply = await http.post(
                    URL,
                    json={"messages": [{"role": "user", "content": f"I am {name}"}]},
                    headers={"X-Session-ID": name},
                )
                assert reply.status_code == 200
            count = len(api.state.sessions)
    assert count == 3
    # s1 was the least recently used when s4 came, so it started over.
    sent = [
        m["content"] for m in model.model_requests[-1].json["messages"] if m["role"] != "system"
    ]
    assert sent == ["I am s1"]


async def test_a_session_taken_over_is_logged_without_its_id(tmp_path: Any, caplog: Any) -> None:
    """The session id is the client's secret and its words: the request log
    shows only a keyed hash of it, and no other line shows it at all."""
    import logging

    from hermes_trio.server.conversations.sessions import SessionStore
    from hermes_trio.store import SQLiteStore, owner_scope

    store = SQLiteStore(tmp_path / "s.sqlite3")
    await store.open()
    try:
        sessions = SessionStore(store, ttl=60)
        key = SessionStore.key(owner_scope("k"), "secret-session-id\nFORGED")
        await sessions.claim(key, "turn-1")
        caplog.set_level(logging.WARNING, logger="hermes_trio.server")
        # Another turn's release: this one no longer holds the session.
        await sessions.release(key, "turn-2", [{"role": "user", "content": "x"}])
    finally:
        await store.aclose()
    said = [r.getMessage() for r in caplog.records if "taken over" in r.getMessage()]
    assert len(said) == 1
    assert "secret-session-id" not in said[0] and "\n" not in said[0]


async def test_a_turn_that_cannot_start_lets_its_session_go(monkeypatch: Any) -> None:
    """The request gives back the session's claim as well as the slot when
    its turn fails to start: no process holds the conversation then (it
    used to stay this process's, so another worker's request on the session
    waited for it and ended 409 ``session_busy``)."""
    import hermes_trio.server.admission.turn_place as turn_place

    started = turn_place.start_turn
    failures = iter([RuntimeError("the server's nursery is closing")])

    def start_once_failing(*args: Any, **kwargs: Any) -> Any:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return started(*args, **kwargs)

    monkeypatch.setattr(turn_place, "start_turn", start_once_failing)
    body = {"messages": [{"role": "user", "content": "hi"}]}
    headers = {"X-Session-ID": "unlucky"}
    async with api_stack([TextReply("hello")]) as (api, _), _client(api) as http:
        failed = await http.post(URL, json=body, headers=headers)
        assert failed.status_code == 500
        assert api.state.slots.in_use == 0
        holders = await api.state.store._read(
            lambda db: db.execute("SELECT runner, turn FROM conversations").fetchall()
        )
        assert [tuple(row) for row in holders] == [(None, None)]
        with trio.fail_after(1):
            reply = await http.post(URL, json=body, headers=headers)
        assert reply.status_code == 200, reply.text


# -- what the store holds (issue 35) -------------------------------------------


async def _stored(api: Any) -> tuple[list[dict[str, Any]], list[int]]:
    """The one stored session's history, and its rows' numbers."""
    store = api.state.store
    (key,) = [
        row[0]
        for row in await store._read(
            lambda db: db.execute("SELECT key FROM conversations").fetchall()
        )
    ]
    seqs = await store._read(
        lambda db: db.execute(
            "SELECT seq FROM conversation_messages WHERE key = ? ORDER BY seq", (key,)
        ).fetchall()
    )
    return await store.conversation(key), [int(row[0]) for row in seqs]


async def test_a_session_at_its_limit_stores_what_it_keeps_without_rewriting_it() -> None:
    """Dropping the oldest turns deletes their rows; the rest keep their
    numbers (not written again), and the store holds what the session does."""
    turns = 12
    script = [TextReply(f"answer {i} " + "a" * 400) for i in range(turns)]
    async with (
        api_stack(script, api={"session_max_bytes": 4096}) as (api, _),
        _client(api) as http,
    ):
        with trio.fail_after(30):
            for i in range(turns):
                reply = await http.post(
                    URL,
                    json={"messages": [{"role": "user", "content": f"question {i} " + "q" * 400}]},
                    headers={"X-Session-ID": "long"},
                )
                assert reply.status_code == 200, reply.text
                stored, seqs = await _stored(api)
                assert stored == _history(api)
                assert seqs == list(range(seqs[0], seqs[0] + len(stored)))
    # Turns went, and nothing was numbered again from 0.
    assert seqs[0] > 0


async def test_a_compacted_turn_is_stored_as_the_new_base(monkeypatch: Any) -> None:
    """A turn that compacted (``TurnResult.compacted``) replaced the start of
    the list it was given: that list is stored whole, and the next turn (which
    reads the store, as another process or a restart would) continues it."""
    script = [TextReply(f"answer {i}") for i in range(4)]
    headers = {"X-Session-ID": "compacting"}
    async with api_stack(script) as (api, model), _client(api) as http:
        agent = api.state.agent
        real = agent.run_turn
        compact = [False, False, True, False]

        async def run_turn(messages: list[Any], send: Any, *args: Any, **kwargs: Any) -> Any:
            result = await real(messages, send, *args, **kwargs)
            if compact.pop(0):
                messages[:] = [{"role": "user", "content": "summary of it all"}, *messages[-2:]]
                result.compacted = True
            return result

        monkeypatch.setattr(agent, "run_turn", run_turn)
        with trio.fail_after(10):
            for i in range(4):
                body = {"messages": [{"role": "user", "content": f"question {i}"}]}
                reply = await http.post(URL, json=body, headers=headers)
                assert reply.status_code == 200, reply.text
        stored, seqs = await _stored(api)
    base = [
        {"role": "user", "content": "summary of it all"},
        {"role": "user", "content": "question 2"},
        {"role": "assistant", "content": "answer 2"},
    ]
    assert stored == [
        *base,
        {"role": "user", "content": "question 3"},
        {"role": "assistant", "content": "answer 3"},
    ]
    assert seqs == list(range(5))
    sent = [m for m in model.model_requests[-1].json["messages"] if m["role"] != "system"]
    assert sent == [*base, {"role": "user", "content": "question 3"}]
