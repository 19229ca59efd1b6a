"""A paced token costs the model reader one scheduler pass: the socket read
that brought it already checkpointed, so the reader adds no checkpoint of
its own (issue 26); a burst read from a buffer still yields every time
slice."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import trio
import trio.testing

from hermes_trio.llm.client import _Delivery, _EventReader
from hermes_trio.llm.pool import SOCKET_READS
from hermes_trio.llm.watchdog import StreamWatchdog
from hermes_trio.wire.chat_chunks import ChunkDelta


def _frame(content: str) -> bytes:
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


class _Steps(trio.abc.Instrument):
    def __init__(self) -> None:
        self.task: trio.lowlevel.Task | None = None
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1


async def _read(chunks: AsyncIterator[bytes], steps: _Steps) -> list[str]:
    got: list[str] = []

    async def on_delta(delta: ChunkDelta) -> None:
        got.append(delta.content or "")

    with trio.CancelScope() as scope:
        watchdog = StreamWatchdog(scope, first_token=60, idle=60, total=600)
        reader = _EventReader(
            False, _Delivery(on_delta), watchdog, wants_usage=False, max_bytes=1 << 20
        )
        steps.task = trio.lowlevel.current_task()
        steps.steps = 0
        await reader.read(chunks)
        steps.task = None
    return got


async def test_a_paced_token_costs_the_reader_one_pass(
    autojump_clock: trio.testing.MockClock,
) -> None:
    steps = _Steps()
    trio.lowlevel.add_instrument(steps)

    async def socket_reads() -> AsyncIterator[bytes]:
        # As the pool's reads: each one counted, each one a checkpoint.
        for i in range(20):
            SOCKET_READS.count += 1
            await trio.sleep(0.05)
            yield _frame(f" w{i}")

    assert await _read(socket_reads(), steps) == [f" w{i}" for i in range(20)]
    # One pass per read, and one more for the first token (the reader
    # hands it on at once).
    assert steps.steps == 20 + 1


async def test_a_buffered_burst_still_yields_each_time_slice(
    autojump_clock: trio.testing.MockClock,
) -> None:
    steps = _Steps()
    trio.lowlevel.add_instrument(steps)

    async def buffered() -> AsyncIterator[bytes]:
        # Pieces already buffered: no socket read, no checkpoint, but time
        # passes while each one is worked on.
        for i in range(10):
            autojump_clock.jump(0.001)
            yield _frame(f" w{i}")

    assert len(await _read(buffered(), steps)) == 10
    # Every piece took longer than the slice: each is followed by a checkpoint.
    assert steps.steps == 10
