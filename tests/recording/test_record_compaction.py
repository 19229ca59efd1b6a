"""A turn that compacts its conversation, recorded and replayed: the
recording holds the summary request, and the replay, run under the
recorded window, compaction settings and calibration, gives the same
events (``ContextCompacted`` included) at the same times."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from hermes_trio.agent import open_agent
from hermes_trio.config import AgentConfig, CompactionConfig, Config, ModelConfig
from hermes_trio.events import ContextCompacted, StreamEvent
from hermes_trio.recording import Recorder
from hermes_trio.testing import ModelDouble, Recording, TextReply, replay
from hermes_trio.wire.messages import Message

WINDOW = 2000


def chat(exchanges: int) -> list[Message]:
    messages: list[Message] = []
    for i in range(exchanges):
        messages.append({"role": "user", "content": f"question {i} " + "q" * 90})
        messages.append({"role": "assistant", "content": f"answer {i} " + "a" * 390})
    return messages


def config() -> Config:
    return Config(
        model=ModelConfig(base_url=ModelDouble.base_url, name="m", context_window=WINDOW),
        agent=AgentConfig(tools=[], long_tool_hint=0),
        compaction=CompactionConfig(summary_max_tokens=100, keep_recent=500),
    )


def record(directory: Path, turns: list[tuple[list[Message], list[Any]]]) -> list[Path]:
    """Run each ``(history, replies)`` turn on one agent, recording them."""

    async def run() -> None:
        model = ModelDouble([reply for _, replies in turns for reply in replies])
        async with open_agent(config(), transport=model, record=Recorder(directory)) as agent:
            for history, _ in turns:
                send, receive = trio.open_memory_channel[StreamEvent](64)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(agent.run_turn, history, send)
                    async with receive:
                        async for _ in receive:
                            pass
                await trio.sleep(1)

    trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))
    return sorted(directory.glob("turn-*.json"))


def compacted(events: list[Any]) -> list[ContextCompacted]:
    return [e.event for e in events if isinstance(e.event, ContextCompacted)]


def test_a_compacting_turn_replays_to_the_same_events(tmp_path: Path) -> None:
    history = [*chat(12), {"role": "user", "content": "and now?"}]
    replies = [TextReply("the summary", delay=0.5), TextReply("Hi there", delay=0.1)]
    (path,) = record(tmp_path, [(history, replies)])
    recording = Recording.load(path)
    bodies = [e.get("body") for e in recording.exchanges if e.get("method") == "POST"]
    assert len(bodies) == 2 and "question 0" in str(bodies[0])  # the summary request
    result = replay(recording)
    assert result.matches, result.difference
    (event,) = compacted(result.events)
    assert event.how == "summary" and event.summary == "the summary"
    assert event.window == WINDOW
    assert result.text() == "Hi there"


def test_a_turn_compacted_under_a_learned_calibration_replays_exactly(tmp_path: Path) -> None:
    # The first turn's usage teaches the agent that the server counts twice
    # the estimate; the second turn compacts because of it. A fresh replay
    # would not know that unless the recording says so.
    first = chat(3)
    usage = {"prompt_tokens": 1600, "completion_tokens": 2, "total_tokens": 1602}
    second = [*chat(4), {"role": "user", "content": "more?"}]
    turns = [
        (first, [TextReply("one", usage=usage)]),
        (second, [TextReply("the summary"), TextReply("two")]),
    ]
    paths = record(tmp_path, turns)
    assert len(paths) == 2
    result = replay(Recording.load(paths[1]))
    assert result.matches, result.difference
    assert len(compacted(result.events)) == 1
