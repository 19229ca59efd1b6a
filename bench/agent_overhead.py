"""CPU the agent adds per token (issue 2 target: at most 25 µs per token).

Streams one long reply (no delay between tokens) from the scripted model
server, running in its own process so only the client's CPU is measured:
once read with bare httpx, once through a full agent turn (SSE decoding,
chunk accumulation, think filter, events through the memory channel, and a
consumer task draining them). Prints CPU µs per token for both and the
difference.

    python bench/agent_overhead.py [--tokens 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _model_server import model_server_process

from hermes_trio.agent import open_agent
from hermes_trio.config import AgentConfig, Config, ModelConfig
from hermes_trio.events import MessageChunk
from hermes_trio.tools import ToolRegistry

BODY = {
    "model": "m",
    "messages": [{"role": "user", "content": "go"}],
    "stream": True,
    "stream_options": {"include_usage": True},
}


async def bare(base_url: str) -> tuple[float, int]:
    async with httpx.AsyncClient(timeout=None) as client:
        start = time.process_time()
        received = 0
        async with client.stream("POST", f"{base_url}/chat/completions", json=BODY) as r:
            async for piece in r.aiter_raw():
                received += len(piece)
        return time.process_time() - start, received


async def through_agent(base_url: str) -> tuple[float, int]:
    config = Config(
        model=ModelConfig(base_url=base_url, name="m"), agent=AgentConfig(system_prompt="")
    )
    async with open_agent(config, tools=ToolRegistry()) as agent:
        chunks = 0
        start = time.process_time()
        # The embedding API: the turn runs beside this block, whose loop is
        # the consumer task draining the channel.
        async with agent.turn("go") as events:
            async for event in events:
                if isinstance(event, MessageChunk):
                    chunks += 1
        return time.process_time() - start, chunks


async def main(tokens: int, rounds: int) -> None:
    async with model_server_process(tokens) as base_url:
        await bare(base_url)  # warm up both paths (imports, connections)
        await through_agent(base_url)
        bare_cpu = min([(await bare(base_url))[0] for _ in range(rounds)])
        results = [await through_agent(base_url) for _ in range(rounds)]
        agent_cpu = min(cpu for cpu, _ in results)
        chunks = results[0][1]
    assert chunks == tokens, f"expected {tokens} chunks, got {chunks}"
    per_bare = bare_cpu / tokens * 1e6
    per_agent = agent_cpu / tokens * 1e6
    print(f"tokens per reply:          {tokens}")
    print(f"bare httpx read:           {per_bare:6.2f} µs CPU per token")
    print(f"through an agent turn:     {per_agent:6.2f} µs CPU per token")
    print(
        f"added by the agent:        {per_agent - per_bare:6.2f} µs CPU per token "
        f"(target ≤ 25), ratio to direct {per_agent / per_bare:.2f}x"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    trio.run(main, args.tokens, args.rounds)
