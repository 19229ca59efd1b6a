"""``hermes-trio doctor``: is this set-up ready? One line per check — the
config, the model server (reachable, lists the model, streams, calls
tools, its context window and who said so), the store, the API server's
settings, each enabled chat platform's credentials, each MCP server and its
tools — and exit status 1 when one failed.

Nothing is sent to any chat and nothing is written to the store; the model
server answers two tiny requests (and the questions about its window).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

import trio

from ..config import Config
from ..consumers.messenger import PlatformError
from ..escapes import escape_controls
from ..gateway import build_adapters
from ..llm import NO_MODEL_SERVER, ModelClient, ModelError, make_http_client
from ..platforms.http import NETWORK_ERRORS, SharedClient, shared_client
from ..redaction import shown_url
from ..server.admission.keys import keys_of
from ..server.run import startup_problem
from ..store import StoreOpenError, open_store, store_path
from ..tools.registry import ToolRegistry
from .process import EXIT_FAILED, EXIT_OK, Shell

__all__ = ["run_doctor"]

shell = Shell("doctor")

# Each check's time limit (a model server's first answer may be slow).
CHECK_TIMEOUT = 60.0
# What of a check's answer is read (two tiny requests).
MAX_ANSWER_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        # Details quote servers (an MCP server's error and tool names, a
        # model server's answer): their control characters stay visible.
        shown = escape_controls(f"{self.name}: {self.detail}")
        return f"{'ok  ' if self.ok else 'FAIL'}  {shown}"


def run_doctor(config: Config, args: argparse.Namespace | None = None) -> int:
    return shell.run(_main, config)


async def _main(config: Config) -> int:
    checks = [Check("config", True, _sources(config))]
    print(checks[0].line(), flush=True)
    async with make_http_client(config.model) as model_http, shared_client() as http:
        client = ModelClient(config.model, model_http)
        steps: list[Callable[[], Awaitable[list[Check]]]] = [
            lambda: _model_server(config, client),
            lambda: _store(config),
            lambda: _api_server(config),
            lambda: _mcp_servers(config),
            *_platforms(config, http),
        ]
        for step in steps:
            results = await step()
            for result in results:
                print(result.line(), flush=True)
            checks += results
    failed = [c for c in checks if not c.ok]
    shell.say(
        f"{len(failed)} of {len(checks)} checks failed" if failed else "all checks passed",
        err=bool(failed),
    )
    return EXIT_FAILED if failed else EXIT_OK


def _sources(config: Config) -> str:
    """Where the settings came from: the config file and the .env files."""
    read = config.source or "no config file: defaults and environment"
    dotenv = ", ".join(config.env_files) if config.env_files else "none"
    return f"{read}; .env files read: {dotenv}"


async def _model_server(config: Config, client: ModelClient) -> list[Check]:
    model = config.model
    if not model.base_url:
        return [Check("model server", False, NO_MODEL_SERVER)]
    where = shown_url(model.base_url)
    try:
        with trio.fail_after(CHECK_TIMEOUT):
            listed = await client.models()
    except trio.TooSlowError as exc:
        return [Check("model server", False, f"{where} is not reachable ({_why(exc)})")]
    except ModelError as exc:
        if exc.status is None:
            return [Check("model server", False, f"not reachable: {exc.message}")]
        if exc.status != 200:
            return [Check("model server", False, f"{where}: GET /models answered {exc.status}")]
        return [Check("model server", False, f"{where}: GET /models is not a model list")]
    names = [name for card in listed if isinstance(name := card.get("id"), str)]
    name = model.name or (names[0] if names else None)
    if name is None:
        return [Check("model server", False, f"{where} lists no models (set model.name)")]
    if model.name and model.name not in names:
        shown = ", ".join(names[:8]) or "none"
        return [
            Check("model server", False, f"{where} does not list '{model.name}' (it lists {shown})")
        ]
    results = [Check("model server", True, f"{where} lists '{name}'")]
    results.append(await _streams(client, name))
    results.append(await _calls_tools(client, name))
    results.append(await _context_window(config, client, name))
    return results


async def _context_window(config: Config, client: ModelClient, name: str) -> Check:
    """Which window compaction will work with, and who said so."""
    default = config.compaction.default_window
    window = await client.context_window(name, default=default)
    if window.source == "default":
        # Not a failure: compaction still works, on a guess.
        return Check(
            "context window",
            True,
            f"{window.tokens} tokens assumed (compaction.default_window): the model server "
            "does not say; set model.context_window to the model's real window",
        )
    where = "model.context_window" if window.source == "config" else window.source
    return Check("context window", True, f"{window.tokens} tokens, from {where}")


@dataclass(frozen=True)
class _Answer:
    status: int
    content_type: str
    raw: bytes


async def _ask(client: ModelClient, body: dict[str, object]) -> _Answer:
    """The model server's whole answer to one chat request, as it came;
    ModelError or trio.TooSlowError when there is none."""
    with trio.fail_after(CHECK_TIMEOUT):
        async with client.relay(body) as answer:
            raw = bytearray()
            async for piece in answer.pieces:
                raw += piece
                if len(raw) > MAX_ANSWER_BYTES:
                    break
            return _Answer(answer.status, answer.headers.get("Content-Type", ""), bytes(raw))


async def _streams(client: ModelClient, name: str) -> Check:
    body = {
        "model": name,
        "stream": True,
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "Say OK."}],
    }
    try:
        reply = await _ask(client, body)
    except (ModelError, trio.TooSlowError) as exc:
        return Check("streaming", False, _why(exc))
    if reply.status != 200:
        return Check("streaming", False, f"answered {reply.status}: {_error(reply.raw)}")
    text = reply.raw.decode(errors="replace")
    if not reply.content_type.startswith("text/event-stream") or "data:" not in text:
        return Check(
            "streaming",
            False,
            "the model server answered without streaming; hermes-trio falls back to whole "
            "answers (streaming.enabled: false avoids the extra request)",
        )
    return Check("streaming", True, "answers stream token by token")


async def _calls_tools(client: ModelClient, name: str) -> Check:
    tool = {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "The current time.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    body = {
        "model": name,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "What time is it? Use the tool."}],
        "tools": [tool],
        "tool_choice": {"type": "function", "function": {"name": "get_time"}},
    }
    try:
        reply = await _ask(client, body)
    except (ModelError, trio.TooSlowError) as exc:
        return Check("tool calling", False, _why(exc))
    if reply.status != 200:
        return Check("tool calling", False, f"answered {reply.status}: {_error(reply.raw)}")
    try:
        calls = json.loads(reply.raw)["choices"][0]["message"].get("tool_calls") or []
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        calls = []
    if not calls:
        return Check(
            "tool calling",
            False,
            "the model answered without calling the tool; the agent's tools need a model "
            "(and server settings) with tool calling",
        )
    return Check("tool calling", True, "the model calls tools")


async def _store(config: Config) -> list[Check]:
    where = shown_url(config.store.url) if config.store.url else str(store_path(config.store))
    try:
        with trio.fail_after(CHECK_TIMEOUT):
            async with open_store(config) as store:
                await store.conversation("doctor:probe")
    except StoreOpenError as exc:
        return [Check("store", False, str(exc))]
    except trio.TooSlowError:
        return [Check("store", False, f"{where} did not answer in {CHECK_TIMEOUT:.0f} s")]
    kind = "PostgreSQL" if config.store.url else "SQLite"
    return [Check("store", True, f"{kind} at {where}")]


async def _api_server(config: Config) -> list[Check]:
    api = config.api_server
    # The model server has its own check: only the API server's settings
    # (and the keys file they name) here.
    problem = startup_problem(
        config.replace(model=dataclasses.replace(config.model, base_url="http://x"))
    )
    if problem:
        return [Check("api server", False, problem)]
    keys = keys_of(api)
    auth = (
        f"an API key is required ({len(keys)} key{'s' if len(keys) != 1 else ''})"
        if keys
        else "no API key (loopback only)"
    )
    return [Check("api server", True, f"would listen on {api.host}:{api.port}, {auth}")]


async def _mcp_servers(config: Config) -> list[Check]:
    """Each enabled MCP server: did it answer, and with which tools."""
    checks: list[Check] = []
    if not any(server.enabled for server in config.mcp_servers.values()):
        return checks
    # Imported here: the MCP SDK costs most of a second, only for a config
    # that has an MCP server to check.
    from ..mcp import open_mcp_servers

    async with open_mcp_servers(config.mcp_servers, ToolRegistry()) as running:
        for label, server in running.servers.items():
            if server.up:
                names = ", ".join(spec.tool for spec in server.tools.values()) or "no tools"
                checks.append(Check(f"mcp server {label}", True, f"answered; tools: {names}"))
            else:
                checks.append(Check(f"mcp server {label}", False, server.error or "no answer"))
    return checks


def _platforms(
    config: Config, http: SharedClient
) -> list[Callable[[], Awaitable[list[Check]]]]:
    try:
        adapters = build_adapters(config, http)
    except PlatformError as exc:
        refusal = [Check("platforms", False, str(exc))]

        async def refused() -> list[Check]:
            return refusal

        return [refused]
    return [partial(_platform, adapter.name, adapter.whoami) for adapter in adapters]


async def _platform(name: str, whoami: Callable[[], Awaitable[str]]) -> list[Check]:
    try:
        with trio.fail_after(CHECK_TIMEOUT):
            who = await whoami()
    except PlatformError as exc:
        return [Check(name, False, str(exc))]
    except trio.TooSlowError as exc:
        return [Check(name, False, f"not reachable ({_why(exc)})")]
    except NETWORK_ERRORS as exc:
        return [Check(name, False, f"not reachable ({_why(exc)})")]
    return [Check(name, True, f"credentials accepted ({who})")]


def _why(exc: BaseException) -> str:
    if isinstance(exc, trio.TooSlowError):
        return f"no answer in {CHECK_TIMEOUT:.0f} s"
    if isinstance(exc, ModelError):
        return exc.message
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _error(raw: bytes) -> str:
    try:
        error = json.loads(raw).get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        message = None
    text = str(message) if message else raw.decode(errors="replace")
    return json.dumps(text[:200])[1:-1]
