"""One MCP server's connection, kept up for the life of the process.

A :class:`McpServer` is a task in the process's nursery: it starts the
server (a child process over stdio, or a streamable-HTTP session), lists
its tools, follows ``notifications/tools/list_changed``, logs the child's
stderr under its label, and starts it again with capped backoff when it
goes away. Calls come from turns (:meth:`McpServer.call`) and run in the
calling turn's task, so cancelling the turn abandons the request (the SDK
then sends ``notifications/cancelled``) while the server keeps running.
The protocol itself is the official ``mcp`` SDK's.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import mcp.types as mcp_types
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT

from ..config import McpServerConfig
from ..escapes import escape_log_records
from ..retry import Backoff
from .capped_http import capped_client
from .naming import TOO_LARGE, model_name, result_text, too_large, wanted

__all__ = ["McpServer", "Progress", "ServerTool", "start_servers"]

log = logging.getLogger("hermes_trio.mcp")
# A server's words reach the log in our lines (its stderr, its errors) and
# in the SDK's (a tool name, a header it sent): escaped in both.
escape_log_records(log.name, "mcp")

# Restarts wait 1 s, 2 s, 4 s … up to a minute; a connection that stayed up
# this long counts as healthy and starts the waits over.
RESTART_INITIAL = 1.0
RESTART_MAX = 60.0
STABLE_UPTIME = 60.0
# A stderr "line" longer than this is logged in pieces: a child that never
# writes a newline does not grow our buffer without end.
STDERR_LINE_MAX = 8192
# How often a connected server is pinged: an HTTP server that went away (or
# forgot our session) is only noticed by asking.
PING_INTERVAL = 30.0

Progress = ProgressFnT


@dataclass(frozen=True)
class ServerTool:
    """A tool a server offers, as the model sees it and as the server names it."""

    name: str
    tool: str
    description: str
    parameters: dict[str, Any]
    read_only: bool | None


def restart_delay(backoff: Backoff, uptime: float | None) -> float:
    """Seconds before the next start; ``uptime`` None: it never came up."""
    if uptime is not None and uptime >= STABLE_UPTIME:
        backoff.reset()
    return backoff.next()


class McpServer:
    """A configured server: its state, its tools, and calls to them."""

    def __init__(
        self, label: str, config: McpServerConfig, on_change: Callable[[], None] = lambda: None
    ) -> None:
        self.label = label
        self.config = config
        self.tools: dict[str, ServerTool] = {}
        self.error: str | None = None
        self.answered = False
        self._session: ClientSession | None = None
        self._on_change = on_change
        # Set once the first start has come up or failed.
        self.tried = trio.Event()
        self._relist_send, self._relist_receive = trio.open_memory_channel[None](1)

    @property
    def up(self) -> bool:
        return self._session is not None

    async def run(self) -> None:
        """Keep the server up until cancelled; ``tried`` is set after the first try."""
        backoff = Backoff(RESTART_INITIAL, RESTART_MAX)
        while True:
            began: float | None = None
            try:
                began = await self._connect_once(self.tried.set)
                self.error = "the server closed the connection"
            except Exception as exc:  # trio.Cancelled is a BaseException: shutdown
                self.error = _describe(exc)
            uptime = None if began is None else trio.current_time() - began
            self._set_down()
            delay = restart_delay(backoff, uptime)
            log.warning(
                "mcp server %r is down (%s); starting it again in %g s",
                self.label,
                self.error,
                delay,
            )
            self.tried.set()
            await trio.sleep(delay)

    async def _connect_once(self, ready: Callable[[], None]) -> float:
        """Serve one connection until it ends; returns when it came up."""
        async with trio.open_nursery() as nursery:
            with trio.CancelScope(deadline=trio.current_time() + self.config.timeout) as start:
                async with self._transport(nursery) as (read, write):
                    closed = trio.Event()
                    relay_send, relay_receive = anyio.create_memory_object_stream[Any](0)
                    nursery.start_soon(_relay, read, relay_send, closed)
                    async with ClientSession(
                        relay_receive, write, message_handler=self._on_message
                    ) as session:
                        await session.initialize()
                        await self._list(session)
                        start.deadline = math.inf
                        began = trio.current_time()
                        self._session = session
                        self.error = None
                        self.answered = True
                        log.info("mcp server %r is up: %d tool(s)", self.label, len(self.tools))
                        ready()
                        await self._serve(session, closed)
                    nursery.cancel_scope.cancel()
                    return began
            nursery.cancel_scope.cancel()
        raise TimeoutError(f"it did not answer within {self.config.timeout:g} s")

    async def _serve(self, session: ClientSession, closed: trio.Event) -> None:
        """Follow the tool list and check the server lives, until it closes."""
        async with trio.open_nursery() as nursery:

            async def relist() -> None:
                async for _ in self._relist_receive:
                    await self._list(session)

            async def ping() -> None:
                while True:
                    await trio.sleep(PING_INTERVAL)
                    with trio.fail_after(self.config.timeout):
                        await session.send_ping()

            nursery.start_soon(relist)
            nursery.start_soon(ping)
            await closed.wait()
            nursery.cancel_scope.cancel()

    def _transport(self, nursery: trio.Nursery) -> AbstractAsyncContextManager[Any]:
        config = self.config
        if config.url is not None:
            http = capped_client(dict(config.headers), config.max_result_bytes)
            return streamable_http_client(
                config.url, http_client=http, max_sse_event_size=config.max_result_bytes
            )
        return self._stdio(nursery)

    @asynccontextmanager
    async def _stdio(self, nursery: trio.Nursery) -> AsyncIterator[Any]:
        # Loaded where a stdio server runs: it imports the SDK's stdio half.
        from .capped_stdio import capped_stdio_client

        params = _stdio_params(self.config)
        read_fd, write_fd = os.pipe()
        errlog = os.fdopen(write_fd, "w")
        nursery.start_soon(_log_stderr, self.label, read_fd)
        try:
            cap = self.config.max_result_bytes
            async with capped_stdio_client(params, cap, errlog=errlog) as streams:
                # The child holds its own copy; ours would keep the pipe open.
                errlog.close()
                yield streams
        finally:
            errlog.close()

    async def _list(self, session: ClientSession) -> None:
        tools: dict[str, ServerTool] = {}
        cursor: str | None = None
        while True:
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            listing = await session.list_tools(params=params)
            for tool in listing.tools:
                if not wanted(tool.name, self.config.tools, self.config.exclude_tools):
                    continue
                name = model_name(self.label, tool.name)
                annotations = tool.annotations
                tools[name] = ServerTool(
                    name,
                    tool.name,
                    tool.description or tool.title or f"{tool.name} (MCP server {self.label})",
                    dict(tool.input_schema or {}),
                    annotations.read_only_hint if annotations is not None else None,
                )
            cursor = listing.next_cursor
            if not cursor:
                break
        self.tools = tools
        self._on_change()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            try:
                self._relist_send.send_nowait(None)
            except trio.WouldBlock:
                pass  # a listing is already due

    def _set_down(self) -> None:
        self._session = None
        self._on_change()

    async def call(
        self, tool: str, arguments: dict[str, Any], progress: Progress | None = None
    ) -> tuple[bool, str]:
        """``(ok, text)`` of a call; a server that is down answers at once."""
        session = self._session
        if session is None:
            why = f" ({self.error})" if self.error else ""
            return False, f"error: the MCP server {self.label!r} is not running{why}"
        try:
            result = await session.call_tool(
                tool,
                arguments,
                read_timeout_seconds=self.config.timeout,
                progress_callback=progress,
            )
        except Exception as exc:
            said = _describe(exc)
            # An answer cut off at the cap (capped_http) reaches us inside
            # the SDK's error text: the model gets our words alone.
            cut = said.find(TOO_LARGE)
            return False, f"error: {self.label}: {said[cut:] if cut >= 0 else said}"
        # By alias: the wire spelling (mimeType) that result_text reads.
        blocks = [block.model_dump(mode="json", by_alias=True) for block in result.content]
        text = result_text(blocks, result.structured_content)
        # The transports cap the answer as sent (JSON, with its envelope);
        # its text can still pass the cap by a little.
        size = len(text.encode())
        if size > self.config.max_result_bytes:
            return False, f"error: {self.label}: {too_large(size, self.config.max_result_bytes)}"
        return not result.is_error, text


async def start_servers(nursery: trio.Nursery, servers: Iterable[McpServer], wait: float) -> None:
    """Start ``servers`` in ``nursery``; returns once each has come up or
    failed once, or after ``wait`` seconds (a server that hangs on start
    does not hold its caller up for its whole timeout)."""
    servers = list(servers)
    for server in servers:
        nursery.start_soon(server.run)
    with trio.move_on_after(wait):
        for server in servers:
            await server.tried.wait()


def _stdio_params(config: McpServerConfig) -> StdioServerParameters:
    assert config.command is not None
    # `env -i` so the child gets exactly the listed environment and PATH
    # (the SDK would add HOME, USER and the like).
    path = os.environ.get("PATH", os.defpath)
    assigned = [f"{k}={v}" for k, v in {"PATH": path, **config.env}.items()]
    command = shutil.which(config.command, path=path) or config.command
    return StdioServerParameters(
        command=shutil.which("env") or "/usr/bin/env",
        args=["-i", *assigned, command, *config.args],
        cwd=os.path.expanduser(config.cwd) if config.cwd else None,
    )


async def _relay(source: Any, sink: Any, closed: trio.Event) -> None:
    """Pass the transport's messages on, and tell when it has ended."""
    try:
        async with sink:
            async for item in source:
                await sink.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        pass
    finally:
        closed.set()


async def _log_stderr(label: str, fd: int) -> None:
    """The child's stderr, line by line, under its label."""
    stream = trio.lowlevel.FdStream(fd)
    buffer = b""
    async with stream:
        while True:
            chunk = await stream.receive_some(4096)
            if not chunk:
                break
            *lines, buffer = (buffer + chunk).split(b"\n")
            if len(buffer) > STDERR_LINE_MAX:
                lines.append(buffer)
                buffer = b""
            for line in lines:
                log.info("[%s] %s", label, line.decode(errors="replace").rstrip())
    if buffer.strip():
        log.info("[%s] %s", label, buffer.decode(errors="replace").rstrip())


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = exc.exceptions[0] if exc.exceptions else exc
        return _describe(inner)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
