# PYTHON_ARGCOMPLETE_OK
"""The ``hermes-trio`` command: ``serve``, ``chat`` and ``gateway``.

Each subcommand lives in its own module and is imported only when used, so
``hermes-trio chat`` never loads the web stack.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import __version__

if TYPE_CHECKING:
    from ..config import Config

__all__ = ["main"]

# subcommand -> "module:function"; the function takes (config, args) -> exit code
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("hermes_trio.cli.serve:run_serve", "OpenAI-compatible API server"),
    "chat": ("hermes_trio.cli.chat:run_chat", "talk to the agent in this terminal"),
    "gateway": ("hermes_trio.cli.gateway:run_gateway", "chat platforms (Telegram, …) + API server"),
    "doctor": ("hermes_trio.cli.doctor:run_doctor", "check the model server, store and platforms"),
    "init": ("hermes_trio.cli.init:run_init", "write config.yaml from a few questions"),
    "completion": ("hermes_trio.cli.main:run_completion", "print the shell completion script"),
    "replay": ("hermes_trio.cli.replay:run_replay", "replay a recorded turn and check it"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hermes-trio",
        description="A streaming LLM agent runtime and OpenAI-compatible gateway.",
    )
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="config file (default: $HERMES_CONFIG, else ./config.yaml if present)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug detail")
    parser.add_argument("--log-format", choices=("text", "json"), default="text",
                        help="the API server's request lines as text (default) or JSON")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    # The same options after the subcommand too (`hermes-trio serve --config x`);
    # SUPPRESS keeps a value given before the subcommand.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS,
                        help="config file (default: $HERMES_CONFIG, else ./config.yaml)")
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="log debug detail")
    common.add_argument("--log-format", choices=("text", "json"), default=argparse.SUPPRESS,
                        help="the API server's request lines as text (default) or JSON")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str) -> argparse.ArgumentParser:
        summary = COMMANDS[name][1]
        return sub.add_parser(name, help=summary, description=f"hermes-trio {name}: {summary}.",
                              parents=[common])

    serve = add("serve")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (default 8642)")
    serve.add_argument("--workers", type=int, metavar="N",
                       help="processes sharing the port (default 1, api_server.workers)")
    # How a `--workers` supervisor starts each worker (see cli/workers.py).
    for hidden in ("--worker-index", "--worker-socket", "--worker-control"):
        serve.add_argument(hidden, type=int, help=argparse.SUPPRESS)
    _agent_flags(serve)
    _demo_flag(serve)

    chat = add("chat")
    chat.add_argument("-q", "--query", metavar="QUESTION", help="answer one question and exit")
    chat.add_argument(
        "--no-stream", action="store_true", help="wait for whole answers instead of streaming"
    )
    _agent_flags(chat)
    _demo_flag(chat)

    gateway = add("gateway")
    _agent_flags(gateway)

    replay = add("replay")
    replay.add_argument("files", metavar="FILE", nargs="+",
                        help="a recording written by --record DIR")

    completion = add("completion")
    completion.add_argument("shell", choices=("bash", "zsh", "fish"))

    init = add("init")
    init.add_argument("--non-interactive", action="store_true",
                      help="no questions: the flags below, checked, then the file")
    init.add_argument("--force", action="store_true",
                      help="overwrite an existing file without asking")
    init.add_argument("--output", metavar="PATH", default="config.yaml",
                      help="where to write (default ./config.yaml)")
    init.add_argument("--base-url", metavar="URL", help="model server base URL (…/v1)")
    init.add_argument("--model-api-key", metavar="KEY", help="the model server's API key")
    init.add_argument("--model", metavar="NAME", help="model name")
    init.add_argument("--api-key", metavar="KEY", help="the key clients of serve must send")
    init.add_argument("--telegram-token", metavar="TOKEN", help="a Telegram bot token")
    init.add_argument("--telegram-users", metavar="IDS", help="Telegram user ids allowed")
    init.add_argument("--no-check", action="store_true",
                      help="write without asking the model server or Telegram")

    doctor = add("doctor")
    doctor.add_argument("--model", metavar="NAME", help="model name to check for")
    doctor.add_argument("--base-url", metavar="URL", help="model server base URL (…/v1)")
    return parser


def _agent_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--yolo", action="store_true", help="run dangerous commands without asking")
    parser.add_argument("--model", metavar="NAME", help="model name to ask the model server for")
    parser.add_argument("--base-url", metavar="URL", help="model server base URL (…/v1)")
    parser.add_argument("--record", metavar="DIR",
                        help="write one replayable file per turn into DIR (record.dir)")


def _demo_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--demo",
        nargs="?",
        const="on",
        choices=("on", "auto"),
        help="canned answers from the built-in scripted model, no model server needed; "
        "--demo=auto: a configured or local model server if there is one, the demo otherwise",
    )


def _version() -> str:
    return __version__


def overrides_from(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if getattr(args, "yolo", False):
        overrides["agent.yolo"] = True
    if getattr(args, "model", None):
        overrides["model.name"] = args.model
    if getattr(args, "base_url", None):
        overrides["model.base_url"] = args.base_url
    if getattr(args, "record", None):
        overrides["record.dir"] = args.record
    if getattr(args, "host", None):
        overrides["api_server.host"] = args.host
    if getattr(args, "port", None) is not None:
        overrides["api_server.port"] = args.port
    if getattr(args, "workers", None) is not None:
        overrides["api_server.workers"] = args.workers
    return overrides


def choose_model_server(config: Config, args: argparse.Namespace) -> Config:
    """The model server to use: the configured one; with none, the first
    local server that answers; the demo when asked for (``--demo``) or
    when nothing was found under ``--demo=auto``. Says which, except in a
    ``serve --workers`` worker (its supervisor said it)."""
    # Imported here: the agent, the kit's model and httpx load only for a model.
    from .demo import DEMO_BANNER, demo_config
    from .discovery import discover, local_servers

    demo = getattr(args, "demo", None)
    quiet = getattr(args, "worker_index", None) is not None

    def say(text: str) -> None:
        if not quiet:
            print(f"hermes-trio {args.command}: {text}", file=sys.stderr, flush=True)

    if demo != "on" and not config.model.base_url:
        found = discover(local_servers())
        if found is not None:
            model = dataclasses.replace(
                config.model, base_url=found.base_url, name=config.model.name or found.model
            )
            say(
                f"no model server configured: using {found.name} at {found.base_url}, "
                "found on this machine"
            )
            return config.replace(model=model)
    if demo == "on" or (demo == "auto" and not config.model.base_url):
        if args.command != "serve":
            # serve says it among its start-up lines.
            say(DEMO_BANNER)
        return demo_config(config)
    return config


def _request_ids(args: argparse.Namespace) -> None:
    """Log lines name the request they belong to (serve and gateway, which
    load the server anyway; the others leave the field empty)."""
    if args.command in ("serve", "gateway"):
        # Imported here: the other commands never load the web stack.
        from ..server.edge import request_log

        request_log.JSON_LINES = args.log_format == "json"
        id_filter: logging.Filter = request_log.RequestIdFilter()
    else:
        id_filter = _NoRequestId()
    for handler in logging.getLogger().handlers:
        handler.addFilter(id_filter)


class _NoRequestId(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = ""
        return True


def run_completion(config: Config, args: argparse.Namespace) -> int:
    """The completion script for one shell (argcomplete's)."""
    # Imported here: argcomplete's scripts only for the completion command.
    from argcomplete.shell_integration import shellcode

    print(shellcode(["hermes-trio"], shell=args.shell))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:
        # The shell asks what can follow: argcomplete answers and exits
        # (imported here: only a completing shell loads it).
        import argcomplete

        argcomplete.autocomplete(parser)
    args = parser.parse_args(argv)
    # Imported here: --version and --help answer before the config (and
    # its YAML parser and wire types) is needed.
    from ..config import Config, ConfigError, load_config

    # What `serve --workers` runs again in each worker.
    args.argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s%(request_id)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    _request_ids(args)
    if not args.verbose:
        # httpx logs every request at INFO, which would drown the product's own lines.
        logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        # `init` writes the file and `completion` needs none: neither reads it.
        config = (
            Config()
            if args.command in ("init", "completion", "replay")
            else load_config(args.config, overrides=overrides_from(args))
        )
    except ConfigError as exc:
        print(f"hermes-trio: {exc}", file=sys.stderr)
        return 2
    if args.command in ("serve", "chat", "gateway"):
        try:
            config = choose_model_server(config, args)
        except ValueError as exc:
            print(f"hermes-trio: {exc}", file=sys.stderr)
            return 2
    target, _ = COMMANDS[args.command]
    module_name, func_name = target.split(":")
    func = getattr(importlib.import_module(module_name), func_name)
    try:
        return int(func(config, args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
