"""What a compaction adds to the turn it happens in (issue 35).

One agent (in this process) talks to the scripted model server on a
loopback socket. Each round runs two turns over the same long conversation:
one with a window that holds it (no compaction), one with a window it
passes (the turn first asks for a summary, then answers). The summary comes
back at once, so the difference is what the project adds: planning the cut,
one more HTTP request, replacing the list. A real model then spends its own
time writing the summary (about ``summary_max_tokens`` / its speed), which
this bench does not invent.

Prints the median wall time and process CPU of each kind of turn, and the
difference, for conversations of 50, 200 and 600 messages.

    python bench/compaction.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import trio

from hermes_trio.agent import open_agent
from hermes_trio.config import AgentConfig, CompactionConfig, Config, ModelConfig, StoreConfig
from hermes_trio.events import ContextCompacted, StreamEvent
from hermes_trio.testing import RecordedRequest, TextReply, open_scripted_server
from hermes_trio.wire.messages import Message

ANSWER = TextReply(tokens=[f" w{i}" for i in range(50)])


def reply(request: RecordedRequest) -> TextReply:
    system = str(request.json["messages"][0]["content"])
    return TextReply("short notes") if system.startswith("You write the memory") else ANSWER


def conversation(messages: int) -> list[Message]:
    out: list[Message] = []
    for i in range(messages // 2):
        out.append({"role": "user", "content": f"question {i} " + "q" * 200})
        out.append({"role": "assistant", "content": f"answer {i} " + "a" * 600})
    out.append({"role": "user", "content": "and now?"})
    return out


async def one_turn(agent: Any, messages: list[Message]) -> tuple[float, float, bool]:
    send, receive = trio.open_memory_channel[StreamEvent](64)
    compacted = False
    wall, cpu = time.perf_counter(), time.process_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.run_turn, messages, send)
        async with receive:
            async for event in receive:
                compacted = compacted or isinstance(event, ContextCompacted)
    return time.perf_counter() - wall, time.process_time() - cpu, compacted


async def measure(size: int, rounds: int, base_url: str) -> None:
    tokens = size * 110
    results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for window in (tokens * 4, tokens):
        config = Config(
            model=ModelConfig(base_url=base_url, name="m", context_window=window),
            agent=AgentConfig(tools=[]),
            compaction=CompactionConfig(keep_recent=2000),
            store=StoreConfig(data_dir="/tmp/hermes-bench-compaction"),
        )
        async with open_agent(config) as agent:
            for _ in range(rounds):
                wall, cpu, compacted = await one_turn(agent, conversation(size))
                results[compacted].append((wall, cpu))
    plain, compacting = results[False], results[True]
    assert plain and compacting, "each kind of turn must have run"
    p_wall = statistics.median(w for w, _ in plain) * 1000
    c_wall = statistics.median(w for w, _ in compacting) * 1000
    p_cpu = statistics.median(c for _, c in plain) * 1000
    c_cpu = statistics.median(c for _, c in compacting) * 1000
    print(
        f"{size:5d} messages: turn {p_wall:6.2f} ms wall ({p_cpu:5.2f} ms CPU); "
        f"compacting turn {c_wall:6.2f} ms ({c_cpu:5.2f} ms CPU); "
        f"added {c_wall - p_wall:6.2f} ms wall, {c_cpu - p_cpu:5.2f} ms CPU"
    )


async def main(rounds: int) -> None:
    async with open_scripted_server(default=reply, record=False) as server:
        for size in (50, 200, 600):
            await measure(size, rounds, server.base_url)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    trio.run(main, parser.parse_args().rounds)
