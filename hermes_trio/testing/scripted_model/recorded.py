"""A model double that answers as a recording says: each request gets the
next recorded answer, its head and every piece at the recorded time since
the request, and the same ending (a transport error, or a client that
closed it first)."""

from __future__ import annotations

import urllib.parse
from typing import Any, NoReturn

import httpx
import trio

from ...recording.document import ExchangeEnd, ExchangeRecord
from ...recording.tape import piece_from_json
from ..replay_data import Recording

__all__ = ["RecordedAnswers"]

# A recorded exchange without its ``end``: no answer at all (as a transport
# error without a name), or an answer that ended with its body. Read only.
_NO_END: ExchangeEnd = {"after": 0.0, "how": "error"}
_EOM: ExchangeEnd = {"after": 0.0, "how": "eom"}


class RecordedAnswers:
    """What :meth:`ModelDouble.from_recording` answers with: each request
    gets the recording's next one like it. ``cause`` names the last thing
    it sent (``"model request 2, chunk 5"``), which a replay uses to say
    where a difference came from."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.exchanges = recording.exchanges
        self.served = 0
        #: When the turn began, on this trio clock (None: at the first
        #: request, as the recording's first request was).
        self.start: float | None = None
        #: Where ``cause`` goes: a replay shares one with its tools.
        self.sink: Any = self
        self.cause = ""

    async def answer(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        # The next recorded request like this one: a model list the live
        # process asked for (and this one need not) is passed over.
        number = self.served
        while number < len(self.exchanges) and not _same(self.exchanges[number], request):
            number += 1
        if number >= len(self.exchanges) and not _model_request(request):
            # A question the recorded process did not ask (the model's
            # window, from a newer version): a 404, as from a server of
            # another kind, and no recorded answer is passed over for it.
            return httpx.Response(
                404,
                json={
                    "error": {
                        "message": f"replay: no recorded answer for {request.method} "
                        f"{request.url.path}",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": "not_found",
                    }
                },
                request=request,
            )
        self.served = number + 1
        if number >= len(self.exchanges):
            return httpx.Response(
                500,
                json={
                    "error": {
                        "message": f"replay: the recording has only {len(self.exchanges)} "
                        "model requests",
                        "type": "server_error",
                        "param": None,
                        "code": None,
                    }
                },
                request=request,
            )
        exchange = self.exchanges[number]
        if self.start is None:
            self.start = trio.current_time() - float(exchange.get("at", 0.0))
        # A retry went out after a pause the replayed client does not take
        # (its backoff is 0): it is answered when the recorded one was sent.
        start = max(trio.current_time(), self.start + float(exchange.get("at", 0.0)))
        await trio.sleep_until(start)
        self.sink.cause = f"model request {number + 1}"
        end = exchange.get("end") or _NO_END
        if "status" not in exchange:
            await trio.sleep_until(start + float(end.get("after", 0.0)))
            if end.get("how") == "closed":
                await trio.sleep_forever()
            _raise(end, request)
        await trio.sleep_until(start + float(exchange.get("head_after", 0.0)))
        # As bytes: httpx gave the live client text it decoded from UTF-8 (or
        # Latin-1), which encoding to str would refuse past ASCII.
        headers = [(str(k).encode(), str(v).encode()) for k, v in exchange.get("headers") or []]
        return httpx.Response(
            int(exchange["status"]),
            headers=headers,
            stream=_Replayed(self, number, exchange, start, request),
            request=request,
        )


def _model_request(request: httpx.Request) -> bool:
    return request.method == "POST" and request.url.path.rsplit("/", 1)[-1] in (
        "completions",
        "responses",
    )


def _same(exchange: ExchangeRecord, request: httpx.Request) -> bool:
    # By the endpoint's name: the replay's base URL is not the live one. The
    # parser the recording's check used (recording/schema.py).
    path = urllib.parse.urlsplit(str(exchange.get("url", ""))).path
    same_endpoint = path.rsplit("/", 1)[-1] == request.url.path.rsplit("/", 1)[-1]
    return bool(exchange.get("method") == request.method and same_endpoint)


def _raise(end: ExchangeEnd, request: httpx.Request) -> NoReturn:
    kind = getattr(httpx, str(end.get("error", "")), None)
    message = str(end.get("message", "recorded transport error"))
    if isinstance(kind, type) and issubclass(kind, httpx.RequestError):
        raise kind(message, request=request)
    raise httpx.ReadError(message, request=request)


class _Replayed(httpx.AsyncByteStream):
    def __init__(
        self,
        model: RecordedAnswers,
        number: int,
        exchange: ExchangeRecord,
        start: float,
        request: httpx.Request,
    ) -> None:
        self.model = model
        self.number = number
        self.pieces = list(exchange.get("pieces") or [])
        self.end = exchange.get("end") or _EOM
        self.start = start
        self.request = request
        self.next = 0
        self.closed = False

    def __aiter__(self) -> _Replayed:
        return self

    async def __anext__(self) -> bytes:
        if self.closed:
            # As a closed socket: nothing more arrives.
            raise httpx.ReadError("the connection was closed", request=self.request)
        if self.next < len(self.pieces):
            piece = self.pieces[self.next]
            self.next += 1
            await trio.sleep_until(self.start + float(piece.get("after", 0.0)))
            self.model.sink.cause = f"model request {self.number + 1}, chunk {self.next}"
            return piece_from_json(piece)
        how = self.end.get("how", "eom")
        if how == "closed":
            # The client closed it here; the replayed client will too.
            await trio.sleep_forever()
        await trio.sleep_until(self.start + float(self.end.get("after", 0.0)))
        if how == "error":
            _raise(self.end, self.request)
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self.closed = True
