"""The model client: one ``httpx.AsyncClient`` per process, used inside the
caller's nursery and cancel scopes.

Streaming requests deliver each parsed delta through an ``on_delta`` callback
as it arrives, so the caller decides where text goes and a slow consumer
slows the upstream read (no buffering here). Retries happen only while
nothing has reached the consumer; afterwards a failure is final (the
consumer already has the partial text).
"""

from __future__ import annotations

import json
import logging
import math
import random
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from http.cookiejar import CookieJar
from typing import Any

import httpx
import orjson
import trio

from .. import metrics
from ..config import CompactionConfig, ModelConfig
from ..endings import ErrorCode
from ..events import Usage
from ..recording import TapTransport
from ..redaction import shown_url
from ..retry import backoff_delay, parse_retry_after
from ..wire.chat_chunks import (
    AssistantMessage,
    ChatChunkAccumulator,
    ChunkDelta,
    merge_deltas,
    message_from_completion,
)
from ..wire.context import overflow_of
from ..wire.messages import ChatTool, Message
from ..wire.model_window import ContextWindow
from ..wire.responses_stream import (
    ResponsesStreamAccumulator,
    chat_messages_to_responses_input,
    chat_tools_to_responses_tools,
    message_from_response,
)
from ..wire.sse import SSEDecoder, SSEError, SSEEvent
from ..wire.upstream_fields import ChunkError, ProviderError
from ..wire.upstream_json import loads_upstream
from .answer_end import DRAIN_GRACE, USAGE_GRACE, AnswerEnd
from .context_window import WindowFinder
from .endpoints import credentials, endpoint
from .errors import NO_MODEL_SERVER, ModelError, request_refused
from .http_body import open_body
from .pool import SOCKET_READS, PooledTransport
from .stream_support import StreamSupport
from .watchdog import Expiry, StreamWatchdog

__all__ = [
    "ModelClient",
    "ModelRequest",
    "ModelResponse",
    "OnDelta",
    "Relayed",
    "Target",
    "list_models",
    "make_http_client",
]

log = logging.getLogger("hermes_trio.llm")

OnDelta = Callable[[ChunkDelta], Awaitable[None]]

# Statuses a server sends when it will not stream a request; the same
# request is then tried once without ``stream``, and only that retry's
# success says streaming itself was the problem.
_STREAM_REFUSAL_STATUSES = frozenset({400, 415, 422, 501})
_MAX_RETRY_AFTER = 60.0
# Longest run of stream processing between two scheduler checkpoints. A
# burst already buffered would otherwise hold every other task for the slice
# in each scheduler pass, and the first frame needs several passes to leave
# (measured: 5 ms slices added ~4 ms to the first token of a burst, 0.2 ms
# slices cost ~10% of burst throughput).
_TIME_SLICE = 0.0002
# Bounds on what a model server can make us hold besides a whole answer
# (``model.max_answer_bytes``): one SSE event still being received (a line
# that never ends), an error body.
_MAX_EVENT_BYTES = 16 * 1024 * 1024
_MAX_ERROR_BYTES = 64 * 1024
# A model list with every card in it (OpenRouter lists hundreds, each with
# its description) is read whole to find one card's window.
_MAX_CARDS_BYTES = 16 * 1024 * 1024
# What ``GET /models`` may weigh when only the names are wanted.
_MAX_LIST_BYTES = 1024 * 1024
# A non-streamed answer from this size on is parsed in a worker thread:
# tens of megabytes hold the event loop, and every other stream, for up to
# a second.
_THREAD_FROM = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Target:
    """One model on one server: the primary or a fallback."""

    name: str
    base_url: str
    api_key: str | None
    api_mode: str

    @property
    def where(self) -> str:
        """The server's URL as messages show it: no credentials, no query."""
        return shown_url(self.base_url)


@dataclass(frozen=True, slots=True)
class ModelRequest:
    messages: list[Message]
    tools: Sequence[ChatTool] = ()
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ModelResponse:
    message: AssistantMessage
    usage: Usage | None


class _Delivery:
    """Tracks what has reached the consumer, which decides whether a retry
    is still silent."""

    __slots__ = ("delivered", "on_delta")

    def __init__(self, on_delta: OnDelta) -> None:
        self.on_delta = on_delta
        self.delivered = False

    async def __call__(self, delta: ChunkDelta) -> None:
        if delta.content or delta.reasoning or delta.tool_calls:
            self.delivered = True
            await self.on_delta(delta)


class _EventReader:
    """Reads one SSE body: events to the accumulator, deltas to the consumer."""

    def __init__(
        self,
        responses_mode: bool,
        delivery: _Delivery,
        watchdog: StreamWatchdog,
        *,
        wants_usage: bool,
        max_bytes: int,
    ) -> None:
        self.responses_mode = responses_mode
        self.acc: ChatChunkAccumulator | ResponsesStreamAccumulator = (
            ResponsesStreamAccumulator() if responses_mode else ChatChunkAccumulator()
        )
        self.decoder = SSEDecoder(max_buffer=_MAX_EVENT_BYTES)
        self.delivery = delivery
        self.watchdog = watchdog
        self.end = AnswerEnd(wants_usage=wants_usage)
        self.max_bytes = max_bytes
        self.received = 0
        self.got_event = False
        #: ``[DONE]``, or the Responses stream's terminal event.
        self.finished = False
        #: The answer said it finished, then the stream went quiet (or broke)
        #: for the grace ``end`` gave: complete, and not read to its end.
        self.went_quiet = False
        # Whether the last piece changed what ``end`` knows.
        self._noted = False

    def _feed(self, raw: bytes) -> list[ChunkDelta]:
        deltas: list[ChunkDelta] = []
        end = self.end
        for event in self.decoder.feed(raw):
            if not isinstance(event, SSEEvent):
                continue
            self.got_event = True
            delta, self.finished = _feed(self.acc, event, self.responses_mode)
            if delta is not None:
                deltas.append(delta)
                if delta.finish_reason:
                    end.finish(
                        with_answer=bool(delta.content or delta.reasoning or delta.tool_calls),
                        usage_known=self.acc.usage is not None,
                    )
                    self._noted = True
                elif end.said:
                    if delta.content or delta.reasoning or delta.tool_calls:
                        end.more()
                        self._noted = True
                    elif end.finishing and self.acc.usage is not None:
                        end.usage()
                        self._noted = True
            if self.finished:
                break
        return deltas

    async def read(self, chunks: AsyncIterator[bytes]) -> None:
        """Until the stream ends or finishes, or its answer said it finished
        and the stream then went quiet for the grace ``end`` gives."""
        watchdog = self.watchdog
        end = self.end
        slice_start = trio.current_time()
        reads = SOCKET_READS.count
        quiet_at = math.inf
        while True:
            if end.said:
                raw = await self._read_after_finish(chunks, quiet_at)
                if raw is None:
                    return
            else:
                try:
                    raw = await anext(chunks)
                except StopAsyncIteration:
                    return
            self.received += len(raw)
            if self.received > self.max_bytes:
                raise _too_big(self.max_bytes)
            self._noted = False
            try:
                deltas = self._feed(raw)
            except SSEError:
                if end.finishing:
                    # Garbage after a complete answer costs the connection only.
                    self.went_quiet = True
                    return
                raise
            if deltas:
                delta = merge_deltas(deltas)
                if delta.content or delta.reasoning or delta.tool_calls or delta.finish_reason:
                    # Some of the answer; empty and role-only chunks are not.
                    first = not watchdog.seen
                    arrived = watchdog.beat()
                    # What arrived in one read goes on as one delta: a burst
                    # costs the consumers one event, not one per token.
                    watchdog.busy = True  # a slow consumer is not model silence
                    await self.delivery(delta)
                    watchdog.busy = False
                    now = watchdog.beat()
                    if SOCKET_READS.count != reads:
                        # This piece took a socket read, which checkpointed:
                        # the slice began there. A paced token (one read
                        # each) so costs no scheduler pass of its own.
                        reads = SOCKET_READS.count
                        slice_start = arrived
                    if first or now - slice_start >= _TIME_SLICE:
                        # Reading a burst that is already buffered never
                        # blocks, so without this the consumers (and every
                        # other stream) would wait for its end.
                        await trio.lowlevel.checkpoint()
                        slice_start = trio.current_time()
            if self.finished:
                return
            if self._noted:
                # From the first finish_reason on, silence ends the answer
                # instead of failing it, after the grace ``end`` gives.
                grace = end.grace(watchdog.idle)
                assert grace is not None
                quiet_at = trio.current_time() + grace
                watchdog.paused = True

    async def _read_after_finish(
        self, chunks: AsyncIterator[bytes], quiet_at: float
    ) -> bytes | None:
        """The next piece of a stream whose answer said it finished; None
        when the stream ends, or stays quiet until ``quiet_at``."""
        with trio.move_on_at(quiet_at):
            try:
                return await anext(chunks)
            except StopAsyncIteration:
                return None
            except httpx.HTTPError:
                if not self.end.finishing:
                    raise
                # The answer is complete; a connection that ends badly after
                # it is just not reused.
                self.went_quiet = True
                return None
        self.went_quiet = True
        return None


@dataclass(frozen=True, slots=True)
class Relayed:
    """A model server's answer to :meth:`ModelClient.relay`, as it came."""

    status: int
    headers: Mapping[str, str]
    #: The body's pieces (content decoding undone); a failure to read is a
    #: :class:`ModelError`.
    pieces: AsyncIterator[bytes]


class _Relayed:
    """A relayed body's pieces, with the model client's error mapping."""

    __slots__ = ("_errors", "_pieces", "_started")

    def __init__(
        self,
        pieces: AsyncIterator[bytes],
        errors: Callable[[], AbstractContextManager[None]],
        started: list[bool],
    ) -> None:
        self._pieces = pieces
        self._errors = errors
        self._started = started

    def __aiter__(self) -> _Relayed:
        return self

    async def __anext__(self) -> bytes:
        with self._errors():
            piece = await anext(self._pieces)
        self._started[0] = True
        return piece


class _StreamRefused(Exception):
    """The server refused a streamed request with a status that may mean it
    cannot stream (a 4xx); only a successful non-streamed retry shows that."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _SetCookiesOnly(httpx.Cookies):
    """Cookies read only from an answer that sets one: httpx otherwise
    builds a urllib request for every answer just to look (about 5% of a
    request's CPU). What is kept and sent stays httpx's own."""

    def extract_cookies(self, response: httpx.Response) -> None:
        if "set-cookie" in response.headers:
            super().extract_cookies(response)


class _ModelHttpClient(httpx.AsyncClient):
    """httpx's client, its cookies in :class:`_SetCookiesOnly`."""

    def __init__(
        self,
        *,
        timeout: httpx.Timeout,
        transport: httpx.AsyncBaseTransport | None = None,
        limits: httpx.Limits | None = None,
    ) -> None:
        if limits is None:
            super().__init__(timeout=timeout, transport=transport)
        else:
            super().__init__(timeout=timeout, transport=transport, limits=limits)
        self._model_cookies = _SetCookiesOnly()

    @property
    def cookies(self) -> httpx.Cookies:
        return self._model_cookies

    @cookies.setter
    def cookies(
        self, cookies: httpx.Cookies | CookieJar | dict[str, str] | list[tuple[str, str]]
    ) -> None:
        self._model_cookies = _SetCookiesOnly(cookies)


def make_http_client(
    config: ModelConfig, *, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    """The process's one HTTP client for model servers.

    ``transport`` replaces the network (an in-process model double in
    tests): every request goes to it, whatever the environment's proxy
    settings say.
    """
    timeouts = config.timeouts
    # Reads are bounded by trio cancel scopes (first token, idle) so that
    # MockClock drives them and the limits differ before and after the first
    # byte; httpx only bounds connecting.
    timeout = httpx.Timeout(connect=timeouts.connect, read=None, write=60.0, pool=None)
    if transport is not None:
        # httpx mounts no proxy from the environment beside a given transport.
        return _ModelHttpClient(timeout=timeout, transport=TapTransport(transport))
    if urllib.request.getproxies():
        # httpx honours HTTP(S)_PROXY only with its own transport.
        return _ModelHttpClient(
            timeout=timeout,
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        )
    # The tap copies a recorded turn's requests (``--record``); others pass.
    return _ModelHttpClient(timeout=timeout, transport=TapTransport(PooledTransport(max_idle=64)))


class ModelClient:
    def __init__(
        self,
        config: ModelConfig,
        http: httpx.AsyncClient,
        *,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.http = http
        self._rng = rng or random.Random()
        self._streams = StreamSupport()
        self._listed_model: str | None = None
        # Model servers already said to hold answers without their usage.
        self._usage_missing: set[str] = set()
        self._windows = WindowFinder()

    def targets(self, model: str | None = None) -> list[Target]:
        cfg = self.config
        if not cfg.base_url:
            raise ModelError(
                NO_MODEL_SERVER,
                code=ErrorCode.MODEL_UNREACHABLE,
            )
        name = model or cfg.name or self._listed_model or "default"
        primary = Target(name, cfg.base_url, cfg.api_key, cfg.api_mode)
        chain = [primary]
        for fb in cfg.fallbacks:
            chain.append(
                Target(
                    fb.name,
                    fb.base_url or cfg.base_url,
                    fb.api_key if fb.api_key is not None else cfg.api_key,
                    fb.api_mode or cfg.api_mode,
                )
            )
        return chain

    async def complete(
        self,
        request: ModelRequest,
        *,
        stream: bool,
        on_delta: OnDelta,
        model: str | None = None,
    ) -> ModelResponse:
        """Run one model request down the fallback chain."""
        if not (model or self.config.name or self._listed_model):
            await self._pick_listed_model()
        delivery = _Delivery(on_delta)
        failures: list[tuple[Target, ModelError]] = []
        chain = self.targets(model)
        for position, target in enumerate(chain):
            try:
                return await self._complete_target(target, request, stream, delivery)
            except ModelError as exc:
                if delivery.delivered:
                    raise
                failures.append((target, exc))
                metrics.UPSTREAM_ERRORS.labels(exc.code or ErrorCode.MODEL_ERROR).inc()
                if position + 1 < len(chain):
                    metrics.UPSTREAM_FALLBACKS.inc()
                    log.warning(
                        "model %s failed before answering (%s); trying fallback model %s",
                        target.name,
                        exc.message,
                        chain[position + 1].name,
                    )
        first = failures[0][1]
        if len(failures) == 1:
            raise first
        tried = "; ".join(f"{t.name}: {e.message}" for t, e in failures)
        raise ModelError(
            f"every configured model failed ({tried})",
            code=failures[-1][1].code,
            status=failures[-1][1].status,
        )

    async def _complete_target(
        self, target: Target, request: ModelRequest, stream: bool, delivery: _Delivery
    ) -> ModelResponse:
        attempt = 0
        while True:
            try:
                if stream and self._streams.allows(_stream_key(target), now=trio.current_time()):
                    metrics.UPSTREAM_REQUESTS.labels("stream").inc()
                    try:
                        return await self._stream_once(target, request, delivery)
                    except _StreamRefused as refused:
                        # Whatever the plain request answers is the answer:
                        # the same 4xx again means the request was bad, and
                        # nothing is remembered.
                        metrics.UPSTREAM_REQUESTS.labels("plain").inc()
                        response = await self._plain_once(target, request, delivery)
                        self._no_streaming(target, refused.reason)
                        return response
                metrics.UPSTREAM_REQUESTS.labels("plain").inc()
                return await self._plain_once(target, request, delivery)
            except ModelError as exc:
                if delivery.delivered or not exc.retryable or attempt >= self.config.max_retries:
                    raise
                delay = exc.retry_after
                if delay is None:
                    delay = backoff_delay(
                        attempt, self.config.backoff_base, self.config.backoff_max, self._rng
                    )
                delay = min(delay, _MAX_RETRY_AFTER)
                metrics.UPSTREAM_RETRIES.inc()
                log.info(
                    "model %s: %s; retry %d of %d in %.2f s",
                    target.name,
                    exc.message,
                    attempt + 1,
                    self.config.max_retries,
                    delay,
                )
                await trio.sleep(delay)
                attempt += 1

    async def _pick_listed_model(self) -> None:
        """With no model name configured, use the first one the server lists.

        Servers that serve one model (llama.cpp, a vLLM instance) answer any
        name, but Ollama, OpenAI and most others want a real one. A server
        that cannot list its models gets "default" and says what it thinks.
        """
        with trio.move_on_after(self.config.timeouts.connect + 5):
            try:
                await self.probe()
            except ModelError:
                return

    async def models(self) -> list[dict[str, object]]:
        """The models the server lists (``GET /models``), as it describes
        them. Raises :class:`ModelError` when it cannot be reached (no
        ``status``) or its answer is not a model list (the answer's status)."""
        target = self.targets()[0]
        with _model_errors(target, _failed(target)):
            async with self.http.stream(
                "GET", endpoint(target.base_url, "/models"), headers=credentials(target.api_key)
            ) as response:
                raw = await _read_capped(response, _MAX_LIST_BYTES)
                status = response.status_code
        return _model_cards(target, status, raw)

    @asynccontextmanager
    async def relay(self, body: dict[str, Any]) -> AsyncIterator[Relayed]:
        """Send a chat request as it came (``POST /chat/completions`` to the
        primary model server, with its key) and hand back its answer as the
        model server sends it: status, headers and the body's pieces, for
        the caller to pass on (the API server's plain model routes,
        ``doctor``'s checks). No retry, no fallback, no parsing: the answer
        is the model server's. A failure to connect or read raises
        :class:`ModelError`, from the same mapping as every other request;
        the block's own exceptions pass as they are. The body is closed as
        the block ends."""
        target = self.targets()[0]
        headers = {"Content-Type": "application/json", **credentials(target.api_key)}
        async with AsyncExitStack() as stack:
            started = [False]

            def errors() -> AbstractContextManager[None]:
                return _model_errors(target, lambda exc: _dropped(target, exc, started[0]))

            with errors():
                response = await stack.enter_async_context(
                    self.http.stream(
                        "POST",
                        endpoint(target.base_url, "/chat/completions"),
                        content=_json_bytes(body),
                        headers=headers,
                    )
                )
                pieces = await stack.enter_async_context(open_body(response))
            yield Relayed(response.status_code, response.headers, _Relayed(pieces, errors, started))

    async def probe(self) -> None:
        """Ask the server for its models (``GET /models``).

        Raises :class:`ModelError` when it cannot be reached. With no model
        name configured, remembers the first model it lists.
        """
        try:
            listed = await self.models()
        except ModelError as exc:
            if exc.status is None:
                raise
            return
        if self.config.name or self._listed_model or not listed:
            return
        first = listed[0].get("id")
        if isinstance(first, str) and first:
            self._listed_model = first
            log.info(
                "model.name is not set: using %r, the first model %s lists "
                "(set model.name or HERMES_MODEL to choose)",
                first,
                shown_url(self.config.base_url or ""),
            )

    async def context_window(
        self, model: str | None = None, default: int = CompactionConfig.default_window
    ) -> ContextWindow:
        """How many tokens ``model`` (the configured one by default) reads
        at most, and where that number came from.

        ``model.context_window`` wins without a request; else the model
        server is asked once (``context_window.py``: its model card,
        llama.cpp's ``/props``, Ollama's ``/api/show``, LM Studio's
        ``/api/v0/models``), and when it does not say, ``default`` (pass
        ``compaction.default_window``) is the answer. Raises
        :class:`ModelError` only when no model server is configured.
        """
        if self.config.context_window is not None:
            return ContextWindow(self.config.context_window, "config")
        if not (model or self.config.name or self._listed_model):
            await self._pick_listed_model()
        target = self.targets(model)[0]

        async def ask(method: str, url: str, body: dict[str, Any] | None) -> object:
            return await self._ask_json(target, method, url, body)

        return await self._windows.find(ask, target.base_url, target.name, default)

    async def _ask_json(
        self, target: Target, method: str, url: str, body: dict[str, Any] | None
    ) -> object:
        """The decoded answer of a 200 to one small question to the model
        server; None for another status or a body that is not JSON."""
        async with self.http.stream(
            method,
            url,
            content=None if body is None else _json_bytes(body),
            headers=self._headers(target, stream=False),
        ) as response:
            status = response.status_code
            raw = await _read_capped(
                response, _MAX_CARDS_BYTES if status == 200 else _MAX_ERROR_BYTES
            )
        if status != 200:
            return None
        try:
            return loads_upstream(raw)
        except ValueError:
            return None

    def _no_streaming(self, target: Target, reason: str) -> None:
        """A stream request was refused and answered without streaming."""
        self._streams.refused(_stream_key(target), now=trio.current_time())
        log.warning(
            "model %s at %s cannot stream (%s); asking it without streaming "
            "for the next %g minutes",
            target.name,
            target.where,
            reason,
            StreamSupport.TTL / 60,
        )

    def _no_usage(self, target: Target) -> None:
        """Say once per model server that it holds answers without their usage."""
        if target.base_url in self._usage_missing:
            return
        self._usage_missing.add(target.base_url)
        log.warning(
            "the model server at %s ended an answer but sent neither the usage "
            "chunk it was asked for nor [DONE] within %g s, and held the connection "
            "open; such answers count no tokens (said once; model.include_usage: "
            "false stops asking for it)",
            target.where,
            USAGE_GRACE,
        )

    # -- one HTTP exchange -------------------------------------------------

    def _headers(self, target: Target, *, stream: bool) -> dict[str, str]:
        headers = {
            "Accept": "text/event-stream" if stream else "application/json",
            "Content-Type": "application/json",
        }
        headers.update(credentials(target.api_key))
        return headers

    def _body(self, target: Target, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        params = dict(request.params)
        if target.api_mode == "responses":
            instructions, items = chat_messages_to_responses_input(request.messages)
            body: dict[str, Any] = {"model": target.name, "input": items}
            if instructions:
                body["instructions"] = instructions
            if request.tools:
                body["tools"] = chat_tools_to_responses_tools(list(request.tools))
            for old, new in (
                ("max_tokens", "max_output_tokens"),
                ("max_completion_tokens", "max_output_tokens"),
            ):
                if old in params:
                    params[new] = params.pop(old)
            params.pop("stop", None)  # the Responses API has no stop sequences
        else:
            body = {"model": target.name, "messages": request.messages}
            if request.tools:
                body["tools"] = list(request.tools)
        body.update(params)
        body.update(self.config.extra_body)
        if stream:
            body["stream"] = True
            if target.api_mode != "responses" and self.config.include_usage:
                body["stream_options"] = {"include_usage": True}
        return body

    def _url(self, target: Target) -> str:
        path = "/responses" if target.api_mode == "responses" else "/chat/completions"
        return endpoint(target.base_url, path)

    async def _stream_once(
        self, target: Target, request: ModelRequest, delivery: _Delivery
    ) -> ModelResponse:
        timeouts = self.config.timeouts
        failure: Exception | None = None
        result: ModelResponse | None = None
        with trio.CancelScope() as scope:
            watchdog = StreamWatchdog(
                scope, first_token=timeouts.first_token, idle=timeouts.idle, total=timeouts.total
            )
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watchdog.run)
                try:
                    result = await self._read_stream(target, request, delivery, watchdog)
                except Exception as exc:
                    # Re-raised outside the nursery, so callers see it bare
                    # (a ModelError, or a consumer's closed channel).
                    failure = exc
                finally:
                    nursery.cancel_scope.cancel()
        if scope.cancelled_caught and watchdog.expired is not None:
            raise self._expired(target, watchdog.expired)
        if failure is not None:
            raise failure
        assert result is not None
        return result

    def _expired(self, target: Target, which: Expiry) -> ModelError:
        timeouts = self.config.timeouts
        if which == "idle":
            return ModelError(
                f"the model server at {target.where} went silent for {timeouts.idle:g} s "
                "in the middle of its answer (model.timeouts.idle)",
                code=ErrorCode.MODEL_TIMEOUT,
                retryable=True,
            )
        if which == "total":
            return ModelError(
                f"the model server at {target.where} was still answering after "
                f"{timeouts.total:g} s, the longest model.timeouts.total allows",
                code=ErrorCode.MODEL_TIMEOUT,
            )
        return ModelError(
            f"no answer from the model server at {target.where} within "
            f"{timeouts.first_token:g} s (model.timeouts.first_token)",
            code=ErrorCode.MODEL_TIMEOUT,
        )

    async def _read_stream(
        self,
        target: Target,
        request: ModelRequest,
        delivery: _Delivery,
        watchdog: StreamWatchdog,
    ) -> ModelResponse:
        responses_mode = target.api_mode == "responses"
        reader = _EventReader(
            responses_mode,
            delivery,
            watchdog,
            wants_usage=self.config.include_usage and not responses_mode,
            max_bytes=self.config.max_answer_bytes,
        )
        with _model_errors(target, lambda exc: _dropped(target, exc, reader.got_event)):
            async with self.http.stream(
                "POST",
                self._url(target),
                content=_json_bytes(self._body(target, request, stream=True)),
                headers=self._headers(target, stream=True),
            ) as response:
                if response.status_code != 200:
                    raw = await _read_capped(response, _MAX_ERROR_BYTES)
                    if response.status_code in _STREAM_REFUSAL_STATUSES and not _too_long(
                        response.status_code, raw
                    ):
                        raise _StreamRefused(
                            f"HTTP {response.status_code} for stream: true: {_error_fields(raw)[0]}"
                        )
                    raise _status_error(target, response, raw)
                ctype = response.headers.get("content-type", "")
                if "text/event-stream" not in ctype:
                    raw = await _read_body(response, self.config.max_answer_bytes)
                    answer = await _plain_answer(raw, responses_mode, delivery)
                    # Only now, with an answer in hand: a 200 with a proxy's
                    # HTML page in it says nothing about streaming.
                    self._no_streaming(target, f"answered {ctype or 'no content type'}")
                    return answer
                async with open_body(response) as chunks:
                    await reader.read(chunks)
                    watchdog.finish()
                    if reader.finished:
                        await _drain(chunks)
        if not reader.got_event:
            raise ModelError(
                f"the model server at {target.where} ended the stream before its first event",
                retryable=True,
            )
        if reader.went_quiet and reader.end.owes_usage:
            self._no_usage(target)
        message = reader.acc.result()
        if isinstance(reader.acc, ResponsesStreamAccumulator):
            # Only its terminal event (completed, incomplete) ends an answer.
            unfinished = not reader.acc.done
        else:
            # Some servers send [DONE] without any finish_reason.
            unfinished = not reader.finished and message.finish_reason is None
        if unfinished:
            raise ModelError(
                f"the model server at {target.where} ended the stream before finishing",
                retryable=True,
            )
        return ModelResponse(message, reader.acc.usage)

    async def _plain_once(
        self, target: Target, request: ModelRequest, delivery: _Delivery
    ) -> ModelResponse:
        timeouts = self.config.timeouts
        status = 0
        raw = b""
        with trio.move_on_after(timeouts.request) as scope, _model_errors(target, _failed(target)):
            async with self.http.stream(
                "POST",
                self._url(target),
                content=_json_bytes(self._body(target, request, stream=False)),
                headers=self._headers(target, stream=False),
            ) as response:
                status = response.status_code
                if status != 200:
                    raw = await _read_capped(response, _MAX_ERROR_BYTES)
                    raise _status_error(target, response, raw)
                raw = await _read_body(response, self.config.max_answer_bytes)
        if scope.cancelled_caught:
            raise ModelError(
                f"no answer from the model server at {target.where} within "
                f"{timeouts.request:g} s (model.timeouts.request)",
                code=ErrorCode.MODEL_TIMEOUT,
            )
        return await _plain_answer(raw, target.api_mode == "responses", delivery)


def list_models(base_url: str, api_key: str | None, *, timeout: float) -> list[dict[str, object]]:
    """:meth:`ModelClient.models` without an event loop, for ``init`` and
    for finding a local server before a command starts (both run beside no
    trio loop, or inside one that must not be re-entered). No proxy from
    the environment: these are usually loopback servers."""
    target = Target("", base_url, api_key, "chat_completions")
    with (
        _model_errors(target, _failed(target)),
        httpx.Client(timeout=timeout, trust_env=False) as http,
        http.stream(
            "GET", endpoint(base_url, "/models"), headers=credentials(api_key)
        ) as response,
    ):
        raw = b""
        for piece in response.iter_bytes():
            raw += piece
            if len(raw) > _MAX_LIST_BYTES:
                break
        status = response.status_code
    return _model_cards(target, status, raw)


def _model_cards(target: Target, status: int, raw: bytes) -> list[dict[str, object]]:
    """The cards of a ``GET /models`` answer, or the ModelError that says
    why it is not a model list."""
    if status != 200:
        raise ModelError(
            f"the model server at {target.where} answered GET /models with HTTP {status}",
            status=status,
        )
    try:
        body = loads_upstream(raw)
    except ValueError:
        body = None
    listed = body.get("data") if isinstance(body, dict) else None
    if not isinstance(listed, list):
        raise ModelError(
            f"the model server at {target.where} did not answer GET /models with a model list",
            status=status,
        )
    return [card for card in listed if isinstance(card, dict)]


def _stream_key(target: Target) -> tuple[str, str]:
    return (target.base_url, target.name)


async def _plain_answer(raw: bytes, responses_mode: bool, delivery: _Delivery) -> ModelResponse:
    """A whole (non-streamed) answer, delivered as one delta."""
    if len(raw) >= _THREAD_FROM:
        message, usage = await trio.to_thread.run_sync(
            _parse_plain, raw, responses_mode, abandon_on_cancel=True
        )
    else:
        message, usage = _parse_plain(raw, responses_mode)
    await delivery(ChunkDelta(content=message.content, reasoning=message.reasoning))
    return ModelResponse(message, usage)


def _unreachable(target: Target, exc: httpx.TransportError) -> ModelError:
    return ModelError(
        f"cannot connect to the model server at {target.where}: {exc}",
        code=ErrorCode.MODEL_UNREACHABLE,
        retryable=True,
    )


@contextmanager
def _model_errors(
    target: Target, broke: Callable[[httpx.TransportError], ModelError]
) -> Iterator[None]:
    """What the HTTP client and the answer's parsers raise, as the
    ``ModelError`` that says it; ``broke`` words a connection that broke."""
    try:
        yield
    except httpx.HTTPError as exc:
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            error = _unreachable(target, exc)
        elif isinstance(exc, httpx.TransportError):
            error = broke(exc)
        else:
            # A body that does not decompress, and the like.
            error = _broken_body(target, exc)
        error.cause = type(exc).__name__
        error.timed_out = isinstance(exc, httpx.TimeoutException)
        raise error from None
    except SSEError:
        raise ModelError(
            f"the model server sent an event of more than "
            f"{_MAX_EVENT_BYTES // 1024} KiB without ending it"
        ) from None
    except ProviderError as exc:
        raise ModelError(
            f"the model server reported an error: {exc.message}", code=ErrorCode.MODEL_ERROR
        ) from None
    except ChunkError as exc:
        raise ModelError(f"the model server sent a malformed chunk: {exc}") from None


def _dropped(target: Target, exc: httpx.TransportError, started: bool) -> ModelError:
    # Before the first event too: a stale kept-alive connection or a
    # restarting server says nothing about streaming, so the retry
    # streams again.
    if not started:
        return ModelError(
            f"the connection to the model server at {target.where} broke before "
            f"the answer started ({type(exc).__name__}: {exc})",
            retryable=True,
        )
    return ModelError(
        f"the model server at {target.where} dropped the stream ({type(exc).__name__}: {exc})",
        code=ErrorCode.MODEL_ERROR,
        retryable=True,
    )


def _failed(target: Target) -> Callable[[httpx.TransportError], ModelError]:
    return lambda exc: ModelError(
        f"the model server at {target.where} failed: {type(exc).__name__}: {exc}",
        retryable=True,
    )


def _json_bytes(body: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(body)
    except TypeError:
        pass
    # orjson refuses integers beyond 64 bits, which a client may pass through
    # (a "seed"): the model server is the one to judge them. It also refuses
    # a lone surrogate, which UTF-8 cannot carry: that goes as U+FFFD.
    try:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ModelError(f"the request cannot be written as JSON: {exc}") from None
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()


_CHAT_EVENTS = frozenset({"message", "error"})


async def _read_capped(response: httpx.Response, limit: int) -> bytes:
    """At most ``limit`` bytes of the (decoded) body; the rest is not read."""
    parts: list[bytes] = []
    size = 0
    async with open_body(response) as pieces:
        async for piece in pieces:
            parts.append(piece)
            size += len(piece)
            if size >= limit:
                break
    return b"".join(parts)[:limit]


async def _read_body(response: httpx.Response, limit: int) -> bytes:
    """The whole (decoded) body of an answer, or a ModelError past ``limit``."""
    raw = await _read_capped(response, limit + 1)
    if len(raw) > limit:
        raise _too_big(limit)
    return raw


def _too_big(limit: int) -> ModelError:
    return ModelError(
        f"the model server's answer is larger than model.max_answer_bytes ({limit} bytes)"
    )


def _broken_body(target: Target, exc: httpx.HTTPError) -> ModelError:
    return ModelError(
        f"the model server at {target.where} sent a body that cannot be read "
        f"({type(exc).__name__}: {exc})"
    )


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    """Read the body's end after ``[DONE]``: a response closed half-read
    takes its connection with it, and the next request would reconnect."""
    with trio.move_on_after(DRAIN_GRACE):
        try:
            async for _ in chunks:
                pass
        except httpx.HTTPError:
            # The answer is complete; a connection that ends badly after it
            # is just not reused.
            pass


def _feed(
    acc: ChatChunkAccumulator | ResponsesStreamAccumulator, event: SSEEvent, responses_mode: bool
) -> tuple[ChunkDelta | None, bool]:
    """Feed one SSE event: (its delta or None, whether the stream is done)."""
    if event.data == "[DONE]":
        # Some Responses servers end with it too; without a terminal event
        # before it, the answer is unfinished, which the caller reports.
        return None, True
    if responses_mode:
        assert isinstance(acc, ResponsesStreamAccumulator)
        # A plain "message" event takes its type from the data.
        delta = acc.feed_json(event.event, event.data)
        return delta, acc.done
    if event.event not in _CHAT_EVENTS:
        # Chat chunks are unnamed events; a named one is someone's extension
        # (a proxy's ping, another hermes-trio's tool events), as a browser's
        # EventSource would ignore it.
        return None, False
    assert isinstance(acc, ChatChunkAccumulator)
    return acc.feed_json(event.data), False


def _parse_plain(raw: bytes, responses_mode: bool) -> tuple[AssistantMessage, Usage | None]:
    try:
        body = loads_upstream(raw)
    except ValueError:
        raise ModelError(
            f"the model server answered with something that is not JSON: {raw[:200]!r}"
        ) from None
    try:
        if responses_mode:
            return message_from_response(body)
        return message_from_completion(body)
    except ProviderError as exc:
        raise ModelError(f"the model server reported an error: {exc.message}") from None
    except ChunkError as exc:
        raise ModelError(f"the model server sent a malformed answer: {exc}") from None


def _error_fields(raw: bytes) -> tuple[str, str | None]:
    """(message, code) of an error body: OpenAI's shape, a bare message, or text."""
    try:
        body = loads_upstream(raw)
    except ValueError:
        return raw[:300].decode("utf-8", "replace").strip() or "(empty body)", None
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        code = err.get("code")
        code = code if isinstance(code, str) and code else None
        message = err.get("message")
        if isinstance(message, str) and message:
            return message, code
        return _short_json(err), code
    if isinstance(err, str) and err:
        return err, None
    if isinstance(body, dict) and isinstance(body.get("message"), str) and body["message"]:
        return body["message"], None
    return _short_json(body), None


def _too_long(status: int, raw: bytes) -> bool:
    """A refusal of the prompt's length: asking again without streaming
    would send the same too-long prompt, so it is no sign of a server that
    cannot stream."""
    message, code = _error_fields(raw)
    return overflow_of(code, message, status) is not None


def _short_json(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)[:300]
    except (TypeError, ValueError, RecursionError):
        return f"(a JSON {type(value).__name__} nested too deep to quote)"


def _status_error(target: Target, response: httpx.Response, raw: bytes) -> ModelError:
    status = response.status_code
    retry_after = parse_retry_after(response.headers.get("retry-after"))
    message, code = _error_fields(raw)
    retryable = status == 429 or status >= 500
    if request_refused(status):
        # The request's own fault: the caller gets the model server's words
        # (and code), as if it had asked the model server itself.
        log.info("the model server at %s refused the request: HTTP %d", target.where, status)
        return ModelError(
            message,
            code=code or ErrorCode.MODEL_ERROR,
            status=status,
            retryable=retryable,
            retry_after=retry_after if status == 429 else None,
        )
    return ModelError(
        f"the model server at {target.where} answered HTTP {status}: {message}",
        code=ErrorCode.MODEL_ERROR,
        status=status,
        retryable=retryable,
        retry_after=retry_after if status in (429, 503) else None,
    )
