"""Issue 35: a gateway chat's turn stores only the messages it added; a
turn that compacted the conversation stores it whole, as the new base, and
a gateway started again on the store continues from it."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from support import make_config
from test_gateway_runtime import STREAMING, ScriptedAdapter

from hermes_trio.agent import open_agent
from hermes_trio.config import StoreConfig
from hermes_trio.gateway import open_gateway
from hermes_trio.server.run import open_shared_store
from hermes_trio.store.shared import SQLStore
from hermes_trio.testing import ModelDouble, TextReply

KEY = "chat:memory:c:"


def _replace(messages: list[Any]) -> None:
    messages[:] = [{"role": "user", "content": "summary so far"}, *messages[-2:]]


def _in_place(messages: list[Any]) -> None:
    # The same list and dicts, edited: only the turn's flag tells.
    for message in messages[:-2]:
        message["content"] = "(compacted)"


async def _chat(
    config: Any,
    model: ModelDouble,
    questions: list[str],
    compact_on: set[int] = frozenset(),
    compact: Callable[[list[Any]], None] = _replace,
) -> None:
    """One gateway's life on the store: ``questions`` in the chat, one turn
    each; the turns numbered in ``compact_on`` compact, as the compaction
    core will."""
    adapter = ScriptedAdapter()
    async with open_shared_store(config) as store, open_agent(config, transport=model) as agent:
        real = agent.run_turn
        done = 0

        async def run_turn(messages: list[Any], send: Any, *args: Any, **kwargs: Any) -> Any:
            result = await real(messages, send, *args, **kwargs)
            if done in compact_on:
                compact(messages)
                result.compacted = True
            return result

        agent.run_turn = run_turn  # type: ignore[method-assign]
        async with open_gateway(
            config, adapters=[adapter], agent=agent, allowed_users={"memory": ["u1"]}, store=store
        ) as gateway:
            for question in questions:
                await adapter.push("c", "u1", question)
                with trio.fail_after(10):
                    await gateway.wait_until(partial(_turns_over, gateway, done + 1))
                done += 1


def _turns_over(gateway: Any, count: int) -> bool:
    return bool(gateway.turns_done("memory", "c") >= count)


async def _stored(config: Any) -> list[Any]:
    async with open_shared_store(config) as store:
        stored = await store.store.conversation(KEY)
    assert stored is not None
    return stored


@pytest.mark.parametrize("compact", [_replace, _in_place])
async def test_a_compacted_chat_continues_from_its_base_after_a_restart(
    tmp_path: Path, compact: Callable[[list[Any]], None]
) -> None:
    model = ModelDouble([TextReply(f"answer {i}") for i in range(5)])
    config = make_config(
        model.base_url, streaming=STREAMING, store=StoreConfig(data_dir=str(tmp_path / "data"))
    )
    await _chat(config, model, ["q0", "q1", "q2"], compact_on={2}, compact=compact)
    base: list[Any] = [
        {"role": "user", "content": "q0"},
        {"role": "assistant", "content": "answer 0"},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "answer 1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "answer 2"},
    ]
    compact(base)
    assert await _stored(config) == base
    # Started again: the chat goes on from the compacted conversation.
    await _chat(config, model, ["q3", "q4"])
    sent = [m for m in model.model_requests[-1].json["messages"] if m["role"] != "system"]
    assert sent == [
        *base,
        {"role": "user", "content": "q3"},
        {"role": "assistant", "content": "answer 3"},
        {"role": "user", "content": "q4"},
    ]
    assert await _stored(config) == [*sent, {"role": "assistant", "content": "answer 4"}]


async def test_a_chat_turn_releases_only_what_it_added(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ModelDouble([TextReply(f"answer {i}") for i in range(3)])
    config = make_config(
        model.base_url, streaming=STREAMING, store=StoreConfig(data_dir=str(tmp_path / "data"))
    )
    released: list[int] = []
    release = SQLStore.release_conversation

    async def counted(
        self: SQLStore, key: str, turn: str, messages: Any, *, kept: int = 0, dropped: int = 0
    ) -> bool:
        released.append(len(messages) - kept)
        return await release(self, key, turn, messages, kept=kept, dropped=dropped)

    monkeypatch.setattr(SQLStore, "release_conversation", counted)
    await _chat(config, model, ["q0", "q1", "q2"])
    # Each turn wrote its question and its answer, however long the chat.
    assert released == [2, 2, 2]
