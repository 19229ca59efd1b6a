"""The stdio transport a local MCP server is run with, which never holds
more than ``max_result_bytes`` (and a margin) of one line it writes.

The SDK's ``stdio_client`` reads a line of any length whole: a tool that
returns 50 MB would be held in memory, and parsed, before anyone could
look at its size. :func:`capped_stdio_client` is the SDK's transport with
another stdout reader: lines go through :class:`line_cap.LineCap`, and one
past the cap is read on to its newline and thrown away, and the session is
handed an error answer to the request it answers in its place, so the call
ends at once with our message (``naming.too_large``). An over-long line
that answers nothing we can name is dropped with a warning.

This follows ``mcp.client.stdio.stdio_client`` of mcp 2.3.0 step for step
but for ``_read_stdout``, and calls the SDK's own helpers for the rest
(spawning, shutdown); :data:`SDK_INTERNALS` names the private ones, and
tests/mcp/test_mcp_stdio_reliance.py checks them and that the SDK's
function is still the one this follows.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TextIO

import anyio
import anyio.lowlevel
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client import stdio as sdk
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.os.win32.utilities import ServerProcess
from mcp.shared.message import SessionMessage

from .line_cap import LineCap, Oversized
from .naming import too_large

__all__ = ["MARGIN", "SDK_INTERNALS", "capped_stdio_client"]

# The same logger as connection.py's: what it logs is escaped.
log = logging.getLogger("hermes_trio.mcp")

MARGIN = 4096
"""Bytes a line may have past ``max_result_bytes``: the JSON-RPC envelope
around a result that is just under the cap."""

SDK_INTERNALS = (
    "_get_executable_command",
    "_create_platform_compatible_process",
    "_parse_line",
    "_drain_stdout",
    "_stop_server_process",
    "_aclose_all",
    "_WRITER_FLUSH_TIMEOUT",
)
"""The private names of ``mcp.client.stdio`` this module calls."""

Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]


@asynccontextmanager
async def capped_stdio_client(
    server: StdioServerParameters, max_result_bytes: int, errlog: TextIO = sys.stderr
) -> AsyncIterator[Streams]:
    """``mcp.client.stdio.stdio_client``, but no line of the server's past
    ``max_result_bytes`` + :data:`MARGIN` is held (see the module's text)."""
    command = await sdk._get_executable_command(server.command)
    process = await sdk._create_platform_compatible_process(
        command=command,
        args=server.args,
        env=get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )

    # The spawn succeeded; no awaits until the task group is entered, or a
    # cancellation delivered in the gap would leak the live process.
    read_stream_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](
        0
    )
    write_stream, write_stream_reader = anyio.create_memory_object_stream[SessionMessage](0)

    shutting_down = False
    writer_done = anyio.Event()

    async def stdin_writer() -> None:
        assert process.stdin, "Opened process is missing stdin"
        try:
            async with write_stream_reader:
                async for session_message in write_stream_reader:
                    json = session_message.message.model_dump_json(
                        by_alias=True, exclude_unset=True
                    )
                    data = (json + "\n").encode(
                        encoding=server.encoding, errors=server.encoding_error_handler
                    )
                    await process.stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server may still be alive: close the read stream so the session
            # sees the connection end instead of a request hanging forever.
            await read_stream_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(sdk._WRITER_FLUSH_TIMEOUT) as flush_scope:
            await writer_done.wait()
        if flush_scope.cancelled_caught:
            await anyio.lowlevel.cancel_shielded_checkpoint()
        await sdk._stop_server_process(process)
        await sdk._aclose_all(read_stream, write_stream, read_stream_writer, write_stream_reader)
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(
            _read_stdout,
            process,
            server,
            max_result_bytes,
            read_stream_writer,
            lambda: shutting_down,
        )
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            shutting_down = True
            # Shutdown must finish even under caller cancellation, or the
            # server process would leak; every wait inside is bounded.
            with anyio.CancelScope(shield=True):
                await shutdown()
            tg.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()


async def _read_stdout(
    process: ServerProcess,
    server: StdioServerParameters,
    max_result_bytes: int,
    sink: MemoryObjectSendStream[SessionMessage | Exception],
    shutting_down: Callable[[], bool],
) -> None:
    """The SDK's stdout reader, but its lines come from a ``LineCap``."""
    assert process.stdout, "Opened process is missing stdout"
    lines = LineCap(max_result_bytes + MARGIN)
    try:
        async with sink:
            try:
                # One chunk's lines at a time; no read-ahead while a delivery is blocked.
                async for chunk in process.stdout:
                    for line in lines.feed(chunk):
                        message = _message(line, server, max_result_bytes)
                        if message is None:
                            continue
                        try:
                            await sink.send(message)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            return  # the session is gone; only the drain below remains
            finally:
                await sdk._drain_stdout(process)
    except anyio.ClosedResourceError:
        pass  # our own shutdown closed the stdout stream under the read
    except (anyio.BrokenResourceError, ConnectionError):
        if not shutting_down():
            log.exception("Reading from the MCP server's stdout failed mid-session")


def _message(
    line: bytes | Oversized, server: StdioServerParameters, max_result_bytes: int
) -> SessionMessage | Exception | None:
    """What the session is handed for ``line``; None: nothing."""
    if isinstance(line, bytes):
        # Split on the newline byte, then decoded: the same lines as the
        # SDK's decode-then-split in UTF-8, which MCP's stdio transport is.
        return sdk._parse_line(line.decode(server.encoding, server.encoding_error_handler))
    if line.answer_to is None:
        log.warning(
            "an MCP server wrote a message of %d bytes, over the limit of %d bytes "
            "(max_result_bytes), that answers no request; it was dropped",
            line.size,
            max_result_bytes,
        )
        return None
    error = mcp_types.ErrorData(
        code=mcp_types.INTERNAL_ERROR, message=too_large(None, max_result_bytes)
    )
    return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=line.answer_to, error=error))
