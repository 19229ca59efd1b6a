"""The app factory: :func:`create_app` builds the quart-trio app (API key
check, error handlers that answer in OpenAI's error JSON, ``/health``,
``/v1/models``) and registers each endpoint's routes (:mod:`.chat`,
:mod:`.responses`) and the chat page's (:mod:`.page`); :func:`asgi_app`
puts the request gate (origin, host, content type, CORS) and the body
deadlines in front of it (:mod:`.middleware`).

Everything reads the server's settings from ``state.settings``.
"""

from __future__ import annotations

import logging
from typing import Any

import trio
from quart import Response, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from .. import metrics
from ..listener.errors import error_body
from ..store import StoreError
from ..turn import INTERNAL_ERROR
from ..wire.chat_types import ChatModel
from .admission.keys import current_key, retry_after_header
from .approvals.route import register_approval_routes
from .chat.route import register_chat_routes
from .edge.bodies import bearer_token, json_response
from .edge.gate import GateSettings
from .edge.middleware import Front
from .edge.request_log import current_record
from .page.route import register_page_routes
from .parsing.errors import APIError, store_refused
from .relay.route import PlainModels, relay
from .responses.routes import register_responses_routes
from .state import ServerState

__all__ = ["asgi_app", "create_app"]

log = logging.getLogger("hermes_trio.server")


def create_app(state: ServerState) -> QuartTrio:
    api = state.settings
    app = QuartTrio(__name__)
    # The one body size limit: Quart applies it to a declared length at
    # once and to a chunked body as it arrives.
    app.config["MAX_CONTENT_LENGTH"] = api.max_body_bytes
    # Quart would silently end a long stream after RESPONSE_TIMEOUT (60 s).
    app.config["RESPONSE_TIMEOUT"] = None
    # The front's body deadlines replace Quart's single total one.
    app.config["BODY_TIMEOUT"] = None
    _install_errors(app, state)
    _install_key_check(app, state)
    _install_routes(app, state)
    return app


def _install_errors(app: QuartTrio, state: ServerState) -> None:
    """Every error, ours or Quart's, answers in OpenAI's error JSON."""
    api = state.settings

    @app.errorhandler(APIError)
    async def on_api_error(exc: APIError) -> Response:
        record = current_record.get()
        if record is not None:
            record.error_code = exc.code
        if exc.status == 429:
            metrics.RATE_LIMITED.labels(exc.code or "rate_limited").inc()
        return json_response(exc.body(), exc.status, exc.headers)

    @app.errorhandler(StoreError)
    async def on_store_error(exc: StoreError) -> Response:
        return await on_api_error(store_refused(exc))

    @app.errorhandler(HTTPException)
    async def on_http_error(exc: HTTPException) -> Response:
        status = exc.code or 500
        if status == 413:
            message = f"request body too large (limit {api.max_body_bytes} bytes)"
        elif status == 404:
            message = f"no such endpoint: {request.method} {request.path}"
        elif status == 405:
            message = f"method {request.method} not allowed for {request.path}"
        else:
            message = exc.description or exc.name
        return json_response(error_body(message, status=status), status)

    @app.errorhandler(Exception)
    async def on_unexpected(exc: Exception) -> Response:
        log.exception("unexpected error in %s %s", request.method, request.path)
        body = error_body(f"internal error: {type(exc).__name__}", status=500, code=INTERNAL_ERROR)
        return json_response(body, 500)


def _install_key_check(app: QuartTrio, state: ServerState) -> None:
    """The API key, checked and admitted against its budget before any route."""
    api = state.settings

    @app.before_request
    async def check_key() -> None:
        # Never a key from an earlier request on the same connection.
        current_key.set(None)
        private = request.path.startswith("/v1") or (
            request.path == "/metrics" and not api.metrics_public
        )
        if not (private and state.keys.required):
            return
        key = state.keys.find(bearer_token())
        if key is None:
            raise APIError(
                401,
                "invalid or missing API key: send 'Authorization: Bearer <key>'",
                code="invalid_api_key",
            )
        record = current_record.get()
        if record is not None:
            record.key_name = key.name
        if request.path == "/metrics":
            return
        refusal = state.keys.admit(key, trio.current_time())
        if refusal is not None:
            raise APIError(
                429,
                refusal.message,
                code=refusal.code,
                headers={"Retry-After": retry_after_header(refusal.retry_after)},
            )
        # The work the request starts (a turn, a relay) reserves the key's
        # place and is charged its tokens when it ends (admission.turn_place.TurnPlace).
        current_key.set((state.keys, key))


def _install_routes(app: QuartTrio, state: ServerState) -> None:
    """``/metrics``, ``/health``, ``/v1/models`` here, each endpoint's own
    routes from its package, and the request count per route."""
    api = state.settings

    @app.after_request
    async def count(response: Response) -> Response:
        rule = request.url_rule.rule if request.url_rule is not None else "other"
        metrics.REQUESTS.labels(rule, str(response.status_code)).inc()
        return response

    @app.get("/metrics")
    async def figures() -> Response:
        # Off the event loop: with several workers it reads their files.
        text = await trio.to_thread.run_sync(metrics.exposition)
        return Response(text, status=200, content_type=metrics.CONTENT_TYPE)

    @app.get("/health")
    async def health() -> Response:
        return json_response({"status": "ok", "turns_running": state.slots.in_use})

    def model_card() -> ChatModel:
        return {
            "id": api.model_name,
            "object": "model",
            "created": state.created,
            "owned_by": "hermes-trio",
        }

    plain = PlainModels(state) if api.upstream_models else None

    async def all_cards() -> list[ChatModel]:
        return [model_card()] + (await plain.cards() if plain is not None else [])

    @app.get("/v1/models")
    async def models() -> Response:
        return json_response({"object": "list", "data": await all_cards()})

    @app.get("/v1/models/<model_id>")
    async def model(model_id: str) -> Response:
        for card in await all_cards():
            if card["id"] == model_id:
                return json_response(card)
        raise APIError(
            404, f"model '{model_id}' does not exist", param="model", code="model_not_found"
        )

    async def divert(body: dict[str, Any]) -> Response | None:
        name = body.get("model")
        if plain is None or not isinstance(name, str) or name == api.model_name:
            return None
        if name not in await plain.names():
            return None
        return await relay(state, body)

    register_chat_routes(app, state, divert if plain is not None else None)
    register_responses_routes(app, state)
    register_approval_routes(app, state.approvals)
    register_page_routes(app)


def asgi_app(state: ServerState, *, session_key: bytes | None = None) -> Front:
    """The whole server as one ASGI app: the gate and the body deadlines in
    front of :func:`create_app`'s routes. ``session_key`` keys the session
    hashes of the request log (a random one when not given)."""
    api = state.settings
    gate = GateSettings.of(
        key=api.key, allowed_hosts=api.allowed_hosts, cors_origins=api.cors_origins
    )
    keys = state.keys
    return Front(
        create_app(state),
        gate,
        body_timeout=api.body_timeout,
        body_total_timeout=api.body_total_timeout,
        # Named keys count as much as api_server.key, also after a reload.
        key_required=lambda: keys.required,
        session_key=session_key,
        shed=state.slots.shed,
    )
